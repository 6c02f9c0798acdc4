// The dashboard's calls for managing, searching and exporting sessions, beside api.ts.
import { api } from './api.js';
import { listQuery, type ListView } from './sessions-list.js';

export { originHref, resultHref, snippetPieces, type ListView } from './sessions-list.js';

export interface ListedSession {
  sessionId: string;
  title: string;
  updatedAt: string;
  createdAt: string;
  templateSlug: string | null;
  pinned: boolean;
  archived: boolean;
  claimable?: boolean;
  /** The code host's issue or pull request it was started from. */
  origin?: { url: string; label: string } | null;
}

export interface SessionPage {
  sessions: ListedSession[];
  nextCursor: string | null;
}

export interface SearchResult {
  sessionId: string;
  title: string;
  updatedAt: string;
  pinned: boolean;
  archived: boolean;
  messageId: string | null;
  role: 'title' | 'user' | 'assistant';
  snippet: string;
  highlights: Array<[number, number]>;
}

export const listSessions = (view: ListView, template: string, cursor: string | null) => api<SessionPage>('GET', `/sessions${listQuery(view, template, cursor)}`);

export const updateSession = (id: string, change: { title?: string; pinned?: boolean; archived?: boolean }) => api<ListedSession>('PATCH', `/sessions/${id}`, change);

export const searchSessions = (q: string) => api<{ results: SearchResult[] }>('GET', `/sessions/search?q=${encodeURIComponent(q)}&limit=20`);

/** The export as a download (a plain link: the sign-in cookies go with it). */
export const exportUrl = (id: string, format: 'markdown' | 'json') => `/v1/sessions/${id}/export?format=${format}`;

