import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlPlaneForbidden, createEgressDecider } from '../../src/core/runtime/host/egress-decider.js';
import { parsePrivateAllow, type EgressRules } from '../../src/core/runtime/host/egress-policy.js';
import { createEgressProxy, type ProxyListener } from '../../src/core/runtime/host/egress-proxy.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { connectThrough } from '../helpers/proxy-client.js';

const none: EgressRules = { allow: [], deny: [] };
const nic = (address: string) => ({ address, netmask: '', family: address.includes(':') ? 'IPv6' : 'IPv4', mac: '', internal: false, cidr: null }) as never;

/**
 * The decision as the agents' proxy makes it (egress-decider.ts): the host's interfaces read and re-read,
 * the deny list's names looked up and cached; then through a real proxy listener to a loopback server on
 * an ephemeral port, with the system resolver: what an agent's CONNECT gets.
 */
describe('egress decider', () => {
  it("refuses the host's own addresses as read from its interfaces, and reads them again after a while", async () => {
    let clock = 0;
    let addresses = ['34.1.2.3'];
    const decider = createEgressDecider({ privateAllow: [], ports: [], resolve: async () => ['34.1.2.9'], interfaces: () => ({ eth0: addresses.map(nic) }), now: () => clock });
    expect(await decider.decide('34.1.2.3', 443, none)).toEqual({ ok: false, reason: "34.1.2.3 is one of this host's own addresses" });
    expect((await decider.decide('me.example', 443, none)).ok).toBe(true);
    addresses = ['34.1.2.3', '34.1.2.9'];
    clock += 10_000;
    expect((await decider.decide('me.example', 443, none)).ok).toBe(true);
    clock += 25_000;
    expect(await decider.decide('me.example', 443, none)).toEqual({ ok: false, reason: "me.example resolves to one of this host's own addresses (34.1.2.9)" });
  });

  it("refuses a runner's control plane even where the operator's private allow list covers its network", async () => {
    let clock = 0;
    let answer: string[] | Error = ['10.0.0.5'];
    const forbidden = controlPlaneForbidden('http://cp.internal:8080/', {
      resolve: async () => {
        if (answer instanceof Error) throw answer;
        return answer;
      },
      now: () => clock,
    });
    const table: Record<string, string[]> = { 'cp.internal': ['10.0.0.5'], 'git.internal': ['10.0.0.7'] };
    const decider = createEgressDecider({ privateAllow: parsePrivateAllow('10.0.0.0/8').entries, ports: [8080], forbidden, resolve: async (h) => table[h] ?? [h], interfaces: () => ({}) });
    expect(await decider.decide('cp.internal', 8080, none)).toEqual({ ok: false, reason: 'the control plane is reached only through the gateway host' });
    expect(await decider.decide('10.0.0.5', 443, none)).toEqual({ ok: false, reason: 'the control plane is reached only through the gateway host' });
    // The rest of the allowed network stays open.
    expect(await decider.decide('git.internal', 443, none)).toMatchObject({ ok: true, address: '10.0.0.7' });
    // A failed lookup keeps what was known; a new answer a minute later adds the moved address.
    answer = new Error('SERVFAIL');
    clock += 61_000;
    expect((await decider.decide('10.0.0.5', 443, none)).ok).toBe(false);
    answer = ['10.0.0.6'];
    clock += 61_000;
    expect((await decider.decide('10.0.0.6', 443, none)).ok).toBe(false);
    expect((await decider.decide('10.0.0.5', 443, none)).ok).toBe(false);
  });

  it("looks the deny list's names up once a minute, and refuses their addresses", async () => {
    let clock = 0;
    const asked: string[] = [];
    const table: Record<string, string[]> = { 'pastebin.com': ['104.20.1.2'], 'paste-mirror.example': ['104.20.1.2'] };
    const resolve = async (host: string) => {
      asked.push(host);
      if (!table[host]) throw new Error('ENOTFOUND');
      return table[host];
    };
    const decider = createEgressDecider({ privateAllow: [], ports: [], resolve, interfaces: () => ({}), now: () => clock });
    const rules = { allow: [], deny: ['pastebin.com', 'gone.example'] };
    expect(await decider.decide('104.20.1.2', 443, rules)).toEqual({ ok: false, reason: "104.20.1.2 is an address of a name on the tenant's deny list" });
    expect((await decider.decide('paste-mirror.example', 443, rules)).ok).toBe(false);
    expect(asked.filter((h) => h === 'pastebin.com')).toHaveLength(1);
    // The name moves: within the minute the old address is still the denied one, after it the new one.
    table['pastebin.com'] = ['104.20.9.9'];
    clock += 30_000;
    expect((await decider.decide('104.20.9.9', 443, rules)).ok).toBe(true);
    clock += 31_000;
    expect((await decider.decide('104.20.9.9', 443, rules)).ok).toBe(false);
    expect((await decider.decide('104.20.1.2', 443, rules)).ok).toBe(true);
    expect(asked.filter((h) => h === 'pastebin.com')).toHaveLength(2);
  });

  describe('through a real proxy listener', () => {
    let server: http.Server;
    let port: number;
    const seen: string[] = [];
    const listeners: ProxyListener[] = [];

    beforeAll(async () => {
      server = http.createServer((req, res) => {
        seen.push(req.url ?? '');
        res.end('hello from loopback');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      await Promise.all(listeners.map((l) => l.close()));
      await new Promise((r) => server.close(r));
    });

    /** A proxy listener deciding with this decider and rules; CONNECT to `target`, then one GET in the tunnel. */
    async function connect(decider: ReturnType<typeof createEgressDecider>, rules: EgressRules, target: string): Promise<{ status: number; body: string }> {
      const proxy = createEgressProxy<string>({ decide: (_id, host, p) => decider.decide(host, p, rules), gateway: (_id, _req, res) => void res.end(), refused: () => {}, log: silentLogger });
      const listener = await proxy.listen('agent', { port: 0 });
      listeners.push(listener);
      return connectThrough(listener.address, target, '/tunnel');
    }

    it('refuses a public address on a port other than 80 and 443 before dialling it (SMTP)', async () => {
      const decider = createEgressDecider({ privateAllow: [], ports: [] });
      const r = await connect(decider, none, '93.184.216.34:25');
      expect(r.status).toBe(403);
      expect(r.body).toContain('refused 93.184.216.34:25: port 25 is not open for egress (open: 80, 443)');
    });

    it("opens a loopback server's port to an operator entry naming it, or to a trusted host once the port is open", async () => {
      const before = seen.length;
      // Trusted without a port: refused for its port, until the operator or the tenant opens it.
      const trusted = parsePrivateAllow('127.0.0.1').entries;
      expect((await connect(createEgressDecider({ privateAllow: trusted, ports: [] }), none, `127.0.0.1:${port}`)).status).toBe(403);
      expect(seen.length).toBe(before);
      expect((await connect(createEgressDecider({ privateAllow: trusted, ports: [port] }), none, `127.0.0.1:${port}`)).body).toContain('hello from loopback');
      expect((await connect(createEgressDecider({ privateAllow: trusted, ports: [] }), { ...none, ports: [port] }, `127.0.0.1:${port}`)).body).toContain('hello from loopback');
      expect((await connect(createEgressDecider({ privateAllow: parsePrivateAllow(`127.0.0.1:${port}`).entries, ports: [] }), none, `127.0.0.1:${port}`)).body).toContain('hello from loopback');
      expect(seen.length).toBe(before + 3);
    });

    it('refuses an address a denied name resolves to (the system resolver: localhost)', async () => {
      const decider = createEgressDecider({ privateAllow: parsePrivateAllow(`127.0.0.1:${port}`).entries, ports: [] });
      const before = seen.length;
      const r = await connect(decider, { allow: [], deny: ['localhost'] }, `127.0.0.1:${port}`);
      expect(r.status).toBe(403);
      expect(r.body).toContain("127.0.0.1 is an address of a name on the tenant's deny list");
      expect((await connect(decider, { allow: [], deny: ['127.0.0.0/8'] }, `127.0.0.1:${port}`)).body).toContain("127.0.0.1 is on the tenant's deny list");
      expect(seen.length).toBe(before);
    });
  });
});
