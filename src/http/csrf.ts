/**
 * Cross-site request forgery defence for the browser's ambient credentials.
 *
 * A bearer token is never sent by a browser on its own, so a request carrying one cannot be forged by
 * another site. The access-token cookie is (SameSite=Lax keeps it off cross-site POSTs, not off
 * same-site ones: another port on the same host is "same site"), and so is the absence of a
 * credential in demo mode, where a request without a token acts as the operator. So a request that
 * changes something and leans on the cookie must carry CSRF_HEADER, which a page of another origin cannot
 * add without a CORS preflight this service never grants; and any mutation a browser marks as coming
 * from another origin (Origin, Sec-Fetch-Site) is refused, with or without the cookie. API clients that
 * send a bearer token, and scripts without an Origin header, are not affected.
 */
export const CSRF_HEADER = 'x-agentws-csrf';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

export type Credential = 'bearer' | 'cookie' | 'none';

/** Why the request is refused as possibly forged, or null when it may go on. */
export function csrfRefusal(
  req: { method: string; headers: Record<string, string | string[] | undefined> },
  credential: Credential,
  ownOrigins: ReadonlySet<string>,
): string | null {
  if (SAFE.has(req.method) || credential === 'bearer') return null;
  const origin = req.headers.origin;
  if (typeof origin === 'string' && origin !== 'null' && !ownOrigins.has(origin.toLowerCase())) return `a request from another origin (${origin.slice(0, 200)}) cannot act here`;
  if (origin === 'null') return 'a request from an opaque origin cannot act here';
  const site = req.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return 'a request from another site cannot act here';
  if (credential === 'cookie' && !req.headers[CSRF_HEADER]) return `a request signed in by cookie must send the ${CSRF_HEADER} header`;
  return null;
}

/** This service's own origins: its public URL's, and the one the request was addressed to. */
export function ownOrigins(publicUrl: string, requestOrigin?: string): Set<string> {
  const set = new Set([new URL(publicUrl).origin.toLowerCase()]);
  if (requestOrigin) set.add(requestOrigin.toLowerCase());
  return set;
}

/**
 * A WebSocket is not a fetch: no CORS preflight guards it, and a page of any origin may open one to this
 * service with the person's cookie (cross-site WebSocket hijacking). So a browser's WebSocket (it always
 * sends Origin) must come from this service's own origin; without Origin (not a browser) it must carry a
 * bearer token, never lean on the cookie or on demo mode. Null: it may go on.
 */
export function websocketRefusal(headers: Record<string, string | string[] | undefined>, credential: Credential, own: ReadonlySet<string>): string | null {
  const origin = headers.origin;
  if (typeof origin === 'string') {
    if (origin === 'null') return 'a WebSocket from an opaque origin cannot open here';
    if (!own.has(origin.toLowerCase())) return `a WebSocket from another origin (${origin.slice(0, 200)}) cannot open here`;
    return null;
  }
  return credential === 'bearer' ? null : 'a WebSocket without an Origin must send Authorization: Bearer <token>';
}
