// The dashboard's calls for managing, searching and exporting sessions, beside api.ts.
import { api } from './api.js';
import { listQuery, type ListView } from './sessions-list.js';
import type { ListedSession, SearchResult, SessionPage } from './wire.js';
export type { ListedSession, SearchResult, SessionPage };

export { originHref, resultHref, snippetPieces, type ListView } from './sessions-list.js';


export const listSessions = (view: ListView, template: string, cursor: string | null) => api<SessionPage>('GET', `/sessions${listQuery(view, template, cursor)}`);

export const updateSession = (id: string, change: { title?: string; pinned?: boolean; archived?: boolean }) => api<ListedSession>('PATCH', `/sessions/${id}`, change);

export const searchSessions = (q: string) => api<{ results: SearchResult[] }>('GET', `/sessions/search?q=${encodeURIComponent(q)}&limit=20`);

/** The export as a download (a plain link: the sign-in cookies go with it). */
export const exportUrl = (id: string, format: 'markdown' | 'json') => `/v1/sessions/${id}/export?format=${format}`;

