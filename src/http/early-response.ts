import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * After an early answer, how much more of the request body is read (and thrown away), for how long in
 * all, and how long a pause in the upload may last before the connection is closed.
 */
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_MAX_MS = 30_000;
const DRAIN_IDLE_MS = 2_000;

/**
 * An error answered before the request body was read whole: 401 (authentication runs before the body
 * is read), 421, 413 at the body limit, a 400 in the middle of a multipart upload. The client may still
 * be sending. fastify marks such answers `Connection: close`, and Node then closes the socket as soon as
 * the answer is written; the client's next write meets a reset, and a client that reads the answer only
 * after it has sent everything (Node's fetch with a large body, many HTTP libraries) gets EPIPE or
 * ECONNRESET instead of the answer.
 *
 * So the rest of the body is read and thrown away (never kept) and the connection stays usable, within
 * bounds: at most DRAIN_MAX_BYTES more, DRAIN_MAX_MS in all, and no pause longer than DRAIN_IDLE_MS (a
 * client that stopped sending once it had the answer, as Node's http.request does, is not waited for).
 * Past a bound the socket is closed. Called from the error and not-found handlers only, so ordinary
 * requests pay nothing.
 */
export function drainUnreadBody(req: FastifyRequest, reply: FastifyReply): void {
  const raw = req.raw;
  if (raw.complete || raw.destroyed || !hasBody(raw.headers)) return;
  const socket = raw.socket;
  reply.removeHeader('connection');
  let seen = 0;
  const stop = () => {
    clearTimeout(deadline);
    clearTimeout(idle);
    raw.off('data', onData);
    raw.off('end', stop);
    raw.off('close', stop);
  };
  const giveUp = () => {
    stop();
    socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > DRAIN_MAX_BYTES) giveUp();
    else idle.refresh();
  };
  const deadline = setTimeout(giveUp, DRAIN_MAX_MS);
  const idle = setTimeout(giveUp, DRAIN_IDLE_MS);
  deadline.unref();
  idle.unref();
  raw.on('data', onData);
  raw.once('end', stop);
  raw.once('close', stop);
  raw.resume();
}

const hasBody = (h: FastifyRequest['headers']) => h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');
