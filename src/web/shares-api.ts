// The dashboard's calls for sessions shared read-only and handed over: src/http/routes/v1/session-shares.routes.ts.
import { api } from './api';
import type { HandOverResult, SessionAccess, Share, SharedSession } from './wire.js';

export type { HandOverResult, SessionAccess, Share, SharedSession };
export type ShareMode = Share['mode'];
export type Person = NonNullable<Share['person']>;

const enc = encodeURIComponent;

export const sharesApi = {
  access: (sessionId: string) => api<SessionAccess>('GET', `/sessions/${enc(sessionId)}/access`),
  list: (sessionId: string) => api<{ shares: Share[] }>('GET', `/sessions/${enc(sessionId)}/shares`).then((r) => r.shares),
  create: (sessionId: string, body: { people?: string[]; teams?: string[]; mode: ShareMode }) => api<{ shares: Share[] }>('POST', `/sessions/${enc(sessionId)}/shares`, body).then((r) => r.shares),
  revoke: (sessionId: string, shareId: string) => api<void>('DELETE', `/sessions/${enc(sessionId)}/shares/${enc(shareId)}`),
  sharedWithMe: () => api<{ sessions: SharedSession[] }>('GET', '/sessions/shared-with-me').then((r) => r.sessions),
  targets: (q: string) => api<{ people: Person[]; teams: Array<{ teamId: string; name: string; members: number }> }>('GET', `/share-targets?q=${enc(q)}`),
  handOver: (sessionId: string, body: { to: string; keepAccess: boolean }) => api<HandOverResult>('POST', `/sessions/${enc(sessionId)}/handover`, body),
};

/** A person as the dashboard names them: their name and email. */
export const personName = (p: Person) => (p.email ? `${p.name} <${p.email}>` : p.name);

/** How a share reads in a list ("live" or "as of <time>"). */
export const modeText = (mode: ShareMode, at: string) => (mode === 'live' ? 'live' : `as of ${new Date(at).toLocaleString()}`);
