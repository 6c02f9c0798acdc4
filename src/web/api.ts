// The dashboard's only way to the API: same origin, the HttpOnly cookies the sign-in set, and the CSRF
// header the API asks of cookie-authenticated changes (src/http/csrf.ts). Tokens never reach script.

import type { StreamEvent } from './types';

export type { StreamEvent };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly hint?: string,
    /** The error's `details` (e.g. `field`: the input it names). */
    readonly details?: any,
  ) {
    super(message);
  }
}

/**
 * The input field a 400 names, as a dotted path ("settings.egress.allow"): the service's `details.field`,
 * or the path of a schema error ("body/settings/egress/ports/0 must be ..."), without the list index.
 */
export function errorField(err: unknown): string | undefined {
  if (!(err instanceof ApiError) || err.status !== 400) return undefined;
  if (typeof err.details?.field === 'string') return err.details.field;
  const path = /^body\/([\w/]+)/.exec(err.message)?.[1];
  return path?.split('/').filter((p) => !/^\d+$/.test(p)).join('.');
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();
/** Called when the API says the caller is no longer signed in (and a refresh did not help). */
export function onSignedOut(fn: Listener): () => void {
  signedOutListeners.add(fn);
  return () => signedOutListeners.delete(fn);
}

const BROWSER_SESSION_KEY = 'agentws.browserSession';
/** This browser's id for sessions it starts in demo mode, so signing in later can claim them (SPEC rule 1). */
function browserSession(): string {
  let id = localStorage.getItem(BROWSER_SESSION_KEY);
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem(BROWSER_SESSION_KEY, id);
  }
  return id;
}

let refreshing: Promise<boolean> | null = null;
/** Exchanges the refresh cookie for a new access cookie; false when there is no sign-in to refresh. */
function refresh(): Promise<boolean> {
  refreshing ??= fetch('/v1/auth/refresh', { method: 'POST', credentials: 'same-origin', headers: { 'x-agentws-csrf': '1' } })
    .then((r) => r.ok)
    .catch(() => false)
    .finally(() => {
      refreshing = null;
    });
  return refreshing;
}

/** Refreshes the access cookie every 10 minutes (it lives 15), so a page left open stays signed in. */
export function keepSignedIn(): () => void {
  const timer = setInterval(() => void refresh(), 10 * 60_000);
  return () => clearInterval(timer);
}

async function send(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { 'x-agentws-csrf': '1', 'x-browser-session': browserSession() };
  let payload: BodyInit | undefined;
  if (body instanceof FormData) payload = body;
  else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  return fetch(`/v1${path}`, { method, headers, body: payload, credentials: 'same-origin' });
}

// GETs started before the first render (prefetch): the screen that asks for one first gets it.
const early = new Map<string, Promise<unknown>>();

/** Starts a GET now, for a screen that will ask for it once rendered (saves a round trip after start-up). */
export function prefetch(path: string): void {
  const p = call('GET', path);
  p.catch(() => {}); // its taker sees the failure
  early.set(path, p);
}

/** Calls the API; JSON in and out. Throws ApiError with the service's error code and message. */
export function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const started = method === 'GET' ? early.get(path) : undefined;
  if (started) {
    early.delete(path);
    return started as Promise<T>;
  }
  return call<T>(method, path, body);
}

async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  let res = await send(method, path, body);
  if (res.status === 401 && (await refresh())) res = await send(method, path, body);
  if (res.status === 401) signedOutListeners.forEach((fn) => fn());
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    throw new ApiError(res.status, json?.error ?? `http_${res.status}`, json?.message ?? json?.detail ?? (typeof json?.error === 'string' ? json.error : res.statusText), json?.hint, json?.details);
  }
  return json as T;
}

/** A user-facing sentence for any error. */
export function explain(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 403) return `Not allowed: ${err.message}`;
    if (err.status === 404) return 'Not found: it may have been deleted, or it is not yours.';
    // Its hint names CLI commands; in the browser the way is the checklist (screens/setup/checklist.tsx).
    if (err.code === 'runtime_not_ready') return `${err.message}. The Sessions screen shows what is left to set up.`;
    return err.hint ? `${err.message} — ${err.hint}` : err.message;
  }
  if (err instanceof TypeError) return 'The service cannot be reached. Check your connection and try again.';
  return (err as Error)?.message ?? String(err);
}


/**
 * Follows an SSE stream of the API with EventSource: the cookie authenticates it, and it resumes by
 * itself with Last-Event-ID after a drop. A stream the server refused (401 once the access cookie
 * expired) is opened again after a refresh, from the last event seen; after three refusals in a row (a
 * session deleted meanwhile answers 404 for good) it gives up. Returns a closer.
 */
export function follow(path: string, onEvent: (e: StreamEvent) => void, onState?: (open: boolean) => void): () => void {
  let source: EventSource | null = null;
  let closed = false;
  let lastId = '';
  let refusals = 0;
  const open = () => {
    const sep = path.includes('?') ? '&' : '?';
    source = new EventSource(`/v1${path}${lastId ? `${sep}lastEventId=${encodeURIComponent(lastId)}` : ''}`, { withCredentials: true });
    source.onmessage = (m) => {
      if (m.lastEventId) lastId = m.lastEventId;
      try {
        onEvent(JSON.parse(m.data) as StreamEvent);
      } catch {
        // not an event of ours
      }
    };
    source.onopen = () => {
      refusals = 0;
      onState?.(true);
    };
    source.onerror = () => {
      onState?.(false);
      if (source?.readyState === EventSource.CLOSED && !closed && ++refusals <= 3) {
        void refresh().then(() => {
          if (!closed) setTimeout(open, 1000 * refusals);
        });
      }
    };
  };
  open();
  return () => {
    closed = true;
    source?.close();
  };
}
