import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The runner channel: what a runner host (`aws runner`) and the control plane (`aws serve`) say to each
 * other. The runner dials out: it needs no inbound port, works behind NAT and through the same reverse
 * proxy as the API, and the control plane never holds a way into the runner's network.
 *
 *  - The runner opens `GET /runner/v1/connect` with `Upgrade: agentws-runner/1`, its token and a nonce.
 *    The control plane checks the token (stored hashed), answers 101 with a proof that it knows the
 *    token's hash (HMAC of the nonce keyed with it), and the runner checks the proof before it serves
 *    anything: an impostor that answers the runner's address has neither the token nor its hash.
 *  - On that connection the roles turn round: the runner is an HTTP/2 server, the control plane its
 *    client. The control plane asks (start a runtime, reach its API, stop it, sync leases); HTTP/2 gives
 *    many concurrent streams with flow control on one connection, so an event stream is never buffered.
 *  - What the runner asks of the control plane (its runtimes' model calls and memory tools, egress rules,
 *    a started or stopped runtime) goes in ordinary HTTP requests to `/runner/v1/...`, each carrying the
 *    runner's token and the user and lease fence the runner acts for; the control plane checks the lease.
 *  - Other control-plane processes (a second serve, a worker) reach a runner through the serve holding its
 *    channel: `/runner/relay/<runner id>/...`. Each relay request is signed (relaySignature) with a key
 *    derived from the control plane's own secret, which runners never hold and which never travels: the
 *    signature covers the method, path, a timestamp and a random nonce, holds for RELAY_WINDOW_MS and is
 *    refused the second time, so one seen on the wire opens nothing. The body is not signed: across a
 *    network you do not trust, the relay URL is https (TLS keeps it whole).
 *  - What a runner sends back is bounded: a JSON answer to RUNNER_ANSWER_MAX_BYTES, a line of its watch
 *    stream to RUNNER_NOTICE_MAX_BYTES; a runner past either has its channel closed.
 */
export const RUNNER_PROTOCOL = 'agentws-runner/1';
export const RUNNER_PATHS = {
  connect: '/runner/v1/connect',
  gateway: '/runner/v1/gateway',
  started: '/runner/v1/runtimes/started',
  stopped: '/runner/v1/runtimes/stopped',
  limit: '/runner/v1/runtimes/limit',
  egress: '/runner/v1/egress',
  refused: '/runner/v1/egress/refused',
  relay: '/runner/relay/',
} as const;
export const RUNNER_HEADERS = {
  token: 'x-agentws-runner-token',
  runner: 'x-agentws-runner',
  info: 'x-agentws-runner-info',
  nonce: 'x-agentws-nonce',
  proof: 'x-agentws-proof',
  tenant: 'x-agentws-tenant',
  user: 'x-agentws-user',
  fence: 'x-agentws-fence',
  relay: 'x-agentws-relay',
  relayTime: 'x-agentws-relay-time',
  relayNonce: 'x-agentws-relay-nonce',
} as const;

/** How long a signed relay request holds, either side of its timestamp (the clocks of control-plane hosts agree to within it: NTP). */
export const RELAY_WINDOW_MS = 30_000;
/** The most a runner's JSON answer (a sync's figures and copies, a start) may be. */
export const RUNNER_ANSWER_MAX_BYTES = 4 * 1024 * 1024;
/** The most one line of a runner's watch stream (a runtime ready or stopped) may be. */
export const RUNNER_NOTICE_MAX_BYTES = 64 * 1024;

/** What a runner says about itself when it connects. */
export interface RunnerInfo {
  name: string;
  address: string | null;
  capacity: number;
  labels: Record<string, string>;
  version: string;
  sharedStorage: boolean;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The control plane's answer to a runner's nonce: it knows the token's hash (which it stores). */
export function controlProof(tokenHash: string, nonce: string): string {
  return createHmac('sha256', tokenHash).update(`agentws-control\0${nonce}`).digest('base64url');
}

/** The runner's check of that answer (it hashes its own token). */
export function proofHolds(token: string, nonce: string, proof: string | undefined): boolean {
  return !!proof && sameText(controlProof(sha256(token), nonce), proof);
}

/** The key control-plane processes prove themselves to each other with, on the relay (never sent to a runner). */
export function relayKey(secret: string): string {
  return createHmac('sha256', secret).update('agentws-runner-relay').digest('base64url');
}

/** The signature of one relay request: the method, the path with its query, when, and a nonce used once. */
export function relaySignature(key: string, r: { method: string; path: string; time: string; nonce: string }): string {
  return createHmac('sha256', key).update(`agentws-relay\0${r.method.toUpperCase()}\0${r.path}\0${r.time}\0${r.nonce}`).digest('base64url');
}

export function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A WebSocket of a runtime (a terminal's pty) across the runner channel. An HTTP/2 stream cannot be
 * upgraded, so the runner opens the WebSocket to its runtime itself (`POST /rt/<user>/<path>` with
 * RUNNER_WEBSOCKET_HEADER) and both ends carry its messages as frames on the stream's two directions:
 * one byte of kind, four of length (big-endian), the payload. A close carries its code (two bytes) and
 * reason. A frame past RUNNER_FRAME_MAX_BYTES ends the stream.
 */
export const RUNNER_WEBSOCKET_HEADER = 'x-agentws-websocket';
const RUNNER_FRAME_MAX_BYTES = 1024 * 1024;
export type SocketFrame = { kind: 'text'; data: string } | { kind: 'binary'; data: Buffer } | { kind: 'close'; code: number; reason: string };
const FRAME_KINDS = { text: 1, binary: 2, close: 3 } as const;

export function encodeFrame(f: SocketFrame): Buffer {
  const payload =
    f.kind === 'text' ? Buffer.from(f.data, 'utf8') : f.kind === 'binary' ? f.data : Buffer.concat([Buffer.from([(f.code >> 8) & 0xff, f.code & 0xff]), Buffer.from(f.reason.slice(0, 120), 'utf8')]);
  const head = Buffer.alloc(5);
  head[0] = FRAME_KINDS[f.kind];
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** Reads frames from a stream's chunks as they arrive; throws on a frame too long or of no known kind. */
export function frameReader(onFrame: (f: SocketFrame) => void): (chunk: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 5) {
      const len = buf.readUInt32BE(1);
      if (len > RUNNER_FRAME_MAX_BYTES) throw new Error(`a socket frame of ${len} bytes (at most ${RUNNER_FRAME_MAX_BYTES})`);
      if (buf.length < 5 + len) return;
      const kind = buf[0];
      const payload = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      if (kind === FRAME_KINDS.text) onFrame({ kind: 'text', data: payload.toString('utf8') });
      else if (kind === FRAME_KINDS.binary) onFrame({ kind: 'binary', data: Buffer.from(payload) });
      else if (kind === FRAME_KINDS.close) onFrame({ kind: 'close', code: payload.length >= 2 ? payload.readUInt16BE(0) : 1000, reason: payload.subarray(2).toString('utf8') });
      else throw new Error(`a socket frame of unknown kind ${kind}`);
    }
  };
}
