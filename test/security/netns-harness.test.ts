import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNetwork, netnsAvailable, sweepNetworks, type Network } from '../helpers/netns.js';

/**
 * The multi-host harness itself (test/helpers/netns.ts), which runners-multihost.test.ts builds on: hosts
 * reach the control plane at the bridge address and each other over the bridge, never the root
 * namespace's loopback; a cut link is a partition until restored; bubblewrap works inside a host; what a
 * run makes is gone after destroy(), and what a killed run left is swept without touching a live network.
 */
const can = netnsAvailable();
// CI runs as root: there the harness must work, and a machine that cannot is a failure, not a skip.
const mustRun = !!process.env.CI && process.getuid?.() === 0;
if (!can.ok && !mustRun) console.warn(`netns tests skipped: ${can.reason}`);

/** node -e: fetches argv[1] within argv[2] ms; prints "ok <body>" or "fail <code>" (and exits: a connect still pending would keep it). */
const FETCH = `fetch(process.argv[1], { signal: AbortSignal.timeout(Number(process.argv[2])) }).then(async (r) => { console.log('ok ' + (await r.text())); process.exit(0); }, (e) => { console.log('fail ' + (e.cause?.code ?? e.name)); process.exit(1); });`;
const SERVE = `require('node:http').createServer((q, s) => s.end(process.argv[1])).listen(0, '0.0.0.0', function () { console.log(this.address().port); });`;
const bwrap = ['/usr/bin/bwrap', '/bin/bwrap'].find((p) => existsSync(p));

function listen(host: string, body: string): Promise<{ server: Server; url: string }> {
  return new Promise((resolve, reject) => {
    const server = createServer((_req, res) => res.end(body));
    server.once('error', reject);
    server.listen(0, host, () => resolve({ server, url: `http://${host}:${(server.address() as AddressInfo).port}/` }));
  });
}

const firstLine = (child: ChildProcess) =>
  new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c) => {
      out += c;
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    child.once('exit', (code) => reject(new Error(`exited (${code}) before printing: ${out}`)));
  });

const links = () => spawnSync('ip', ['-o', 'link', 'show']).stdout.toString();
const namespaces = () => spawnSync('ip', ['netns', 'list']).stdout.toString();

