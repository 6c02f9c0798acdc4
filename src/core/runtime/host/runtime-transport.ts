import http, { type IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { UnavailableError } from '../../../kernel/errors.js';
import { encodeFrame, frameReader, RUNNER_WEBSOCKET_HEADER, type SocketFrame } from './runner-protocol.js';

/**
 * How the service speaks HTTP to a runtime: over the Unix socket bound into its sandbox (the sandbox has
 * no network the host could reach), or over loopback TCP for an unsandboxed runtime. node:http is used
 * rather than fetch because fetch cannot dial a Unix socket without an extra dispatcher library.
 */
export interface RuntimeEndpoint {
  /** The Unix socket of a sandboxed runtime's API. */
  socketPath?: string;
  /** `http://127.0.0.1:<port>` of an unsandboxed runtime. */
  url?: string;
  /** A runtime on a runner host, reached through the runner channel (see setTunnelDialer). */
  tunnel?: { runnerId: string; userId: string };
  /** HTTP Basic credentials for every request. */
  authorization: string;
}

/** Where one user's runtime answers, and what it calls their workspace. */
export interface RuntimeHandle {
  endpoint: RuntimeEndpoint;
  /** The workspace as the runtime sees it (`/workspace` in the sandbox): every call names it. */
  directory: string;
}

export const runtimeUnavailable = (why: string) =>
  new UnavailableError(`the agent runtime is not reachable: ${why}`, {
    code: 'runtime_unavailable',
    hint: 'Check that `aws serve` is running: it starts each user\'s runtime.',
  });

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request to a runtime on a runner: the runner channel carries it (runner-links.ts). */
export interface TunnelRequest {
  method: string;
  /** The runtime API's path and query. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer | null;
  /** A body that streams (a workspace copied between runners); instead of `body`. */
  bodyStream?: Readable;
  signal?: AbortSignal;
  timeoutMs?: number;
}
/** The answer: status, headers and the body as a stream (an event stream is never buffered). */
export interface TunnelResponse extends Readable {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
}
export type TunnelDialer = (tunnel: { runnerId: string; userId: string }, req: TunnelRequest) => Promise<TunnelResponse>;

/**
 * How this process reaches runners: set once by the composition root of a control-plane process. A
 * process-wide setting like the HTTP agent above, because endpoints are plain data (read from rows).
 */
let dialer: TunnelDialer | null = null;
export function setTunnelDialer(d: TunnelDialer | null): void {
  dialer = d;
}

/** A request to a runner host itself about a user (not their runtime: it need not run), under `/rt/<user>`. */
export function dialRunner(tunnel: { runnerId: string; userId: string }, req: TunnelRequest): Promise<TunnelResponse> {
  if (!dialer) return Promise.reject(runtimeUnavailable('this process has no runner channel'));
  return dialer(tunnel, req);
}

function dial(ep: RuntimeEndpoint, req: TunnelRequest): Promise<TunnelResponse> {
  if (!dialer) return Promise.reject(new Error('this process has no runner channel'));
  return dialer(ep.tunnel!, req);
}

function target(ep: RuntimeEndpoint, path: string): http.RequestOptions {
  if (ep.socketPath) return { socketPath: ep.socketPath, path, agent };
  const u = new URL(path, ep.url);
  return { host: u.hostname, port: u.port, path: u.pathname + u.search, agent };
}

/** One request with a JSON body (or none); the whole answer is read. */
export function requestRuntime(
  ep: RuntimeEndpoint,
  method: string,
  path: string,
  options: { body?: unknown; timeoutMs?: number } = {},
): Promise<{ status: number; contentType: string; text: string }> {
  const body = options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : null;
  if (ep.tunnel) {
    const headers: Record<string, string> = { authorization: ep.authorization, ...(body ? { 'content-type': 'application/json' } : {}) };
    return dial(ep, { method, path, headers, body, timeoutMs: options.timeoutMs ?? 10_000 }).then(async (res) => {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') };
    });
  }
  return new Promise((resolve, reject) => {
    const req = http.request({
      ...target(ep, path),
      method,
      headers: { authorization: ep.authorization, ...(body ? { 'content-type': 'application/json', 'content-length': body.length } : {}) },
      timeout: options.timeoutMs ?? 10_000,
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`${method} ${path.split('?')[0]} timed out`), { name: 'TimeoutError' })));
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.end(body ?? undefined);
  });
}

/** Opens a long-lived GET (the event stream); `signal` ends it. */
export function openRuntimeStream(ep: RuntimeEndpoint, path: string, signal: AbortSignal): Promise<IncomingMessage | TunnelResponse> {
  if (ep.tunnel) return dial(ep, { method: 'GET', path, headers: { authorization: ep.authorization, accept: 'text/event-stream' }, signal });
  return new Promise((resolve, reject) => {
    // Its own connection: a stream must not occupy a pooled keep-alive socket forever.
    const req = http.request({ ...target(ep, path), agent: false, method: 'GET', headers: { authorization: ep.authorization, accept: 'text/event-stream' }, signal });
    req.on('error', reject);
    req.on('response', resolve);
    req.end();
  });
}

