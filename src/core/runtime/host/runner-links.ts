import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Logger } from '../../../kernel/logger.js';
import type { TunnelRequest, TunnelResponse } from './runtime-transport.js';
import { RELAY_WINDOW_MS, relaySignature, RUNNER_ANSWER_MAX_BYTES, RUNNER_HEADERS, RUNNER_NOTICE_MAX_BYTES, RUNNER_PATHS, sameText } from './runner-protocol.js';

/**
 * The control plane's end of the runner channels (see runner-protocol.ts): the HTTP/2 sessions of the
 * runners connected to this process, and the relay that lets every other control-plane process reach
 * them. A request to a runner goes on its session here, or to the serve that holds it.
 */
const PING_MS = 5000;
/** An unanswered ping this long closes the channel (the runner answers in well under a millisecond). */
const PING_TIMEOUT_MS = 5000;
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'proxy-connection', 'te', 'trailer', 'http2-settings']);

/**
 * What a runner tells the process holding its channel about its runtimes (its watch stream), with the
 * fence of the lease it holds the user under: the control plane acts on a notice only for a user the
 * runner holds under that fence now, in the placement's tenant (runner-fleet.ts).
 */
export type RunnerNotice =
  | { type: 'ready'; tenantId: string; userId: string; fence: number; pid: number; authorization: string; directory: string }
  | { type: 'stopped'; tenantId: string; userId: string; fence: number; pid: number };

/** A runner sent more than the channel takes (an answer, a watch line): its channel is closed. */
export class RunnerOverflow extends Error {
  constructor(what: string, limit: number) {
    super(`the runner sent ${what} over ${limit} bytes: its channel is closed`);
    this.name = 'RunnerOverflow';
  }
}

export interface RunnerLink {
  runnerId: string;
  name: string;
  session: ClientHttp2Session;
  connectedAt: number;
}

