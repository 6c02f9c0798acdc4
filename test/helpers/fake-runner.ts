import { randomBytes } from 'node:crypto';
import http from 'node:http';
import http2, { type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { proofHolds, RUNNER_HEADERS, RUNNER_PATHS, RUNNER_PROTOCOL, type RunnerInfo } from '../../src/core/runtime/host/runner-protocol.js';

/**
 * A hostile runner host, for tests: it speaks the runner channel for real (the HTTP/1.1 upgrade with a
 * real token, then HTTP/2 with the control plane as its client, runner-protocol.ts) and answers what the
 * test tells it to. What it sends on its watch stream, what it answers to a sync or a runtime's event
 * stream, is the test's: a runner holding a valid token may say anything.
 */
export interface FakeRunner {
  /** The refusal, when the control plane did not take the channel. */
  refused: { status: number; message: string } | null;
  /** Requests the control plane made to it: method, path and the JSON body if any. */
  requests: Array<{ method: string; path: string; body: any }>;
  /** Writes one raw line on its watch stream (a notice, or anything else). */
  say(line: string): void;
  /** Whether its channel is still open. */
  readonly open: boolean;
  /** Answers to its own routes: return true if handled (the default answers a sync, 404 otherwise). */
  handle(fn: (req: Http2ServerRequest, res: Http2ServerResponse, body: Buffer) => boolean | void): void;
  close(): void;
}

export async function connectFakeRunner(controlUrl: string, token: string, info: Partial<RunnerInfo> & { name: string }): Promise<FakeRunner> {
  const requests: FakeRunner['requests'] = [];
  const watchers = new Set<Http2ServerResponse>();
  let handler: ((req: Http2ServerRequest, res: Http2ServerResponse, body: Buffer) => boolean | void) | null = null;
  let socket: Socket | null = null;
  let open = false;
  const server = http2.createServer((req, res) => {
    if (req.url === '/watch') {
      requests.push({ method: req.method, path: req.url, body: null });
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('\n');
      watchers.add(res);
      res.on('close', () => watchers.delete(res));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let parsed: any = null;
      try {
        parsed = body.length ? JSON.parse(body.toString('utf8')) : null;
      } catch {
        parsed = body.toString('utf8');
      }
      requests.push({ method: req.method, path: req.url, body: parsed });
      if (handler?.(req, res, body)) return;
      if (req.url === '/sync') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ capacity: info.capacity ?? 4, resident: 0, busy: 0, users: [] }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'not_found' }));
    });
  });
  server.on('sessionError', () => {});
  const nonce = randomBytes(18).toString('base64url');
  const refused = await new Promise<FakeRunner['refused']>((resolve, reject) => {
    const req = http.request(new URL(RUNNER_PATHS.connect, controlUrl), {
      method: 'GET',
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: RUNNER_PROTOCOL,
        [RUNNER_HEADERS.token]: token,
        [RUNNER_HEADERS.info]: Buffer.from(JSON.stringify({ address: null, capacity: 4, labels: {}, version: 'fake', sharedStorage: false, ...info })).toString('base64url'),
        [RUNNER_HEADERS.nonce]: nonce,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let message = text;
        try {
          message = JSON.parse(text).message ?? text;
        } catch {
          // plain text
        }
        resolve({ status: res.statusCode ?? 0, message });
      });
    });
    req.on('upgrade', (res, s, head) => {
      if (!proofHolds(token, nonce, res.headers[RUNNER_HEADERS.proof] as string | undefined)) {
        s.destroy();
        return reject(new Error('the control plane gave no valid proof'));
      }
      socket = s;
      open = true;
      s.on('close', () => (open = false));
      s.on('error', () => {});
      if (head.length) s.unshift(head);
      server.emit('connection', s);
      resolve(null);
    });
    req.end();
  });
  return {
    refused,
    requests,
    say(line: string) {
      for (const w of watchers) w.write(line.endsWith('\n') ? line : `${line}\n`);
    },
    get open() {
      return open;
    },
    handle(fn) {
      handler = fn;
    },
    close() {
      for (const w of watchers) w.end();
      socket?.destroy();
      server.close();
    },
  };
}
