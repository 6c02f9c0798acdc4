import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

describe(`admin API (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: { tenantId: string; ids: Record<string, string> };
  let beta: { tenantId: string; ids: Record<string, string> };
  const tok: Record<string, string> = {};

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [
      { handle: 'ada', roles: ['admin'] },
      { handle: 'mel', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
    ]);
    beta = await seedTenant(t, 'beta', [{ handle: 'bea', roles: ['member'] }]);
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.member = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
    tok.betaOwner = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(() => t?.close());

  it('denies members with 403 and a documented envelope naming the permission', async () => {
    for (const [path, permission] of [
      ['/v1/admin/audit-log', 'admin.view_audit_log'],
      ['/v1/admin/usage', 'admin.view_audit_log'],
      ['/v1/admin/users', 'admin.manage_users'],
      ['/v1/admin/roles', 'admin.manage_roles'],
    ]) {
      const r = await api(t, 'GET', path, { token: tok.member });
      expect(r.status, path).toBe(403);
      expect(r.json).toEqual({ error: 'forbidden', message: `missing permission ${permission}`, details: { permission }, requestId: expect.any(String) });
    }
    expect((await api(t, 'GET', '/v1/admin/users')).status).toBe(401);
  });

  it('lists the tenant\'s users and roles, never another tenant\'s', async () => {
    const users = await api(t, 'GET', '/v1/admin/users', { token: tok.admin });
    expect(users.status).toBe(200);
    expect(users.json.users.map((u: { handle: string }) => u.handle).sort()).toEqual(['ada', 'mel', 'owner', 'vic']);
    expect(users.json.users.find((u: { handle: string }) => u.handle === 'ada').roles).toEqual(['admin']);
    const roles = await api(t, 'GET', '/v1/admin/roles', { token: tok.owner });
    expect(roles.json.roles.map((r: { name: string }) => r.name).sort()).toEqual(['admin', 'member', 'owner', 'viewer']);
    expect(roles.json.roles.find((r: { name: string }) => r.name === 'viewer').permissions).toEqual(systemRolePermissions('viewer'));
  });

  it('creates a custom role from a partial document: missing members are not granted', async () => {
    const r = await api(t, 'POST', '/v1/admin/roles', { token: tok.admin, body: { name: 'auditor', permissions: { admin: { view_audit_log: true }, tools: { allowed: ['read'] } } } });
    expect(r.status).toBe(201);
    expect(r.json.role.permissions).toEqual({
      agents: { create: false, delete: false, configure: false, terminal: false, code_host: false, use_templates: [] },
      memory: { read_own: false, read_team: false, read_org: false, write: false, delete: false, share: false },
      tools: { allowed: ['read'], denied: [] },
      models: { allowed: [] },
      admin: { manage_users: false, manage_roles: false, manage_templates: false, manage_providers: false, view_audit_log: true, manage_tenant: false },
      cost: {},
    });
    expect((await api(t, 'POST', '/v1/admin/roles', { token: tok.admin, body: { name: 'auditor', permissions: {} } })).status).toBe(409);
    const bad = await api(t, 'POST', '/v1/admin/roles', { token: tok.admin, body: { name: 'x', permissions: { admin: { fly: true } } } });
    expect(bad.status).toBe(400);
    expect((await api(t, 'POST', '/v1/admin/roles', { token: tok.member, body: { name: 'y', permissions: {} } })).status).toBe(403);
  });

  it('assigns and revokes roles in the tenant, audited, and keeps the last owner', async () => {
    const roles = (await api(t, 'GET', '/v1/admin/roles', { token: tok.owner })).json.roles as Array<{ id: string; name: string }>;
    const id = (n: string) => roles.find((r) => r.name === n)!.id;
    const assign = await api(t, 'POST', `/v1/admin/users/${acme.ids.mel}/roles`, { token: tok.admin, body: { roleId: id('auditor') } });
    expect(assign.status).toBe(200);
    expect(assign.json).toEqual({ userId: acme.ids.mel, role: { id: id('auditor'), name: 'auditor' }, roles: ['auditor', 'member'], changed: true });
    expect((await api(t, 'POST', `/v1/admin/users/${acme.ids.mel}/roles`, { token: tok.admin, body: { roleId: id('auditor') } })).json.changed).toBe(false);

    // The new role shows up at mel's next sign-in; a token carrying it can read the audit log.
    const melAuditor = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member', 'auditor'] });
    const log = await api(t, 'GET', '/v1/admin/audit-log?action=role.assign&limit=5', { token: melAuditor });
    expect(log.status).toBe(200);
    expect(log.json.entries[0]).toMatchObject({ action: 'role.assign', actor: `user:${acme.ids.ada}`, userId: acme.ids.ada, target: `user:${acme.ids.mel}`, channel: 'web', tenantId: acme.tenantId });

    const revoke = await api(t, 'DELETE', `/v1/admin/users/${acme.ids.mel}/roles/${id('auditor')}`, { token: tok.admin });
    expect(revoke.json.roles).toEqual(['member']);
    expect((await api(t, 'DELETE', `/v1/admin/users/${acme.ids.mel}/roles/${id('auditor')}`, { token: tok.admin })).status).toBe(404);
    const lastOwner = await api(t, 'DELETE', `/v1/admin/users/${acme.ids.owner}/roles/${id('owner')}`, { token: tok.owner });
    expect(lastOwner.status).toBe(409);

    // Another tenant's user or role is not found, whatever the caller's rights.
    expect((await api(t, 'POST', `/v1/admin/users/${beta.ids.bea}/roles`, { token: tok.owner, body: { roleId: id('admin') } })).status).toBe(404);
    expect((await api(t, 'POST', `/v1/admin/users/${acme.ids.mel}/roles`, { token: tok.betaOwner, body: { roleId: id('admin') } })).status).toBe(404);
    expect((await api(t, 'POST', `/v1/admin/users/not-a-uuid/roles`, { token: tok.owner, body: { roleId: id('admin') } })).status).toBe(400);
  });

  it('lists audit entries in the order they were written, also those of one transaction that share a timestamp', async () => {
    // The embedded database keeps time to the millisecond: entries written together share their `ts`.
    const { core } = t.opened;
    const ctx = systemCtx(silentLogger, { tenantId: acme.tenantId });
    const actions = Array.from({ length: 12 }, (_, i) => `test.step${String(i).padStart(2, '0')}`);
    await t.opened.db.transaction(async (tx) => {
      for (const action of actions) await core.audit.record(tx, ctx, { action, target: 'order' });
    });
    const newest = await api(t, 'GET', '/v1/admin/audit-log?limit=12', { token: tok.owner });
    expect(newest.json.entries.map((e: { action: string }) => e.action)).toEqual([...actions].reverse());
    // Paging forward from the first (what `aws audit tail --follow` does) takes the rest in order.
    const first = newest.json.entries.at(-1).id;
    const { entries } = await core.audit.query(systemCtx(silentLogger), { afterId: first, limit: 100 });
    expect(entries.filter((e) => e.target === 'order').map((e) => e.action)).toEqual(actions.slice(1));
  });

  it('updates tenant settings (owner only), storing the group mapping without applying it', async () => {
    const body = { settings: { groupRoleMapping: { 'aad-group-1': 'admin', 'aad-group-2': 'viewer' } } };
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: tok.admin, body })).status).toBe(403);
    const r = await api(t, 'PATCH', '/v1/admin/tenant', { token: tok.owner, body });
    expect(r.status).toBe(200);
    expect(r.json.tenant).toMatchObject({ id: acme.tenantId, slug: 'acme', settings: body.settings });
    const unknown = await api(t, 'PATCH', '/v1/admin/tenant', { token: tok.owner, body: { settings: { groupRoleMapping: { g: 'wizard' } } } });
    expect(unknown.status).toBe(400);
    expect(unknown.json.message).toMatch(/wizard/);
    expect(unknown.json.details.field).toBe('settings.groupRoleMapping');
    expect((await t.opened.db.query(`select settings from tenants where id = $1`, [beta.tenantId])).rows[0].settings).toEqual({});
  });

  describe('audit log query', () => {
    beforeAll(async () => {
      // Entries at known times: 10 tool.execute by mel, 5 by ada, spread over 15 hours; one in beta.
      const base = Date.parse('2026-03-01T00:00:00Z');
      for (let i = 0; i < 15; i++) {
        const who = i < 10 ? acme.ids.mel : acme.ids.ada;
        await t.opened.db.query(
          `insert into audit_log (ts, tenant_id, user_id, actor, action, target, channel, duration_ms) values ($1, $2, $3, $4, 'tool.execute', 'bash', 'web', $5)`,
          [new Date(base + i * 3600_000), acme.tenantId, who, `user:${who}`, i],
        );
      }
      await t.opened.db.query(`insert into audit_log (ts, tenant_id, actor, action, target, channel) values ($1, $2, 'system:cli', 'tool.execute', 'x', 'cli')`, [new Date(base), beta.tenantId]);
    });

    it('filters by action, user and time, newest first, with count', async () => {
      const q = (s: string) => api(t, 'GET', `/v1/admin/audit-log?${s}`, { token: tok.owner });
      const all = await q('action=tool.execute');
      expect(all.json.count).toBe(15);
      expect(all.json.entries.map((e: { durationMs: number }) => e.durationMs)).toEqual([14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      expect(all.json.entries[0]).toEqual({
        id: expect.any(String), ts: '2026-03-01T14:00:00.000Z', tenantId: acme.tenantId, userId: acme.ids.ada, actor: `user:${acme.ids.ada}`,
        action: 'tool.execute', target: 'bash', sessionId: null, channel: 'web', durationMs: 14,
        // The actor by name and email; the target is no person.
        actorPerson: { id: acme.ids.ada, name: 'ada', email: 'ada@acme.example' }, targetPerson: null,
      });
      expect((await q(`action=tool.execute&userId=${acme.ids.ada}`)).json.count).toBe(5);
      const window = await q('action=tool.execute&since=2026-03-01T02:00:00Z&until=2026-03-01T04:00:00Z');
      expect(window.json.entries.map((e: { durationMs: number }) => e.durationMs)).toEqual([4, 3, 2]);
      expect((await q('action=tool.execute&limit=3')).json.count).toBe(3);
    });

    it('applies limit defaults and bounds, and rejects malformed values with 400', async () => {
      const q = (s: string) => api(t, 'GET', `/v1/admin/audit-log?${s}`, { token: tok.owner });
      const def = await q('');
      expect(def.json.count).toBeLessThanOrEqual(50);
      expect(def.json.count).toBeGreaterThan(15);
      for (const bad of ['limit=501', 'limit=0', 'limit=ten', 'since=yesterday', 'until=2026-13-45', 'userId=bob', 'since=2026-03-02&until=2026-03-01']) {
        const r = await q(bad);
        expect(r.status, bad).toBe(400);
        expect(r.json.error).toBe('validation_failed');
      }
      expect((await q('limit=500')).status).toBe(200);
    });

    it('names people by name and email (of the entry\'s own tenant only) and filters by a person\'s email, handle or name', async () => {
      const q = (s: string, token = tok.owner) => api(t, 'GET', `/v1/admin/audit-log?${s}`, { token });
      // An entry about mel (the target), and one in beta that names an acme person: never named there.
      await t.opened.db.query(`insert into audit_log (tenant_id, user_id, actor, action, target, channel) values ($1, $2, $3, 'role.assign', $4, 'web')`, [acme.tenantId, acme.ids.ada, `user:${acme.ids.ada}`, `user:${acme.ids.mel}`]);
      await t.opened.db.query(`insert into audit_log (tenant_id, actor, action, target, channel) values ($1, $2, 'probe.names', $3, 'web')`, [beta.tenantId, `user:${acme.ids.mel}`, `user:${acme.ids.ada}`]);
      const assign = (await q('action=role.assign')).json.entries.find((e: { target: string }) => e.target === `user:${acme.ids.mel}`);
      expect([assign.actorPerson, assign.targetPerson]).toEqual([{ id: acme.ids.ada, name: 'ada', email: 'ada@acme.example' }, { id: acme.ids.mel, name: 'mel', email: 'mel@acme.example' }]);
      const probe = (await q('action=probe.names', tok.betaOwner)).json.entries;
      expect(probe.map((e: { actorPerson: unknown; targetPerson: unknown }) => [e.actorPerson, e.targetPerson])).toEqual([[null, null]]);

      // By email (any case), handle or display name: entries by the person or about them.
      const byId = (await q(`user=${acme.ids.mel}&limit=500`)).json.entries.length;
      expect(byId).toBeGreaterThanOrEqual(11);
      for (const who of ['MEL@acme.example', 'mel', acme.ids.mel]) {
        const r = await q(`user=${encodeURIComponent(who)}&limit=500`);
        expect(r.status, who).toBe(200);
        expect(r.json.entries.length, who).toBe(byId);
        expect(r.json.entries.every((e: { userId: string; target: string }) => e.userId === acme.ids.mel || e.target === `user:${acme.ids.mel}`), who).toBe(true);
      }
      await t.opened.db.query(`update users set display_name = 'Mel Member' where id = $1`, [acme.ids.mel]);
      expect((await q(`user=${encodeURIComponent('mel member')}&limit=500`)).json.entries.length).toBe(byId);
      // A part of a name is not the name; a person of another tenant is no one here: 400 naming `user`.
      for (const who of ['Member', 'bea@beta.example', beta.ids.bea]) {
        const r = await q(`user=${encodeURIComponent(who)}`);
        expect([r.status, r.json.details?.field], who).toEqual([400, 'user']);
      }
      await t.opened.db.query(`update users set display_name = 'mel' where id = $1`, [acme.ids.mel]);
    });
  });

  describe('usage digest', () => {
    beforeAll(async () => {
      const { usage } = t.opened.core;
      const now = Date.now();
      const rec = (userId: string, model: string, input: number, output: number, cost: number, hoursAgo: number) =>
        usage.record(t.opened.db, {
          tenantId: acme.tenantId, userId, sessionId: null, model, provider: 'openai',
          tokens: { input, output, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: cost, channel: 'web', at: new Date(now - hoursAgo * 3600_000),
        });
      await rec(acme.ids.mel, 'gpt-4o', 1000, 500, 0.0125, 1);
      await rec(acme.ids.mel, 'gpt-4o-mini', 200, 100, 0.0003, 2);
      await rec(acme.ids.ada, 'gpt-4o', 3000, 1000, 0.04, 3);
      await rec(acme.ids.ada, 'gpt-4o', 9000, 1000, 0.1, 72); // outside 24h, inside 7d
      await usage.record(t.opened.db, { tenantId: beta.tenantId, userId: beta.ids.bea, sessionId: null, model: 'gpt-4o', provider: 'openai', tokens: { input: 5, output: 5, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: 1, channel: 'web' });
    });

    it('sums the tenant\'s tokens and cost by model and user over the window', async () => {
      const day = await api(t, 'GET', '/v1/admin/usage', { token: tok.owner });
      expect(day.status).toBe(200);
      expect(day.json).toMatchObject({
        totalTokens: 5800,
        totalCostUsd: 0.0528,
        byModel: { 'gpt-4o': { tokens: 5500, cost: 0.0525 }, 'gpt-4o-mini': { tokens: 300, cost: 0.0003 } },
        byUser: { [acme.ids.mel]: { tokens: 1800, cost: 0.0128 }, [acme.ids.ada]: { tokens: 4000, cost: 0.04 } },
        window: { since: '24h' },
      });
      // Tokens by kind beside SPEC.md's totals; records that report no cache tokens read as none.
      expect(day.json).toMatchObject({ inputTokens: 4200, outputTokens: 1600, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
      expect(day.json.byModel['gpt-4o']).toEqual({ tokens: 5500, cost: 0.0525, inputTokens: 4000, outputTokens: 1500, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
      const week = await api(t, 'GET', '/v1/admin/usage?since=7d', { token: tok.owner });
      expect(week.json.totalTokens).toBe(15800);
      for (const bad of ['24', '7x', '-1d', 'forever', '400d']) expect((await api(t, 'GET', `/v1/admin/usage?since=${bad}`, { token: tok.owner })).status, bad).toBe(400);
    });

    it('gives the same window over time: hourly up to 48 hours, daily beyond, this tenant only', async () => {
      const day = await api(t, 'GET', '/v1/admin/usage/series', { token: tok.owner });
      expect(day.status).toBe(200);
      expect(day.json.bucket).toBe('hour');
      const hours = day.json.points as Array<{ at: string; model: string; userId: string; tokens: number; cost: number }>;
      // One point per hour, model and user that saw use, oldest first, on the hour.
      expect(hours.map((p) => [p.model, p.userId, p.tokens, p.cost])).toEqual([
        ['gpt-4o', acme.ids.ada, 4000, 0.04],
        ['gpt-4o-mini', acme.ids.mel, 300, 0.0003],
        ['gpt-4o', acme.ids.mel, 1500, 0.0125],
      ]);
      expect(hours.every((p) => new Date(p.at).getUTCMinutes() === 0 && new Date(p.at).getUTCSeconds() === 0)).toBe(true);
      expect(hours.map((p) => p.at)).toEqual([...hours.map((p) => p.at)].sort());
      expect(hours.reduce((n, p) => n + p.tokens, 0)).toBe(5800); // what the digest says for the window

      const week = await api(t, 'GET', '/v1/admin/usage/series?since=7d', { token: tok.owner });
      expect(week.json.bucket).toBe('day');
      expect(week.json.points.reduce((n: number, p: { tokens: number }) => n + p.tokens, 0)).toBe(15800);
      expect(week.json.points.every((p: { at: string }) => p.at.endsWith('T00:00:00.000Z'))).toBe(true);
      expect((await api(t, 'GET', '/v1/admin/usage/series?since=forever', { token: tok.owner })).json).toMatchObject({ error: 'validation_failed', details: { field: 'since' } });
      expect((await api(t, 'GET', '/v1/admin/usage/series', { token: tok.member })).status).toBe(403);
    });
  });
});