/**
 * A WebSocket of a runtime (a terminal's pty), wherever the runtime runs: messages in, messages out, one
 * close. On a runner the runner holds the WebSocket and the runner channel carries its frames
 * (runner-protocol.ts).
 */
export interface RuntimeSocket {
  send(text: string): void;
  close(): void;
  onFrame(listener: (f: SocketFrame) => void): void;
}

/**
 * The frames of a socket, kept until its first listener: a runtime sends what it has (a terminal's
 * buffered output) as soon as the socket opens, often in the same packet as the upgrade's answer, so
 * before whoever opened it could listen. Those first frames are the ones a caller needs most (a command
 * that already ended: its whole output).
 */
function frameFanout() {
  const listeners: Array<(f: SocketFrame) => void> = [];
  const pending: SocketFrame[] = [];
  let closed = false;
  return {
    get closed() {
      return closed;
    },
    emit(f: SocketFrame) {
      if (closed) return;
      if (f.kind === 'close') closed = true;
      if (!listeners.length) pending.push(f);
      else for (const l of listeners) l(f);
    },
    listen(l: (f: SocketFrame) => void) {
      listeners.push(l);
      if (listeners.length === 1) for (const f of pending.splice(0)) l(f);
    },
  };
}

/** Opens a runtime's WebSocket at `path`; rejects when the runtime refuses it (its status in the message). */
export async function openRuntimeSocket(ep: RuntimeEndpoint, path: string): Promise<RuntimeSocket> {
  if (ep.tunnel) return openTunnelSocket(ep, path);
  // ws is loaded when a terminal opens, not by every command that builds the core.
  const { default: WebSocket } = await import('ws');
  return new Promise((resolve, reject) => {
    const url = ep.socketPath ? `ws+unix://${ep.socketPath}:${path}` : new URL(path, ep.url!.replace(/^http/, 'ws')).toString();
    const ws = new WebSocket(url, { headers: { authorization: ep.authorization }, perMessageDeflate: false, handshakeTimeout: 10_000 });
    const frames = frameFanout();
    const emit = frames.emit;
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      reject(new Error(`the runtime refused the socket (HTTP ${res.statusCode})`));
      ws.terminate();
    });
    ws.on('error', (err) => (ws.readyState === WebSocket.CONNECTING ? reject(err) : emit({ kind: 'close', code: 1011, reason: err.message })));
    ws.on('message', (data, isBinary) => emit(isBinary ? { kind: 'binary', data: data as Buffer } : { kind: 'text', data: data.toString() }));
    ws.on('close', (code, reason) => emit({ kind: 'close', code, reason: reason.toString() }));
    ws.on('open', () => {
      // Keystrokes are a few bytes each: Nagle's delay would be most of their round trip.
      (ws as unknown as { _socket?: { setNoDelay?: (on: boolean) => void } })._socket?.setNoDelay?.(true);
      resolve({
        send: (text) => ws.readyState === WebSocket.OPEN && ws.send(text),
        close: () => ws.close(),
        onFrame: frames.listen,
      });
    });
  });
}

async function openTunnelSocket(ep: RuntimeEndpoint, path: string): Promise<RuntimeSocket> {
  const up = new PassThrough();
  const res = await dial(ep, { method: 'POST', path, headers: { authorization: ep.authorization, [RUNNER_WEBSOCKET_HEADER]: '1' }, bodyStream: up });
  if (res.statusCode !== 200) {
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    up.end();
    throw new Error(`the runtime refused the socket (HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 200)})`);
  }
  const frames = frameFanout();
  const emit = (f: SocketFrame) => {
    if (frames.closed) return;
    if (f.kind === 'close') up.end();
    frames.emit(f);
  };
  const read = frameReader(emit);
  res.on('data', (c: Buffer) => {
    try {
      read(c);
    } catch (err) {
      emit({ kind: 'close', code: 1009, reason: (err as Error).message });
      res.destroy();
    }
  });
  res.on('end', () => emit({ kind: 'close', code: 1006, reason: 'the runner ended the socket' }));
  res.on('error', (err) => emit({ kind: 'close', code: 1011, reason: err.message }));
  return {
    send: (text) => void (frames.closed || up.write(encodeFrame({ kind: 'text', data: text }))),
    close: () => {
      if (frames.closed) return;
      up.end(encodeFrame({ kind: 'close', code: 1000, reason: '' }));
    },
    onFrame: frames.listen,
  };
}
