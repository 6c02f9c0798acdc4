import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { SocketFrame } from '../../src/core/runtime/host/runner-protocol.js';
import { openRuntimeSocket } from '../../src/core/runtime/host/runtime-transport.js';

/**
 * A runtime replays a terminal's output as soon as its socket opens, often in the same packet as the
 * upgrade's answer: before whoever opened the socket has listened. Those frames must reach the first
 * listener (a command that had already ended lost its whole output, and its caller waited for it).
 */
describe('runtime sockets: frames that come before anyone listens', () => {
  let server: WebSocketServer;
  let url: string;

  beforeAll(async () => {
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // Sends at once, on connection, then closes: as a terminal whose command already ended.
    server.on('connection', (ws) => {
      ws.send('line one\r\n');
      ws.send('__END__:0\r\n');
      ws.close(1000, 'done');
    });
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('keeps them, and the close, for the first listener, however late it comes', async () => {
    const socket = await openRuntimeSocket({ url, authorization: 'Basic eDp5' }, '/pty/x/connect');
    // Listening well after the server sent everything and closed.
    await new Promise((r) => setTimeout(r, 100));
    const frames: SocketFrame[] = [];
    socket.onFrame((f) => frames.push(f));
    expect(frames.filter((f) => f.kind === 'text').map((f) => (f as { data: string }).data).join('')).toBe('line one\r\n__END__:0\r\n');
    expect(frames.at(-1)).toMatchObject({ kind: 'close', code: 1000 });
    // A second listener hears only what comes after it (nothing more here).
    const later: SocketFrame[] = [];
    socket.onFrame((f) => later.push(f));
    expect(later).toEqual([]);
  });
});
