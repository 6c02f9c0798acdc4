import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyListener } from '../../src/core/runtime/host/egress-proxy.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';
import { connectThrough } from '../helpers/proxy-client.js';
import { UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';

/**
 * The tenant's egress settings through `PATCH /v1/admin/tenant`, as the agents' proxy applies them (the
 * real core's egress, a listener as a runtime gets one): ports beyond 80 and 443 from the tenant and the
 * operator, deny lists that hold addresses and ranges, and denied names matched on their addresses. The
 * operator trusts loopback here (AGENTWS_EGRESS_PRIVATE_ALLOW=127.0.0.1, no port) so that what a test
 * server on an ephemeral port meets is the port and list rules.
 */
describe(`egress settings, applied by the agents' proxy (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: { tenantId: string; ids: Record<string, string> };
  let owner: string;
  let admin: string;
  let listener: ProxyListener;
  const servers: http.Server[] = [];
  const ports: Record<'tenant' | 'operator', number> = { tenant: 0, operator: 0 };

  async function loopbackServer(name: string): Promise<number> {
    const server = http.createServer((_req, res) => res.end(`hello from ${name}`));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    return (server.address() as AddressInfo).port;
  }

  beforeAll(async () => {
    ports.tenant = await loopbackServer('tenant');
    ports.operator = await loopbackServer('operator');
    t = await startTestApp({ vars: { AGENTWS_EGRESS_PRIVATE_ALLOW: '127.0.0.1', AGENTWS_EGRESS_PORTS: `${ports.operator}, 587` } });
    acme = await seedTenant(t, 'acme', [{ handle: 'ada', roles: ['admin'] }, { handle: 'mel', roles: ['member'] }]);
    owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    listener = await t.opened.core.egress.listen({ tenantId: acme.tenantId, userId: acme.ids.mel, credential: 'agws_test-credential', self: UNKNOWN_SELF }, { port: 0 });
  });
  afterAll(async () => {
    await listener?.close();
    await t?.close();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  /** CONNECT through the member's proxy listener; on 200, one GET in the tunnel. */
  const connect = (target: string) => connectThrough(listener.address, target);

  /** The proxy reuses a tenant's rules for 2 s: wait until a change shows (or give up after 6 s). */
  async function eventually(target: string, expected: (r: { status: number; body: string }) => boolean): Promise<{ status: number; body: string }> {
    const until = Date.now() + 6000;
    for (;;) {
      const r = await connect(target);
      if (expected(r) || Date.now() > until) return r;
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  const patch = (egress: Record<string, unknown>, token = owner) => api(t, 'PATCH', '/v1/admin/tenant', { token, body: { settings: { egress } } });

  it("opens the operator's AGENTWS_EGRESS_PORTS; another port only once the tenant's egress.ports opens it", async () => {
    const op = await connect(`127.0.0.1:${ports.operator}`);
    expect(op.status).toBe(200);
    expect(op.body).toContain('hello from operator');
    const closed = await connect(`127.0.0.1:${ports.tenant}`);
    expect(closed.status).toBe(403);
    expect(closed.body).toContain(`port ${ports.tenant} is not open for egress (open: 80, 443, 587, ${ports.operator})`);
    // A public address on SMTP's port: refused before it is dialled.
    expect((await connect('93.184.216.34:25')).body).toContain('port 25 is not open');

    expect((await patch({ ports: [ports.tenant] }, admin)).status).toBe(403);
    const r = await patch({ ports: [ports.tenant, ports.tenant, 2222] });
    expect(r.status, r.text).toBe(200);
    expect(r.json.tenant.settings.egress).toEqual({ allow: [], deny: [], ports: [2222, ports.tenant].sort((a, b) => a - b) });
    const open = await eventually(`127.0.0.1:${ports.tenant}`, (x) => x.status === 200);
    expect(open.body).toContain('hello from tenant');
  });

  it('takes addresses and ranges in the lists, keeps the keys a change leaves out, and refuses what is not a port or an entry', async () => {
    for (const [egress, field] of [
      [{ ports: [0] }, 'ports'],
      [{ ports: [65536] }, 'ports'],
      [{ deny: ['not a host!'] }, 'deny'],
      [{ allow: ['10.0.0.0/33'] }, 'allow'],
    ] as const) {
      const r = await patch(egress);
      expect(r.status, JSON.stringify(egress)).toBe(400);
      expect(r.text).toContain(field);
    }
    const r = await patch({ deny: ['Pastebin.COM.', '*.evil.example', '104.20.1.2', '8.8.8.0/24', '[2606:4700::1]'] });
    expect(r.status, r.text).toBe(200);
    expect(r.json.tenant.settings.egress).toEqual({ allow: [], deny: ['pastebin.com', 'evil.example', '104.20.1.2', '8.8.8.0/24', '2606:4700::1'], ports: expect.arrayContaining([ports.tenant]) });
    // Cleared before any connection reads it: the proxy would look these names up on the real DNS.
    expect((await patch({ deny: [] })).json.tenant.settings.egress.deny).toEqual([]);
  });

  it('refuses a denied name at its addresses (an IP literal), and a denied range', async () => {
    expect((await connect(`127.0.0.1:${ports.tenant}`)).status).toBe(200);
    expect((await patch({ deny: ['localhost'] })).status).toBe(200);
    const byName = await eventually(`127.0.0.1:${ports.tenant}`, (x) => x.status === 403);
    expect(byName.status).toBe(403);
    expect(byName.body).toContain("127.0.0.1 is an address of a name on the tenant's deny list");
    expect((await patch({ deny: ['127.0.0.0/8'] })).status).toBe(200);
    const byRange = await eventually(`127.0.0.1:${ports.operator}`, (x) => x.body.includes("127.0.0.1 is on the tenant's deny list"));
    expect(byRange.status).toBe(403);
    expect(byRange.body).toContain("127.0.0.1 is on the tenant's deny list");
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=egress.denied', { token: owner });
    expect(audit.json.entries.map((e: { target: string }) => e.target)).toEqual(expect.arrayContaining([`127.0.0.1:${ports.tenant}`, '93.184.216.34:25']));
  });
});