describe.skipIf(!can.ok && !mustRun)('the multi-host test harness (network namespaces)', () => {
  let net: Network;
  let control: { server: Server; url: string };
  let loopback: { server: Server; url: string };
  const fetchFrom = async (host: string, url: string, timeoutMs = 2000) => (await net.run(host, [process.execPath, '-e', FETCH, url, String(timeoutMs)])).stdout.trim();

  beforeAll(async () => {
    if (!can.ok) throw new Error(`this machine cannot make network namespaces: ${can.reason}`);
    net = createNetwork({ hosts: ['r1', 'r2', 'r3'] });
    control = await listen(net.controlAddress, 'control');
    loopback = await listen('127.0.0.1', 'root loopback');
  });

  afterAll(async () => {
    net?.destroy();
    sweepNetworks();
    await Promise.all([control, loopback].map((s) => s && new Promise((r) => s.server.close(r))));
  });

  it('gives each host its own namespace and address on one /24 with the control address', () => {
    expect(net.controlAddress).toMatch(/^10\.77\.\d+\.1$/);
    expect([...net.hosts.keys()]).toEqual(['r1', 'r2', 'r3']);
    const subnet = net.controlAddress.replace(/\.1$/, '.');
    for (const h of net.hosts.values()) {
      expect(h.address.startsWith(subnet)).toBe(true);
      expect(namespaces()).toContain(h.ns);
      expect(h.veth.length).toBeLessThanOrEqual(15);
    }
  });

  it('each host reaches the control plane at the bridge address, and not the root namespace loopback', async () => {
    const results = await Promise.all(
      [...net.hosts.keys()].map(async (h) => ({ host: h, control: await fetchFrom(h, control.url), loopback: await fetchFrom(h, loopback.url) })),
    );
    for (const r of results) {
      expect(r.control, r.host).toBe('ok control');
      // Its 127.0.0.1 is its own, where nothing listens.
      expect(r.loopback, r.host).toBe('fail ECONNREFUSED');
    }
    // The same server answers in the root namespace: what the hosts miss is there.
    expect(await (await fetch(loopback.url)).text()).toBe('root loopback');
  });

  it('hosts reach each other over the bridge', async () => {
    const server = net.exec('r2', [process.execPath, '-e', SERVE, 'r2 here']);
    try {
      const port = await firstLine(server);
      expect(await fetchFrom('r1', `http://${net.hosts.get('r2')!.address}:${port}/`)).toBe('ok r2 here');
      // ...but a host's own loopback stays its own.
      expect(await fetchFrom('r1', `http://127.0.0.1:${port}/`)).toBe('fail ECONNREFUSED');
    } finally {
      server.kill('SIGKILL');
    }
  });

  it('cut() partitions a host until restore()', async () => {
    net.cut('r2');
    try {
      expect(await fetchFrom('r2', control.url, 800)).toBe('fail TimeoutError');
      expect(await fetchFrom('r1', control.url)).toBe('ok control');
    } finally {
      net.restore('r2');
    }
    let back = '';
    for (const deadline = Date.now() + 10_000; Date.now() < deadline && back !== 'ok control'; ) back = await fetchFrom('r2', control.url, 1000);
    expect(back).toBe('ok control');
  });

  it.skipIf(!bwrap)('bubblewrap runs inside a host, and its --unshare-net leaves the sandbox without the host network', async () => {
    const sandbox = (...extra: string[]) => [bwrap!, '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--unshare-all', ...extra, '--die-with-parent', '--', process.execPath, '-e', FETCH, control.url, '1500'];
    const shared = await net.run('r3', sandbox('--share-net'));
    expect(shared.stdout.trim(), shared.stderr).toBe('ok control');
    const isolated = await net.run('r3', sandbox());
    expect(isolated.stdout.trim(), isolated.stderr).toMatch(/^fail /);
  });

  it("a killed run's network is swept by the next createNetwork, a live one is not; destroy() leaves nothing", async () => {
    // Another process makes a network and dies without cleaning up.
    const helper = fileURLToPath(new URL('../helpers/netns.ts', import.meta.url));
    const child = spawn(process.execPath, ['-e', `import(process.argv[1]).then((m) => { const n = m.createNetwork({ hosts: ['a', 'b'] }); console.log(JSON.stringify([...n.hosts.values()])); setInterval(() => {}, 1000); });`, helper], { stdio: ['ignore', 'pipe', 'inherit'] });
    const dead = JSON.parse(await firstLine(child)) as Array<{ ns: string; veth: string }>;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    for (const h of dead) {
      expect(namespaces()).toContain(h.ns);
      expect(links()).toContain(`${h.veth}@`);
    }

    const other = createNetwork({ hosts: ['x'] });
    try {
      for (const h of dead) {
        expect(namespaces()).not.toContain(h.ns);
        expect(links()).not.toContain(`${h.veth}@`);
      }
      // This process's first network lives on beside the second, on another subnet.
      expect(other.controlAddress).not.toBe(net.controlAddress);
      expect(await fetchFrom('r1', control.url)).toBe('ok control');
      const c2 = await listen(other.controlAddress, 'other');
      try {
        expect(await net.run('x', ['true']).catch((e) => String(e))).toMatch(/no host x/);
        expect((await other.run('x', [process.execPath, '-e', FETCH, c2.url, '2000'])).stdout.trim()).toBe('ok other');
      } finally {
        c2.server.close();
      }
    } finally {
      other.destroy();
    }

    // destroy(): the processes started in a host are killed, and no namespace or link is left.
    const sleeper = net.exec('r3', ['sleep', '60']);
    await new Promise((r) => sleeper.once('spawn', r));
    const exited = new Promise((r) => sleeper.once('exit', (_code, signal) => r(signal)));
    const id = net.hosts.get('r1')!.veth.slice(0, 9); // awsnt<id>
    net.destroy();
    expect(await exited).toBe('SIGKILL');
    for (const h of [...net.hosts.values(), ...other.hosts.values()]) expect(namespaces()).not.toContain(h.ns);
    expect(links()).not.toContain(id);
    expect(links()).not.toContain(other.hosts.get('x')!.veth.slice(0, 9));
  });
});
