import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { sseComment } from '../lib/sse-frame.js';

/** How long a client waits before reconnecting, told once at the start of every stream. */
const RETRY_MS = 2000;

/**
 * Turns a route's reply into an event stream (the one place its headers and opening are written): the
 * reply is taken over from fastify, the headers say no caching and no proxy buffering (nginx and
 * similar buffer responses unless told not to), the client is told its retry delay, and frames go out
 * without Nagle's delay. `onClose(fn)` runs fn once the client is gone, at once if it already went while
 * the route was still subscribing (so nothing it set up is left behind).
 */
export function openEventStream(reply: FastifyReply): { res: ServerResponse; onClose: (fn: () => void) => void } {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write(`retry: ${RETRY_MS}\n${sseComment('connected')}`);
  res.socket?.setNoDelay(true);
  return { res, onClose: (fn) => (res.destroyed ? fn() : void res.once('close', fn)) };
}
