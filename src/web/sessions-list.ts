// Pure helpers of the session list and search (sessions-api.ts, screens/sessions.tsx): unit-tested.

/** What the list shows: the filter's choice in the dashboard (state and pinned of the API together). */
export type ListView = 'active' | 'pinned' | 'archived' | 'all';

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

/** Where a search result opens: the session, at the message it matched (chat.tsx scrolls to it). */
export const resultHref = (r: { sessionId: string; messageId: string | null }) => `#/sessions/${r.sessionId}${r.messageId ? `?m=${encodeURIComponent(r.messageId)}` : ''}`;

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

/**
 * The link of a session a code host started: the issue or pull request it came from. The URL
 * came in a webhook delivery (the host's payload), so only an http(s) URL becomes a link: never
 * `javascript:` or `data:`. Null: show the label without a link.
 */
export function originHref(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}
