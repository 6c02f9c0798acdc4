import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { Http2Server } from 'node:http2';
import type { Socket } from 'node:net';
import { RUNNER_HEADERS, RUNNER_PATHS, RUNNER_PROTOCOL, proofHolds, type RunnerInfo } from '../core/runtime/host/runner-protocol.js';
import type { Logger } from '../kernel/logger.js';
import type { ControlClient } from './control-client.js';

const MAX_BACKOFF_MS = 30_000;

/**
 * The runner's one connection to the control plane: dialled from here (runner-protocol.ts), upgraded, and
 * then served as HTTP/2 by `server` (the control plane's orders); dialled again with back-off when it closes.
 */
export function createRunnerChannel(o: { control: ControlClient; token: string; info: RunnerInfo; server: Http2Server; log: Logger }) {
  const { control: c, server, log } = o;
  const control = c.control;
  let stopping = false;
  let channel: Socket | null = null;
  let connectedOnce = false;
  let loop: Promise<void> | null = null;
  /** The connection attempt in flight (stop aborts it). */
  let pending: http.ClientRequest | null = null;
  /** Ends the wait before the next connection attempt (stop). */
  let wakeUp = () => {};

  /** One connection to the control plane: resolves when it closes. */
  function connectOnce(): Promise<void> {
    return new Promise((resolve, reject) => {
      const nonce = randomBytes(18).toString('base64url');
      const req = c.client.request(new URL(RUNNER_PATHS.connect, control), {
        method: 'GET',
        agent: false,
        headers: {
          connection: 'Upgrade',
          upgrade: RUNNER_PROTOCOL,
          [RUNNER_HEADERS.token]: o.token,
          [RUNNER_HEADERS.info]: Buffer.from(JSON.stringify(o.info)).toString('base64url'),
          [RUNNER_HEADERS.nonce]: nonce,
        },
      });
      req.on('error', reject);
      pending = req;
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let message = Buffer.concat(chunks).toString('utf8').slice(0, 300);
          try {
            message = JSON.parse(message).message ?? message;
          } catch {
            // plain text
          }
          reject(Object.assign(new Error(`the control plane refused this runner (${res.statusCode}): ${message}`), { status: res.statusCode }));
        });
      });
      req.on('upgrade', (res, socket, head) => {
        if (!proofHolds(o.token, nonce, res.headers[RUNNER_HEADERS.proof] as string | undefined)) {
          socket.destroy();
          return reject(Object.assign(new Error('the control plane could not prove it is the one this token belongs to: not serving it'), { status: 0 }));
        }
        channel = socket;
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 10_000);
        if (head.length) socket.unshift(head);
        server.emit('connection', socket);
        log.info({ control: control.origin, runner: o.info.name }, connectedOnce ? 'runner reconnected to the control plane' : 'runner connected to the control plane');
        connectedOnce = true;
        socket.once('close', () => {
          channel = null;
          resolve();
        });
      });
      req.end();
    });
  }

  return {
    /** The connection up now (null between two). */
    get socket() {
      return channel;
    },

    /** Keeps the channel up (reconnecting with back-off) until stop. */
    start(): void {
      let failures = 0;
      loop = (async () => {
        while (!stopping) {
          try {
            await connectOnce();
            failures = 0;
            if (!stopping) log.warn('the channel to the control plane closed: reconnecting');
          } catch (err) {
            failures++;
            const status = (err as { status?: number }).status;
            const msg = (err as Error).message;
            if (status === 401 || status === 403) log.error({ err: msg }, 'the control plane refused this runner token');
            else log.warn({ err: msg, attempt: failures }, 'could not reach the control plane');
          }
          if (stopping) break;
          const delay = Math.min(MAX_BACKOFF_MS, failures ? 500 * 2 ** Math.min(failures, 6) : 200);
          // A ref'd timer: a runner that cannot connect stays up and keeps trying (systemd would restart it anyway).
          await new Promise<void>((r) => {
            const t = setTimeout(r, delay);
            wakeUp = () => {
              clearTimeout(t);
              r();
            };
          });
        }
      })();
    },

    /** Stops dialling and closes the connection (the server's streams end with it). */
    close(): void {
      stopping = true;
      pending?.destroy();
      wakeUp();
      channel?.destroy();
    },

    /** Waits for the dialling loop to end (after close). */
    async ended(): Promise<void> {
      await loop?.catch(() => {});
    },
  };
}
