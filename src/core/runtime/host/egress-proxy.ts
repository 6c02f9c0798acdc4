import { unlinkSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import type { Logger } from '../../../kernel/logger.js';
import { GATEWAY_HOST } from './agent-endpoints.js';
import type { EgressDecision } from './egress-policy.js';

/**
 * The host side of a sandbox's only way out: an HTTP proxy (CONNECT for TLS, absolute-form requests for
 * plain HTTP) that the runtime and every tool it runs reach through HTTP(S)_PROXY. Each runtime gets its
 * own listener (a Unix socket bound into its sandbox), so the proxy knows who is asking without any
 * credential: the listener is the identity. Every connection is decided by the egress policy and goes to
 * the address that was checked. Requests for GATEWAY_HOST never leave the host: they go to the service's
 * LLM gateway, which adds the provider key the runtime never sees.
 */
export { GATEWAY_HOST };
/** Idle tunnels and requests are cut after this long (a stalled download does not hold a socket forever). */
const IDLE_TIMEOUT_MS = 10 * 60_000;
const HOP_BY_HOP = ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade'];

export interface EgressProxyDeps<I> {
  decide(identity: I, host: string, port: number): Promise<EgressDecision>;
  /** Handles a request for GATEWAY_HOST (path and query of `url`). */
  gateway(identity: I, req: IncomingMessage, res: ServerResponse, url: URL): void;
  /** A connection was refused (audited by the caller, at most so often). */
  refused(identity: I, target: { host: string; port: number; reason: string }): void;
  log: Logger;
}

export interface ProxyListener {
  /** The socket path, or `http://127.0.0.1:<port>` for a TCP listener. */
  readonly address: string;
  close(): Promise<void>;
}

export function createEgressProxy<I>(deps: EgressProxyDeps<I>) {
  const { log } = deps;

  function refuse(res: ServerResponse, status: number, message: string): void {
    if (res.headersSent) {
    res.destroy();
    return;
  }
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'x-agentws-egress': 'refused', connection: 'close' });
    res.end(`agentws egress proxy: ${message}\n`);
  }

  function onRequest(identity: I, req: IncomingMessage, res: ServerResponse) {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return refuse(res, 400, 'send absolute URLs (this is a proxy); use CONNECT for https');
    }
    if (url.protocol !== 'http:') return refuse(res, 400, `${url.protocol} is not proxied this way; use CONNECT for https`);
    if (url.hostname === GATEWAY_HOST) return deps.gateway(identity, req, res, url);
    const port = Number(url.port || 80);
    void deps.decide(identity, url.hostname, port).then(
      (d) => {
        if (!d.ok) {
          deps.refused(identity, { host: url.hostname, port, reason: d.reason });
          req.resume();
          return refuse(res, 403, `refused ${url.hostname}:${port}: ${d.reason}`);
        }
        const headers = { ...req.headers };
        for (const h of HOP_BY_HOP) delete headers[h];
        headers.host = url.host;
        const upstream = http.request({ host: d.address, family: d.family, port, method: req.method, path: `${url.pathname}${url.search}`, headers, timeout: IDLE_TIMEOUT_MS });
        upstream.on('response', (up) => {
          const back = { ...up.headers };
          for (const h of HOP_BY_HOP) delete back[h];
          res.writeHead(up.statusCode ?? 502, back);
          up.pipe(res);
        });
        upstream.on('timeout', () => upstream.destroy(new Error('timeout')));
        upstream.on('error', (err) => refuse(res, 502, `${url.hostname}:${port} failed: ${err.message}`));
        req.pipe(upstream);
        res.on('close', () => upstream.destroy());
      },
      (err) => refuse(res, 500, (err as Error).message),
    );
  }

  function onConnect(identity: I, req: IncomingMessage, client: Socket, head: Buffer) {
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? '');
    const fail = (status: string, message: string) => {
      client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nx-agentws-egress: refused\r\n\r\nagentws egress proxy: ${message}\n`);
    };
    client.on('error', () => {});
    if (!m) return fail('400 Bad Request', 'CONNECT needs host:port');
    const [, host, portText] = m;
    const port = Number(portText);
    if (host === GATEWAY_HOST) return fail('403 Forbidden', `${GATEWAY_HOST} speaks plain http through this proxy`);
    void deps.decide(identity, host, port).then(
      (d) => {
        if (!d.ok) {
          deps.refused(identity, { host, port, reason: d.reason });
          return fail('403 Forbidden', `refused ${host}:${port}: ${d.reason}`);
        }
        const upstream = net.connect({ host: d.address, port, family: d.family });
        upstream.setTimeout(IDLE_TIMEOUT_MS, () => upstream.destroy());
        client.setTimeout(IDLE_TIMEOUT_MS, () => client.destroy());
        upstream.once('connect', () => {
          client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          if (head.length) upstream.write(head);
          upstream.pipe(client);
          client.pipe(upstream);
        });
        upstream.on('error', (err) => {
          if (!client.destroyed && upstream.connecting) fail('502 Bad Gateway', `${host}:${port} failed: ${err.message}`);
          else client.destroy();
        });
        client.on('close', () => upstream.destroy());
      },
      (err) => fail('500 Internal Server Error', (err as Error).message),
    );
  }

  return {
    /** Starts a listener for one runtime: a Unix socket (`path`) or a loopback TCP port (`port`, 0 = any). */
    async listen(identity: I, at: { path: string } | { port: number }): Promise<ProxyListener> {
      const server = http.createServer((req, res) => onRequest(identity, req, res));
      server.on('connect', (req, socket, head) => onConnect(identity, req, socket as Socket, head));
      server.on('clientError', (_err, socket) => socket.destroy());
      server.keepAliveTimeout = 30_000;
      server.requestTimeout = 0;
      if ('path' in at) {
        try {
          unlinkSync(at.path); // a stale socket of an earlier run
        } catch {
          // none
        }
      }
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        if ('path' in at) server.listen(at.path, () => resolve());
        else server.listen(at.port, '127.0.0.1', () => resolve());
      });
      const addr = server.address();
      const address = typeof addr === 'string' ? addr : `http://127.0.0.1:${(addr as net.AddressInfo).port}`;
      log.debug({ address }, 'egress proxy listening');
      return {
        address,
        close: () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      };
    },
  };
}
