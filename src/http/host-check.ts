import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { MisdirectedRequestError } from '../kernel/errors.js';

/** Loopback names a browser on this machine uses for the service. */
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Whether a Host header names this service: the public URL's host and port, or localhost, 127.0.0.1
 * or [::1] with the port the request actually arrived on. A Host without a port means the default port
 * (the public URL's scheme for its host; http's 80 for the loopback names, which we serve plainly).
 */
export function isOwnHost(host: string | undefined, localPort: number | undefined, publicUrl: URL): boolean {
  if (!host) return false;
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(host);
  if (!m) return false;
  const name = m[1].toLowerCase();
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (LOOPBACK_NAMES.has(name) && (port ?? 80) === localPort) return true;
  const publicDefault = publicUrl.protocol === 'https:' ? 443 : 80;
  return name === publicUrl.hostname.toLowerCase() && (port ?? publicDefault) === Number(publicUrl.port || publicDefault);
}

/**
 * The Host check of local demo mode, where a request without a token acts as the operator. A web page
 * the operator visits can point its own domain at 127.0.0.1 (DNS rebinding) and then call this service
 * from the browser as a same-origin page: the browser sends the attacker's host name. Answering only
 * requests addressed to this service by name closes that. Registered only in demo mode, as the first
 * hook of every route (health probes and unknown routes too), before authentication or the body.
 */
export function hostCheck(publicUrl: string) {
  const url = new URL(publicUrl);
  return (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const host = req.headers.host;
    if (isOwnHost(host, req.raw.socket.localPort, url)) return done();
    const named = host === undefined ? 'a request without a Host header' : `host "${host.slice(0, 100)}"`;
    done(
      new MisdirectedRequestError(`${named} is not this service`, {
        hint: `In local demo mode the service answers only to ${url.host}, localhost, 127.0.0.1 and [::1] on its own port (AGENTWS_PUBLIC_URL names the first).`,
      }),
    );
  };
}
