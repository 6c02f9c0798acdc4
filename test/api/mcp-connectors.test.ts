import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { seedPeople } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * MCP connectors, the admin API: registering servers with a sealed credential and per-role
 * tool access; validation naming the field; admin.manage_providers only; secrets never returned; audited.
 * The database plays no part beyond storing rows: PostgreSQL only.
 */
describe.runIf(DB_MODE === 'postgres')('MCP connectors: the admin API', () => {
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let other: Awaited<ReturnType<typeof seedPeople>>;
  const SECRET = `mcp-secret-${Math.random().toString(36).slice(2)}`;
  const base = '/v1/admin/connectors/mcp';
  const auditOf = async (action: string) => (await t.opened.db.query(`select target, details from audit_log where tenant_id = $1 and action = $2 order by ts`, [acme.tenantId, action])).rows;

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedPeople(t, 'acme');
    other = await seedPeople(t, 'other');
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  it('registers a server; the secret is sealed at rest and never returned; the change is audited', async () => {
    const r = await api(t, 'POST', base, {
      token: acme.tokens.owner,
      body: { name: 'tracker', url: 'https://mcp.example.com/mcp', secret: SECRET, access: [{ role: 'member', tools: ['search'] }, { role: 'admin', tools: '*' }] },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.json.server).toMatchObject({ name: 'tracker', url: 'https://mcp.example.com/mcp', authKind: 'bearer', authHeader: null, hasSecret: true, enabled: true, gatewayPath: '/mcp/connectors/tracker' });
    expect(r.text).not.toContain(SECRET);
    const row = (await t.opened.db.query(`select secret_sealed from mcp_servers where name = 'tracker'`)).rows[0];
    expect(row.secret_sealed).not.toContain(SECRET);
    const list = await api(t, 'GET', base, { token: acme.tokens.owner });
    expect(list.json.servers.map((s: any) => s.name)).toEqual(['tracker']);
    expect(list.text).not.toContain(SECRET);
    // Another tenant sees none of it, and cannot reach it by name.
    expect((await api(t, 'GET', base, { token: other.tokens.owner })).json.servers).toEqual([]);
    expect((await api(t, 'GET', `${base}/tracker`, { token: other.tokens.owner })).status).toBe(404);
    const audit = await auditOf('connector.mcp.add');
    expect(audit[0]).toMatchObject({ target: 'mcp:tracker', details: { secret: 'set', authKind: 'bearer' } });
    expect(JSON.stringify(audit)).not.toContain(SECRET);
    expect((await api(t, 'POST', base, { token: acme.tokens.owner, body: { name: 'tracker', url: 'https://x.example/mcp' } })).status).toBe(409);
  });

  it('refuses bad input with a 400 naming the field', async () => {
    const bad = async (body: unknown, match: RegExp) => {
      const r = await api(t, 'POST', base, { token: acme.tokens.owner, body });
      expect(r.status, r.text).toBe(400);
      expect(r.json.message, r.text).toMatch(match);
    };
    await bad({ name: 'Bad Name', url: 'https://x/mcp' }, /name/);
    await bad({ name: 'memory', url: 'https://x/mcp' }, /reserved/);
    await bad({ name: 'a1', url: 'file:///etc/passwd' }, /url must be an http/);
    await bad({ name: 'a1', url: 'https://u:p@x/mcp' }, /url must not carry credentials/);
    await bad({ name: 'a1', url: 'https://x/mcp', authKind: 'bearer' }, /authKind bearer needs a secret/);
    await bad({ name: 'a1', url: 'https://x/mcp', authKind: 'header', secret: 's' }, /authHeader/);
    await bad({ name: 'a1', url: 'https://x/mcp', authKind: 'header', authHeader: 'host', secret: 's' }, /authHeader cannot be host/);
    await bad({ name: 'a1', url: 'https://x/mcp', secret: 'a\nb' }, /secret must not contain line breaks/);
    await bad({ name: 'a1', url: 'https://x/mcp', access: [{ role: 'member', tools: '*' }, { role: 'member', tools: [] }] }, /access\[1\]\.role "member" is listed twice/);
    await bad({ name: 'a1', url: 'https://x/mcp', access: [{ role: 'member', tools: ['bad tool'] }] }, /access\[0\]\.tools/);
  });

  it('updates: a header credential, access replaced; the secret never follows the URL to another origin', async () => {
    const moved = await api(t, 'PATCH', `${base}/tracker`, { token: acme.tokens.owner, body: { url: 'https://elsewhere.example/mcp' } });
    expect(moved.status).toBe(400);
    expect(moved.json.message).toMatch(/another origin/);
    const samePath = await api(t, 'PATCH', `${base}/tracker`, { token: acme.tokens.owner, body: { url: 'https://mcp.example.com/v2/mcp' } });
    expect(samePath.status, samePath.text).toBe(200);
    expect(samePath.json.server).toMatchObject({ url: 'https://mcp.example.com/v2/mcp', hasSecret: true });
    const header = await api(t, 'PATCH', `${base}/tracker`, { token: acme.tokens.owner, body: { authKind: 'header', authHeader: 'X-Api-Key', access: [{ role: 'member', tools: '*' }] } });
    expect(header.status, header.text).toBe(200);
    expect(header.json.server).toMatchObject({ authKind: 'header', authHeader: 'x-api-key', hasSecret: true, access: [{ role: 'member', tools: '*' }] });
    const dropped = await api(t, 'PATCH', `${base}/tracker`, { token: acme.tokens.owner, body: { secret: null, enabled: false } });
    expect(dropped.status, dropped.text).toBe(200);
    expect(dropped.json.server).toMatchObject({ authKind: 'none', authHeader: null, hasSecret: false, enabled: false });
    const audit = await auditOf('connector.mcp.update');
    expect(audit.at(-1)).toMatchObject({ details: { secret: 'removed', changed: ['enabled', 'secret'] } });
    expect((await api(t, 'PATCH', `${base}/nope`, { token: acme.tokens.owner, body: { enabled: true } })).status).toBe(404);
  });

  it('grants resources and prompts apart from tools: none unless given, "*" or lists, checked naming the field', async () => {
    const r = await api(t, 'POST', base, {
      token: acme.tokens.owner,
      body: { name: 'wiki', url: 'https://wiki.example.com/mcp', access: [{ role: 'member', tools: ['search'], resources: ['docs://handbook/*'], prompts: ['triage'] }, { role: 'admin', tools: '*', resources: '*', prompts: '*' }, { role: 'viewer', tools: [] }] },
    });
    expect(r.status, r.text).toBe(201);
    // Spelled out as stored: an entry without them has none.
    expect(r.json.server.access).toEqual([
      { role: 'member', tools: ['search'], resources: ['docs://handbook/*'], prompts: ['triage'] },
      { role: 'admin', tools: '*', resources: '*', prompts: '*' },
      { role: 'viewer', tools: [], resources: [], prompts: [] },
    ]);
    expect((await auditOf('connector.mcp.add')).at(-1)!.details.access[0]).toEqual({ role: 'member', tools: ['search'], resources: ['docs://handbook/*'], prompts: ['triage'] });
    // A row written before resources and prompts could be granted reads as tools only.
    await t.opened.db.query(`update mcp_servers set access = $2 where tenant_id = $1 and name = 'wiki'`, [acme.tenantId, JSON.stringify([{ role: 'member', tools: '*' }])]);
    expect((await api(t, 'GET', `${base}/wiki`, { token: acme.tokens.owner })).json.server.access).toEqual([{ role: 'member', tools: '*', resources: [], prompts: [] }]);
    const bad = async (access: unknown, match: RegExp) => {
      const res = await api(t, 'PATCH', `${base}/wiki`, { token: acme.tokens.owner, body: { access } });
      expect(res.status, res.text).toBe(400);
      expect(res.json.message, res.text).toMatch(match);
    };
    await bad([{ role: 'member', tools: [], resources: ['no-scheme'] }], /access\[0\]\.resources: "no-scheme" is not a resource URI/);
    await bad([{ role: 'member', tools: [], resources: ['docs://a*b'] }], /access\[0\]\.resources/);
    await bad([{ role: 'member', tools: [], prompts: ['bad name'] }], /access\[0\]\.prompts/);
    await bad([{ role: 'member', tools: [], prompts: 'all' }], /prompts/);
  });

  it('only admin.manage_providers: members and viewers are refused, anonymous callers too', async () => {
    for (const token of [acme.tokens.member, acme.tokens.viewer]) {
      expect((await api(t, 'GET', base, { token })).status).toBe(403);
      expect((await api(t, 'POST', base, { token, body: { name: 'x1', url: 'https://x/mcp' } })).status).toBe(403);
      expect((await api(t, 'PATCH', `${base}/tracker`, { token, body: { enabled: true } })).status).toBe(403);
      expect((await api(t, 'DELETE', `${base}/tracker`, { token })).status).toBe(403);
    }
    expect((await api(t, 'GET', base)).status).toBe(401);
  });

  it('removes a server, audited', async () => {
    expect((await api(t, 'DELETE', `${base}/tracker`, { token: acme.tokens.owner })).status).toBe(204);
    expect((await api(t, 'DELETE', `${base}/tracker`, { token: acme.tokens.owner })).status).toBe(404);
    expect((await auditOf('connector.mcp.remove'))[0]).toMatchObject({ target: 'mcp:tracker' });
  });
});
