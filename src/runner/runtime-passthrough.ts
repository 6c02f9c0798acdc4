import http from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import WebSocket from 'ws';
import { managedConfigDir, runtimeRoot, writeManagedConfig } from '../core/runtime/host/managed-config.js';
import { encodeFrame, frameReader } from '../core/runtime/host/runner-protocol.js';
import type { RuntimeHandle } from '../core/runtime/host/runtime-transport.js';
import { endToEndHeaders } from './hop-headers.js';
import { json, readJson } from './order-replies.js';
import type { RunnerRuntimes, RunnerState } from './runner-state.js';

/** The control plane's requests to the runtime of a user placed here: its API, its sockets, its managed configuration. */
export function createRuntimePassthrough(o: { dataDir: string; state: RunnerState; runtimes: RunnerRuntimes }) {
  const { state, runtimes } = o;

  /** The runtime API of a user placed here, passed through as it streams. */
  async function passToRuntime(userId: string, path: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const lease = state.leases.get(userId);
    const handle: RuntimeHandle | null = lease ? (state.configuring.get(userId) ?? (await runtimes.running({ tenantId: lease.tenantId, userId }))) : null;
    if (!handle?.endpoint.socketPath && !handle?.endpoint.url) {
      req.resume();
      return json(res, 503, { error: 'runtime_unavailable', message: 'the runtime is not running on this runner' });
    }
    const ep = handle.endpoint;
    const headers = endToEndHeaders(req.headers);
    headers.authorization = ep.authorization;
    const target = ep.socketPath ? { socketPath: ep.socketPath, path } : { host: new URL(ep.url!).hostname, port: new URL(ep.url!).port, path };
    const up = http.request({ ...target, method: req.method, headers, agent: false });
    up.on('response', (r) => {
      res.writeHead(r.statusCode ?? 502, endToEndHeaders(r.headers));
      r.pipe(res);
    });
    up.on('error', (err) => (res.headersSent ? res.stream.close() : json(res, 502, { error: 'runtime_unavailable', message: err.message })));
    res.on('close', () => up.destroy());
    req.pipe(up);
  }

  /**
   * A WebSocket of a user's runtime placed here (a terminal), for the control plane: the channel's
   * HTTP/2 streams cannot be upgraded, so the runner opens it to the runtime and carries its messages as
   * frames (runner-protocol.ts) on this stream, both ways. 200 once it is open. The runtime is kept
   * awake while messages pass (a terminal is use, like any request).
   */
  async function bridgeSocket(userId: string, path: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const lease = state.leases.get(userId);
    const handle: RuntimeHandle | null = lease ? await runtimes.running({ tenantId: lease.tenantId, userId }) : null;
    const ep = handle?.endpoint;
    if (!ep?.socketPath && !ep?.url) {
      req.resume();
      return json(res, 503, { error: 'runtime_unavailable', message: 'the runtime is not running on this runner' });
    }
    const url = ep.socketPath ? `ws+unix://${ep.socketPath}:${path}` : new URL(path, ep.url!.replace(/^http/, 'ws')).toString();
    const ws = new WebSocket(url, { headers: { authorization: ep.authorization }, perMessageDeflate: false, handshakeTimeout: 10_000 });
    let open = false;
    const end = (code: number, reason: string) => {
      if (!res.writableEnded && !res.destroyed) res.end(encodeFrame({ kind: 'close', code, reason }));
    };
    ws.on('unexpected-response', (_r, up) => {
      up.resume();
      req.resume();
      json(res, up.statusCode === 404 ? 404 : 502, { error: 'runtime_refused', message: `the runtime refused the socket (HTTP ${up.statusCode})` });
      ws.terminate();
    });
    ws.on('error', (err) => {
      if (open) return end(1011, err.message);
      req.resume();
      if (!res.headersSent) json(res, 502, { error: 'runtime_unavailable', message: err.message });
    });
    ws.on('open', () => {
      open = true;
      (ws as unknown as { _socket?: { setNoDelay?: (on: boolean) => void } })._socket?.setNoDelay?.(true);
      // Sent at once (the compat layer responds on writeHead): the control plane waits for it.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const read = frameReader((f) => {
        runtimes.touch(userId);
        if (f.kind === 'close') ws.close();
        else if (ws.readyState === WebSocket.OPEN) ws.send(f.data, { binary: f.kind === 'binary' });
      });
      req.on('data', (c: Buffer) => {
        try {
          read(c);
        } catch {
          ws.terminate();
        }
      });
      req.on('end', () => ws.close());
    });
    ws.on('message', (data, isBinary) => {
      runtimes.touch(userId);
      if (!res.writableEnded) res.write(encodeFrame(isBinary ? { kind: 'binary', data: data as Buffer } : { kind: 'text', data: data.toString() }));
    });
    ws.on('close', (code, reason) => end(code, reason.toString()));
    res.on('close', () => ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING ? ws.terminate() : undefined);
  }

  /**
   * The managed configuration of a user's runtime placed here, as the control plane wrote it (the host
   * writes it: inside, it is read-only; managed-config.ts).
   */
  async function writeConfig(userId: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const body = await readJson(req);
    if (!state.leases.has(userId) || !/^[A-Za-z0-9-]{1,64}$/.test(userId)) return json(res, 404, { error: 'not_found', message: 'no such user on this runner' });
    if (!body || typeof body !== 'object' || Array.isArray(body)) return json(res, 400, { error: 'validation_failed', message: 'a JSON object' });
    return json(res, 200, { changed: writeManagedConfig(managedConfigDir(runtimeRoot(o.dataDir, userId)), body) });
  }

  return { passToRuntime, bridgeSocket, writeConfig };
}