export function createRunnerLinks(deps: {
  log: Logger;
  /** The key control-plane processes use on the relay (runner-protocol.ts relayKey). */
  relayKey: string;
  /** Where the serve holding a runner's channel answers the relay (its row), null: not connected. */
  relayUrlOf: (runnerId: string) => Promise<string | null>;
  /** A runner's notice arrived (only in the process holding its channel). */
  onNotice: (runnerId: string, notice: RunnerNotice) => void;
  /** A runner's channel closed here (the one it held: not one its newer channel replaced). */
  onClosed: (runnerId: string, link: RunnerLink) => void;
}) {
  const { log } = deps;
  const links = new Map<string, RunnerLink>();
  const relayAgents = { http: new http.Agent({ keepAlive: true, maxSockets: 256 }), https: new https.Agent({ keepAlive: true, maxSockets: 256 }) };
  /** Nonces of relay requests seen, in generations of RELAY_WINDOW_MS: one is refused the second time while its timestamp holds. */
  let nonces: Array<Set<string>> = [new Set(), new Set(), new Set()];
  let noncesTurned = Date.now();

  /** A runner that sent more than the channel takes: its channel here is closed (it dials again, and is read with the same bounds). */
  function overflow(runnerId: string, what: string, limit: number): RunnerOverflow {
    const err = new RunnerOverflow(what, limit);
    const link = links.get(runnerId);
    if (link && !link.session.destroyed) {
      log.error({ runner: link.name, limit, what }, 'a runner sent more than its channel takes: closing the channel');
      link.session.destroy();
    }
    return err;
  }

  /** Whether a relay request is signed by a control-plane process now, and not seen before. */
  function relayAuthentic(req: IncomingMessage): boolean {
    const sig = req.headers[RUNNER_HEADERS.relay];
    const time = req.headers[RUNNER_HEADERS.relayTime];
    const nonce = req.headers[RUNNER_HEADERS.relayNonce];
    if (typeof sig !== 'string' || typeof time !== 'string' || typeof nonce !== 'string' || !/^\d{1,15}$/.test(time) || !/^[A-Za-z0-9_-]{16,64}$/.test(nonce)) return false;
    const now = Date.now();
    if (Math.abs(now - Number(time)) > RELAY_WINDOW_MS) return false;
    if (!sameText(sig, relaySignature(deps.relayKey, { method: req.method ?? 'GET', path: req.url ?? '', time, nonce }))) return false;
    if (now - noncesTurned > RELAY_WINDOW_MS) {
      nonces = [new Set(), nonces[0], nonces[1]];
      noncesTurned = now;
    }
    if (nonces.some((g) => g.has(nonce))) return false;
    nonces[0].add(nonce);
    return true;
  }

  function requestOn(link: RunnerLink, req: TunnelRequest): Promise<TunnelResponse> {
    return new Promise((resolve, reject) => {
      const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path };
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
      let stream: ClientHttp2Stream;
      try {
        stream = link.session.request(headers, { endStream: !req.body?.length && !req.bodyStream && req.method === 'GET', signal: req.signal });
      } catch (err) {
        return reject(err);
      }
      const timer = req.timeoutMs ? setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), req.timeoutMs) : null;
      stream.once('response', (h) => {
        const out = stream as unknown as TunnelResponse;
        out.statusCode = Number(h[':status']);
        out.headers = h as TunnelResponse['headers'];
        // A timeout covers the whole answer for one-shot requests; a stream (no timeout) lives until closed.
        if (timer) stream.once('close', () => clearTimeout(timer));
        resolve(out);
      });
      stream.once('error', (err) => {
        if (timer) clearTimeout(timer);
        reject(err);
      });
      stream.once('close', () => {
        if (timer) clearTimeout(timer);
        reject(new Error(`the request to the runner ended without an answer (${stream.rstCode === 8 ? 'cancelled: no answer in time' : `code ${stream.rstCode ?? 'none'}`})`));
      });
      if (req.bodyStream) req.bodyStream.pipe(stream);
      else if (req.body?.length) stream.end(req.body);
      else if (req.method !== 'GET') stream.end();
    });
  }

  function requestRelayed(url: string, runnerId: string, req: TunnelRequest): Promise<TunnelResponse> {
    return new Promise((resolve, reject) => {
      const path = `${RUNNER_PATHS.relay}${encodeURIComponent(runnerId)}${req.path}`;
      const u = new URL(path, url);
      // Signed, never the key itself: a request seen on the wire is refused when sent again (relayAuthentic).
      const time = String(Date.now());
      const nonce = randomBytes(18).toString('base64url');
      const signed = { [RUNNER_HEADERS.relay]: relaySignature(deps.relayKey, { method: req.method, path: u.pathname + u.search, time, nonce }), [RUNNER_HEADERS.relayTime]: time, [RUNNER_HEADERS.relayNonce]: nonce };
      const client = u.protocol === 'https:' ? https : http;
      const r = client.request(u, { method: req.method, agent: u.protocol === 'https:' ? relayAgents.https : relayAgents.http, headers: { ...req.headers, ...signed }, signal: req.signal, timeout: req.timeoutMs });
      r.on('timeout', () => r.destroy(new Error(`${req.method} ${req.path.split('?')[0]} timed out`)));
      r.on('error', reject);
      r.on('response', (res) => resolve(res as unknown as TunnelResponse));
      if (req.bodyStream) req.bodyStream.pipe(r);
      else r.end(req.body ?? undefined);
    });
  }

  return {
    /**
     * Takes a runner's upgraded connection: this process is now the HTTP/2 client of the runner, and
     * follows its notices. Replaces an older channel of the same runner.
     */
    attach(runnerId: string, name: string, socket: Socket, head: Buffer): RunnerLink {
      if (head.length) socket.unshift(head);
      const session = http2.connect('http://runner.agentws.invalid', { createConnection: () => socket });
      const link: RunnerLink = { runnerId, name, session, connectedAt: Date.now() };
      const old = links.get(runnerId);
      links.set(runnerId, link);
      old?.session.destroy();
      session.on('error', (err) => log.warn({ runner: name, err: err.message }, 'runner channel failed'));
      // A runner that stops answering (killed with its connection left half-open, cut off by the network)
      // sends no FIN: an unanswered ping closes the channel, so requests to it fail at once (their turns
      // wait for the runner to be declared lost and their users placed elsewhere) instead of hanging.
      const pinger = setInterval(() => {
        if (session.destroyed || session.closed) return;
        const late = setTimeout(() => {
          log.warn({ runner: name, ms: PING_TIMEOUT_MS }, 'runner channel does not answer its ping: closing it');
          session.destroy();
        }, PING_TIMEOUT_MS);
        late.unref();
        const sent = session.ping((err) => {
          clearTimeout(late);
          if (err && !session.destroyed) {
            log.warn({ runner: name, err: err.message }, 'runner channel does not answer: closing it');
            session.destroy();
          }
        });
        if (!sent) clearTimeout(late);
      }, PING_MS);
      pinger.unref();
      session.once('close', () => {
        clearInterval(pinger);
        // A channel replaced by the runner's newer one (it dialled again before this one was seen to close):
        // the newer one is the runner's now, and what follows a close must not undo it.
        if (links.get(runnerId) !== link) return;
        links.delete(runnerId);
        deps.onClosed(runnerId, link);
      });
      void (async () => {
        try {
          const res = await requestOn(link, { method: 'GET', path: '/watch', headers: {} });
          let buf = '';
          for await (const chunk of res) {
            buf += (chunk as Buffer).toString('utf8');
            let nl: number;
            while ((nl = buf.indexOf('\n')) >= 0) {
              const line = buf.slice(0, nl).trim();
              buf = buf.slice(nl + 1);
              if (!line) continue;
              if (Buffer.byteLength(line) > RUNNER_NOTICE_MAX_BYTES) throw overflow(runnerId, 'a watch line', RUNNER_NOTICE_MAX_BYTES);
              try {
                deps.onNotice(runnerId, JSON.parse(line) as RunnerNotice);
              } catch (err) {
                log.warn({ runner: name, err: (err as Error).message }, 'a runner notice could not be handled');
              }
            }
            // A line that never ends is as much as one too long (counted in UTF-16 units here, at most 4x the bytes).
            if (buf.length > RUNNER_NOTICE_MAX_BYTES) throw overflow(runnerId, 'a watch line', RUNNER_NOTICE_MAX_BYTES);
          }
        } catch (err) {
          if (!session.destroyed) log.warn({ runner: name, err: (err as Error).message }, 'runner watch stream ended');
        }
      })();
      return link;
    },

    /** The runner's channel held by this process, if any. */
    local(runnerId: string): RunnerLink | undefined {
      return links.get(runnerId);
    },

    connected(): RunnerLink[] {
      return [...links.values()];
    },

    /** One request to a runner: on its channel here, or through the serve holding it. */
    async request(runnerId: string, req: TunnelRequest): Promise<TunnelResponse> {
      const link = links.get(runnerId);
      if (link && !link.session.destroyed) return requestOn(link, req);
      const url = await deps.relayUrlOf(runnerId);
      if (!url) throw new Error('the runner is not connected to the control plane');
      return requestRelayed(url, runnerId, req);
    },

    /**
     * A JSON request to a runner, its JSON answer read whole up to RUNNER_ANSWER_MAX_BYTES (more: the
     * runner's channel is closed, RunnerOverflow); a non-2xx answer throws with its message.
     */
    async call<T>(runnerId: string, method: string, path: string, body?: unknown, timeoutMs = 60_000): Promise<T> {
      const res = await this.request(runnerId, { method, path, headers: body !== undefined ? { 'content-type': 'application/json' } : {}, body: body !== undefined ? Buffer.from(JSON.stringify(body)) : null, timeoutMs });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of res) {
        size += (c as Buffer).length;
        if (size > RUNNER_ANSWER_MAX_BYTES) {
          res.destroy();
          throw overflow(runnerId, `an answer to ${method} ${path.split('?')[0]}`, RUNNER_ANSWER_MAX_BYTES);
        }
        chunks.push(c as Buffer);
      }
      const text = Buffer.concat(chunks).toString('utf8');
      let json: any;
      try {
        json = text ? JSON.parse(text) : null;
      } catch {
        throw Object.assign(new Error(`the runner answered ${method} ${path.split('?')[0]} with something that is not JSON`), { status: 502 });
      }
      if (res.statusCode >= 300) throw Object.assign(new Error(json?.message ?? `runner answered ${res.statusCode}`), { status: res.statusCode, code: json?.error });
      return json as T;
    },

    /**
     * Another control-plane process asks this one to pass a request to a runner whose channel is here
     * (`/runner/relay/<runner id>/<path>`). Streams both ways.
     */
    serveRelay(req: IncomingMessage, res: ServerResponse): void {
      if (!relayAuthentic(req)) {
        req.resume();
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized', message: 'not a signed request of a control-plane process of this appliance (or signed too long ago, or sent before)' }));
        return;
      }
      const rest = (req.url ?? '').slice(RUNNER_PATHS.relay.length);
      const slash = rest.indexOf('/');
      const runnerId = decodeURIComponent(slash < 0 ? rest : rest.slice(0, slash));
      const path = slash < 0 ? '/' : rest.slice(slash);
      const link = links.get(runnerId);
      if (!link || link.session.destroyed) {
        req.resume();
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'runner_unavailable', message: 'the runner is not connected here' }));
        return;
      }
      const headers: http2.OutgoingHttpHeaders = { ':method': req.method ?? 'GET', ':path': path };
      for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k) && k !== RUNNER_HEADERS.relay && k !== RUNNER_HEADERS.relayTime && k !== RUNNER_HEADERS.relayNonce && v !== undefined) headers[k] = v;
      const stream = link.session.request(headers, { endStream: req.method === 'GET' || req.method === 'HEAD' });
      stream.on('response', (h) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && v !== undefined) out[k] = v as string | string[];
        res.writeHead(Number(h[':status']), out);
        res.flushHeaders();
        stream.pipe(res);
      });
      stream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
      res.on('close', () => {
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      });
      if (req.method !== 'GET' && req.method !== 'HEAD') req.pipe(stream);
      else req.resume();
    },

    /** Closes every channel held here (shutdown). */
    close(): void {
      for (const l of links.values()) l.session.destroy();
      links.clear();
      relayAgents.http.destroy();
      relayAgents.https.destroy();
    },
  };
}
