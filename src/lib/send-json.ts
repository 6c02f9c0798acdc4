import type { ServerResponse } from 'node:http';

/**
 * Answers a raw node request (the gateway host's handlers, the runner channel, which run outside
 * fastify) with JSON and its length, or with no body. A response already started cannot change its
 * status: it is cut off instead, so the client sees a broken answer rather than a wrong one.
 */
export function sendJson(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.destroy();
  if (body === undefined) return void res.writeHead(status, headers).end();
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}
