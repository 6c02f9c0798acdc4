// The dashboard's calls for managing, searching and exporting sessions (issue 39), beside api.ts.
import { api } from './api';

export interface ListedSession {
  sessionId: string;
  title: string;
  updatedAt: string;
  createdAt: string;
  templateSlug: string | null;
  pinned: boolean;
  archived: boolean;
  claimable?: boolean;
}

export interface SessionPage {
  sessions: ListedSession[];
  nextCursor: string | null;
}

/** What the list shows: the filter's choice in the dashboard (state and pinned of the API together). */
export type ListView = 'active' | 'pinned' | 'archived' | 'all';

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

/** The query string of a page of the list. */
export function listQuery(view: ListView, template: string, cursor: string | null, limit = 50): string {
  const q = new URLSearchParams();
  if (view === 'pinned') q.set('pinned', 'true');
  else if (view !== 'active') q.set('state', view);
  if (template) q.set('template', template);
  q.set('limit', String(limit));
  if (cursor) q.set('cursor', cursor);
  return `?${q.toString()}`;
}

export const listSessions = (view: ListView, template: string, cursor: string | null) => api<SessionPage>('GET', `/sessions${listQuery(view, template, cursor)}`);

export const updateSession = (id: string, change: { title?: string; pinned?: boolean; archived?: boolean }) => api<ListedSession>('PATCH', `/sessions/${id}`, change);

export const searchSessions = (q: string) => api<{ results: SearchResult[] }>('GET', `/sessions/search?q=${encodeURIComponent(q)}&limit=20`);

/** The export as a download (a plain link: the sign-in cookies go with it). */
export const exportUrl = (id: string, format: 'markdown' | 'json') => `/v1/sessions/${id}/export?format=${format}`;

/** Where a search result opens: the session, at the message it matched (chat.tsx scrolls to it). */
export const resultHref = (r: Pick<SearchResult, 'sessionId' | 'messageId'>) => `#/sessions/${r.sessionId}${r.messageId ? `?m=${encodeURIComponent(r.messageId)}` : ''}`;

/** A snippet cut into plain and matched pieces (rendered as text: nothing in it is markup). */
export function snippetPieces(snippet: string, highlights: Array<[number, number]>): Array<{ text: string; hit: boolean }> {
  const out: Array<{ text: string; hit: boolean }> = [];
  let at = 0;
  for (const [a, b] of [...highlights].sort((x, y) => x[0] - y[0])) {
    if (a < at || b <= a || b > snippet.length) continue;
    if (a > at) out.push({ text: snippet.slice(at, a), hit: false });
    out.push({ text: snippet.slice(a, b), hit: true });
    at = b;
  }
  if (at < snippet.length) out.push({ text: snippet.slice(at), hit: false });
  return out;
}
