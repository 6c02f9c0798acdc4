import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import http2, { type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { createRunnerLinks, RunnerOverflow, type RunnerNotice } from '../../src/core/runtime/host/runner-links.js';
import { relaySignature, RUNNER_ANSWER_MAX_BYTES, RUNNER_HEADERS, RUNNER_NOTICE_MAX_BYTES, RUNNER_PATHS } from '../../src/core/runtime/host/runner-protocol.js';

/**
 * The control plane's end of the runner channels (runner-links.ts) on real sockets: a runner that sends
 * more than the channel takes is cut off, and the relay between control-plane processes takes only
 * requests signed now, once, never a key on the wire; an https relay URL is used as https.
 */
const KEY = 'relay-key-of-this-appliance';
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A runner's HTTP/2 server on one end of a connected socket pair; the other end for links.attach. */
async function runnerPair(handler: (req: Http2ServerRequest, res: Http2ServerResponse) => void): Promise<{ control: Socket; closed: Promise<void> }> {
  const server = http2.createServer(handler);
  server.on('sessionError', () => {});
  const listener = net.createServer((s) => server.emit('connection', s));
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const control = net.connect((listener.address() as AddressInfo).port, '127.0.0.1');
  await new Promise<void>((r) => control.once('connect', () => r()));
  const closed = new Promise<void>((r) => control.once('close', () => r()));
  cleanups.push(() => {
    control.destroy();
    listener.close();
    server.close();
  });
  return { control, closed };
}

function linksFor(o: { relayUrl?: string | null; notices?: RunnerNotice[] } = {}) {
  const links = createRunnerLinks({ log: silentLogger, relayKey: KEY, relayUrlOf: async () => o.relayUrl ?? null, onNotice: (_id, n) => o.notices?.push(n), onClosed: () => {} });
  cleanups.push(() => links.close());
  return links;
}

describe('runner channel bounds', () => {
  it('a runner whose watch line is over the bound has its channel closed; lines within it are notices', async () => {
    const notices: RunnerNotice[] = [];
    let watch: Http2ServerResponse | null = null;
    const { control, closed } = await runnerPair((req, res) => {
      if (req.url === '/watch') {
        res.writeHead(200);
        watch = res;
        return;
      }
      res.writeHead(404).end();
    });
    const links = linksFor({ notices });
    const link = links.attach('r1', 'r1', control, Buffer.alloc(0));
    await expect.poll(() => watch !== null).toBe(true);
    watch!.write(`${JSON.stringify({ type: 'stopped', tenantId: 't', userId: 'u', fence: 3, pid: 1 })}\n`);
    await expect.poll(() => notices.length).toBe(1);
    // One line of 64 KiB and more, never ended: the channel goes.
    watch!.write('x'.repeat(RUNNER_NOTICE_MAX_BYTES + 10));
    await closed;
    expect(link.session.destroyed).toBe(true);
    expect(links.local('r1')).toBeUndefined();
  });

  it('a JSON answer over the bound is refused and closes the channel', async () => {
    const { control, closed } = await runnerPair((req, res) => {
      if (req.url === '/watch') return void res.writeHead(200);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"users":"${'y'.repeat(RUNNER_ANSWER_MAX_BYTES)}"}`);
    });
    const links = linksFor();
    links.attach('r1', 'r1', control, Buffer.alloc(0));
    await expect(links.call('r1', 'POST', '/sync', {})).rejects.toBeInstanceOf(RunnerOverflow);
    await closed;
  });
});

describe('the relay between control-plane processes', () => {
  /** A serve holding runner r1's channel, answering the relay on an HTTP listener of its own. */
  async function holdingServe() {
    const seen: string[] = [];
    const { control } = await runnerPair((req, res) => {
      if (req.url === '/watch') return void res.writeHead(200);
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: req.url }));
    });
    const holder = linksFor();
    holder.attach('r1', 'r1', control, Buffer.alloc(0));
    const server = http.createServer((req, res) => holder.serveRelay(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => server.close());
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
  }
  const send = (url: string, path: string, headers: Record<string, string>) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(new URL(path, url), { method: 'POST', headers }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end('{}');
    });

  it('another process\'s request reaches the runner through the serve holding its channel, signed', async () => {
    const { url, seen } = await holdingServe();
    const other = linksFor({ relayUrl: url });
    expect(await other.call('r1', 'POST', '/sync?x=1', {})).toEqual({ ok: '/sync?x=1' });
    expect(seen).toEqual(['POST /sync?x=1']);
  });

  it('refuses the old static key, a replayed signature, one signed too long ago, and one for another path', async () => {
    const { url, seen } = await holdingServe();
    const path = `${RUNNER_PATHS.relay}r1/sync`;
    expect((await send(url, path, { [RUNNER_HEADERS.relay]: KEY })).status).toBe(401);
    const time = String(Date.now());
    const nonce = 'n'.repeat(24);
    const signed = { [RUNNER_HEADERS.relay]: relaySignature(KEY, { method: 'POST', path, time, nonce }), [RUNNER_HEADERS.relayTime]: time, [RUNNER_HEADERS.relayNonce]: nonce };
    expect((await send(url, path, signed)).status).toBe(200);
    // Seen on the wire and sent again: refused.
    expect((await send(url, path, signed)).status).toBe(401);
    const old = String(Date.now() - 5 * 60_000);
    expect((await send(url, path, { [RUNNER_HEADERS.relay]: relaySignature(KEY, { method: 'POST', path, time: old, nonce: 'm'.repeat(24) }), [RUNNER_HEADERS.relayTime]: old, [RUNNER_HEADERS.relayNonce]: 'm'.repeat(24) })).status).toBe(401);
    const t2 = String(Date.now());
    expect((await send(url, `${RUNNER_PATHS.relay}r1/stop`, { [RUNNER_HEADERS.relay]: relaySignature(KEY, { method: 'POST', path, time: t2, nonce: 'k'.repeat(24) }), [RUNNER_HEADERS.relayTime]: t2, [RUNNER_HEADERS.relayNonce]: 'k'.repeat(24) })).status).toBe(401);
    expect((await send(url, path, { [RUNNER_HEADERS.relay]: relaySignature('another-key', { method: 'POST', path, time: t2, nonce: 'j'.repeat(24) }), [RUNNER_HEADERS.relayTime]: t2, [RUNNER_HEADERS.relayNonce]: 'j'.repeat(24) })).status).toBe(401);
    expect(seen).toEqual(['POST /sync']);
  });

  it('an https relay URL is spoken to over TLS (here a certificate nobody vouches for: refused as such)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentws-relay-tls-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    let reached = false;
    const server = https.createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (_req, res) => {
      reached = true;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => server.close());
    const other = linksFor({ relayUrl: `https://127.0.0.1:${(server.address() as AddressInfo).port}` });
    const err = (await other.call('r1', 'POST', '/sync', {}).catch((e) => e)) as { code?: string; message?: string };
    expect(String(err?.code ?? err?.message)).toMatch(/SELF_SIGNED|self.signed|certificate/i);
    expect(reached).toBe(false);
  });
});
