import http, { type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * A client of an egress proxy listener (a Unix socket path, or `http://127.0.0.1:<port>`): CONNECT to
 * `target` (host:port) and, when the proxy answers 200, one GET of `path` through the tunnel. Resolves
 * with the proxy's status and everything read from the tunnel (or the proxy's refusal text).
 */
export function connectThrough(listener: string, target: string, path = '/'): Promise<{ status: number; body: string }> {
  const at = listener.startsWith('http://') ? (() => { const u = new URL(listener); return { host: u.hostname, port: Number(u.port) }; })() : { socketPath: listener };
  return new Promise((resolve, reject) => {
    const req = http.request({ ...at, method: 'CONNECT', path: target, agent: false });
    req.on('connect', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      let data = head.toString();
      socket.on('data', (d) => (data += d));
      socket.on('end', () => resolve({ status: res.statusCode!, body: data }));
      socket.on('error', reject);
      if (res.statusCode === 200) socket.write(`GET ${path} HTTP/1.1\r\nhost: ${target}\r\nconnection: close\r\n\r\n`);
    });
    req.on('error', reject);
    req.end();
  });
}
