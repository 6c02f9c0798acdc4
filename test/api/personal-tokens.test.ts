import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { buildApp, type App } from '../../src/http/build-app.js';
import { api, freePort, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Personal access tokens: created by a signed-in person (or the operator), stored as a
 * hash, scoped, checked against the person's roles on every call, revoked at once, summarised in the audit log.
 */
describe(`personal access tokens (${DB_MODE})`, () => {
  let t: TestApp;
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs) };
  let acme: { tenantId: string; ids: Record<string, string> };
  let beta: { tenantId: string; ids: Record<string, string> };
  const jwt: Record<string, string> = {};
  const values: string[] = [];
  const create = async (token: string, body: { name: string; scopes: string[]; expiresInDays: number }) => {
    const r = await api(t, 'POST', '/v1/me/tokens', { token, body });
    if (r.status === 201) values.push(r.json.value);
    return r;
  };
  const made = async (token: string, scopes: string[], name = scopes.join('+')) => {
    const r = await create(token, { name, scopes, expiresInDays: 30 });
    expect(r.status, r.text).toBe(201);
    return { id: r.json.token.id as string, value: r.json.value as string };
  };

  beforeAll(async () => {
    t = await startTestApp({ clock });
    acme = await seedTenant(t, 'acme', [
      { handle: 'ada', roles: ['admin'] },
      { handle: 'mel', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
    ]);
    beta = await seedTenant(t, 'beta');
    jwt.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    jwt.ada = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    jwt.mel = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
    jwt.vic = await signToken(t, { sub: acme.ids.vic, tid: acme.tenantId, roles: ['viewer'] });
    jwt.betaOwner = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(() => t?.close());

  it('is created with the scopes the person holds and a lifetime within the tenant maximum; its value is shown once', async () => {
    const r = await create(jwt.mel, { name: 'nightly', scopes: ['read', 'sessions'], expiresInDays: 30 });
    expect(r.status).toBe(201);
    expect(r.json.value).toMatch(/^agentws_pat_[A-Za-z0-9_-]{43}$/);
    expect(r.json.token).toMatchObject({ name: 'nightly', scopes: ['read', 'sessions'], status: 'active', user: { id: acme.ids.mel }, createdBy: `user:${acme.ids.mel}`, lastUsedAt: null });
    expect(r.json.value.startsWith(r.json.token.prefix)).toBe(true);
    const days = (Date.parse(r.json.token.expiresAt) - Date.parse(r.json.token.createdAt)) / 86_400_000;
    expect(days).toBeCloseTo(30, 3);
    // Only the hash is stored.
    const { rows } = await t.opened.db.query<{ token_hash: string }>(`select token_hash from personal_tokens where id = $1`, [r.json.token.id]);
    expect(rows[0].token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rows)).not.toContain(r.json.value);

    // A member does not hold admin: refused, naming the field and the scope.
    const over = await create(jwt.mel, { name: 'x', scopes: ['admin'], expiresInDays: 1 });
    expect(over.status).toBe(403);
    expect(over.json.message).toMatch(/^scopes: .*admin/);
    // A viewer holds memories (read) but no agents permission.
    expect((await create(jwt.vic, { name: 'x', scopes: ['sessions'], expiresInDays: 1 })).status).toBe(403);
    expect((await create(jwt.mel, { name: 'x', scopes: ['everything'], expiresInDays: 1 })).status).toBe(400);

    // Lifetime: 90 days unless the tenant says otherwise (at most 366).
    const long = await create(jwt.mel, { name: 'x', scopes: ['read'], expiresInDays: 91 });
    expect(long.status).toBe(400);
    expect(long.json.message).toMatch(/^expiresInDays: .*at most 90 days/);
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: jwt.owner, body: { settings: { tokens: { maxDays: 400 } } } })).status).toBe(400);
    const set = await api(t, 'PATCH', '/v1/admin/tenant', { token: jwt.owner, body: { settings: { tokens: { maxDays: 120 } } } });
    expect(set.status).toBe(200);
    expect(set.json.tenant.settings.tokens).toEqual({ maxDays: 120 });
    expect((await create(jwt.mel, { name: 'longer', scopes: ['read'], expiresInDays: 120 })).status).toBe(201);
    const limits = await api(t, 'GET', '/v1/me/tokens', { token: jwt.mel });
    expect(limits.json.maxDays).toBe(120);
    expect(limits.json.scopes).toEqual([
      { scope: 'read', held: true },
      { scope: 'sessions', held: true },
      { scope: 'memories', held: true },
      { scope: 'admin', held: false },
    ]);
  });

  it('enforces its scopes: read-only refuses writes, each scope reaches only its permissions', async () => {
    const read = await made(jwt.owner, ['read']);
    const sessions = await made(jwt.owner, ['sessions']);
    const memories = await made(jwt.owner, ['memories']);
    const admin = await made(jwt.owner, ['admin']);

    // read: any GET the person may make, no write at all.
    expect((await api(t, 'GET', '/v1/admin/users', { token: read.value })).status).toBe(200);
    const me = await api(t, 'GET', '/v1/auth/me', { token: read.value });
    expect(me.json.user.id).toBe(acme.ids.owner);
    const write = await api(t, 'POST', '/v1/sessions', { token: read.value, body: { title: 'nope' } });
    expect(write.status).toBe(403);
    expect(write.json.error).toBe('token_scope');
    expect(write.json.message).toContain('read scope');
    expect((await api(t, 'DELETE', `/v1/me/tokens/${sessions.id}`, { token: read.value })).status).toBe(403);

    // sessions: sessions yes; memories and admin no.
    const s = await api(t, 'POST', '/v1/sessions', { token: sessions.value, body: { title: 'from a script' } });
    expect(s.status).toBe(201);
    const m = await api(t, 'POST', '/v1/memories', { token: sessions.value, body: { kind: 'fact', content: 'scripts write memories' } });
    expect(m.status).toBe(403);
    expect(m.json.message).toContain('memory.write');
    expect((await api(t, 'GET', '/v1/admin/users', { token: sessions.value })).status).toBe(403);

    // memories: memories yes; sessions no, including the changes no permission guards.
    expect((await api(t, 'POST', '/v1/memories', { token: memories.value, body: { kind: 'fact', content: 'scripts write memories' } })).status).toBe(201);
    expect((await api(t, 'POST', '/v1/sessions', { token: memories.value, body: { title: 'nope' } })).status).toBe(403);
    const del = await api(t, 'DELETE', `/v1/sessions/${s.json.sessionId}`, { token: memories.value });
    expect(del.status).toBe(403);
    expect(del.json.message).toContain('sessions scope');

    // admin: administration yes, memories no.
    expect((await api(t, 'GET', '/v1/admin/users', { token: admin.value })).status).toBe(200);
    expect((await api(t, 'POST', '/v1/memories', { token: admin.value, body: { kind: 'fact', content: 'x' } })).status).toBe(403);

    // With the sessions scope, deleting the session works.
    expect((await api(t, 'DELETE', `/v1/sessions/${s.json.sessionId}`, { token: sessions.value })).status).toBe(204);
  });

  it('cannot create tokens (a leaked token must not mint longer-lived ones)', async () => {
    const all = await made(jwt.owner, ['read', 'sessions', 'memories', 'admin']);
    const r = await api(t, 'POST', '/v1/me/tokens', { token: all.value, body: { name: 'child', scopes: ['read'], expiresInDays: 1 } });
    expect(r.status).toBe(403);
    expect(r.json.error).toBe('token_cannot_create_tokens');
  });

  it('an expired, revoked or unknown token, or one whose user is gone, is 401 invalid token', async () => {
    const invalid = { error: 'invalid token' };
    const tok = await made(jwt.mel, ['read']);
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.value })).status).toBe(200);
    await t.opened.db.query(`update personal_tokens set expires_at = now() - interval '1 second' where id = $1`, [tok.id]);
    const expired = await api(t, 'GET', '/v1/sessions', { token: tok.value });
    expect(expired.status).toBe(401);
    expect(expired.json).toEqual(invalid);
    expect((await api(t, 'GET', '/v1/me/tokens', { token: jwt.mel })).json.tokens.find((x: { id: string }) => x.id === tok.id).status).toBe('expired');

    const live = await made(jwt.mel, ['read']);
    expect((await api(t, 'GET', '/v1/sessions', { token: live.value })).status).toBe(200);
    const revoked = await api(t, 'DELETE', `/v1/me/tokens/${live.id}`, { token: jwt.mel });
    expect(revoked.status).toBe(200);
    expect(revoked.json.token).toMatchObject({ status: 'revoked', revokedBy: `user:${acme.ids.mel}` });
    const after = await api(t, 'GET', '/v1/sessions', { token: live.value });
    expect(after.status).toBe(401);
    expect(after.json).toEqual(invalid);

    // Someone else's token: 404, untouched.
    const other = await made(jwt.ada, ['read']);
    expect((await api(t, 'DELETE', `/v1/me/tokens/${other.id}`, { token: jwt.mel })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/sessions', { token: other.value })).status).toBe(200);

    expect((await api(t, 'GET', '/v1/sessions', { token: 'agentws_pat_' + 'A'.repeat(43) })).json).toEqual(invalid);

    const { rows } = await t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'gus', 'gus@acme.example', 'Gus') returning id`, [acme.tenantId]);
    await t.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [acme.tenantId, rows[0].id]);
    const gusJwt = await signToken(t, { sub: rows[0].id, tid: acme.tenantId, roles: ['member'] });
    const gus = await made(gusJwt, ['read']);
    expect((await api(t, 'DELETE', `/v1/admin/users/${rows[0].id}`, { token: jwt.owner })).status).toBe(204);
    const gone = await api(t, 'GET', '/v1/sessions', { token: gus.value });
    expect(gone.status).toBe(401);
    expect(gone.json).toEqual(invalid);
  });

  it("demoting the person narrows their tokens at once", async () => {
    const { rows } = await t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'dee', 'dee@acme.example', 'Dee') returning id`, [acme.tenantId]);
    const dee = rows[0].id;
    const roles = (await api(t, 'GET', '/v1/admin/roles', { token: jwt.owner })).json.roles as Array<{ id: string; name: string }>;
    const adminRole = roles.find((r) => r.name === 'admin')!.id;
    expect((await api(t, 'POST', `/v1/admin/users/${dee}/roles`, { token: jwt.owner, body: { roleId: adminRole } })).status).toBeLessThan(300);
    const deeJwt = await signToken(t, { sub: dee, tid: acme.tenantId, roles: ['admin'] });
    const tok = await made(deeJwt, ['read', 'admin']);
    expect((await api(t, 'GET', '/v1/admin/users', { token: tok.value })).status).toBe(200);
    expect((await api(t, 'DELETE', `/v1/admin/users/${dee}/roles/${adminRole}`, { token: jwt.owner })).status).toBeLessThan(300);
    const after = await api(t, 'GET', '/v1/admin/users', { token: tok.value });
    expect(after.status).toBe(403);
    expect(after.json.message).toContain('admin.manage_users');
  });

  it('admins list and revoke any token of their tenant; never another tenant\'s; no value in lists or the audit log', async () => {
    const mine = await made(jwt.mel, ['read', 'memories'], 'to be revoked by an admin');
    const list = await api(t, 'GET', `/v1/admin/tokens?userId=${acme.ids.mel}`, { token: jwt.ada });
    expect(list.status).toBe(200);
    expect(list.json.tokens.length).toBeGreaterThan(1);
    expect(list.json.tokens.every((x: { user: { id: string } }) => x.user.id === acme.ids.mel)).toBe(true);
    expect((await api(t, 'GET', '/v1/admin/tokens', { token: jwt.owner })).json.tokens.some((x: { user: { id: string } }) => x.user.id === acme.ids.ada)).toBe(true);
    expect((await api(t, 'GET', '/v1/admin/tokens', { token: jwt.mel })).status).toBe(403);
    expect((await api(t, 'GET', '/v1/admin/tokens', { token: jwt.betaOwner })).json.tokens).toEqual([]);
    expect((await api(t, 'DELETE', `/v1/admin/tokens/${mine.id}`, { token: jwt.betaOwner })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/sessions', { token: mine.value })).status).toBe(200);
    const revoked = await api(t, 'DELETE', `/v1/admin/tokens/${mine.id}`, { token: jwt.ada });
    expect(revoked.json.token).toMatchObject({ status: 'revoked', revokedBy: `user:${acme.ids.ada}` });
    expect((await api(t, 'GET', '/v1/sessions', { token: mine.value })).status).toBe(401);

    const audit = await api(t, 'GET', '/v1/admin/audit-log?limit=500', { token: jwt.owner });
    const actions = audit.json.entries.map((e: { action: string }) => e.action);
    expect(actions).toContain('token.create');
    expect(actions).toContain('token.revoke');
    expect(audit.json.entries.find((e: { action: string; target: string }) => e.action === 'token.revoke' && e.target === `token:${mine.id}`)).toMatchObject({ actor: `user:${acme.ids.ada}` });
    const everything = [
      audit.text,
      (await api(t, 'GET', '/v1/admin/tokens', { token: jwt.owner })).text,
      (await api(t, 'GET', '/v1/me/tokens', { token: jwt.mel })).text,
      JSON.stringify((await t.opened.db.query(`select * from audit_log`)).rows),
    ].join('\n');
    expect(values.length).toBeGreaterThan(10);
    for (const v of values) expect(everything).not.toContain(v);
  });

  it('last use is written at most once a minute; use is audited once per token and hour with its count', async () => {
    const ctx = systemCtx(silentLogger, { tenantId: acme.tenantId });
    const { token, value } = await t.opened.core.personalTokens.create(ctx, { userId: acme.ids.mel, name: 'cron', scopes: ['read'], expiresInDays: 10 });
    const lastUsed = async () => (await t.opened.db.query<{ last_used_at: Date | null }>(`select last_used_at from personal_tokens where id = $1`, [token.id])).rows[0].last_used_at;
    try {
      // Ten minutes into an hour, so the next requests stay in it.
      const now = Date.now();
      offsetMs = Math.floor(now / 3_600_000) * 3_600_000 + 10 * 60_000 - now;
      for (let i = 0; i < 5; i++) expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(200);
      const first = await lastUsed();
      expect(first).not.toBeNull();
      offsetMs += 30_000;
      expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(200);
      expect((await lastUsed())!.getTime()).toBe(first!.getTime());
      expect((await api(t, 'GET', '/v1/me/tokens', { token: jwt.mel })).json.tokens.find((x: { id: string }) => x.id === token.id).lastUsedAt).toBe(first!.toISOString());
      const uses = async () => (await t.opened.db.query<{ details: { hour: string; requests: number } }>(`select details from audit_log where action = 'token.use' and target = $1`, [`token:${token.id}`])).rows;
      expect(await uses()).toEqual([]);
      // The next hour: the first request there writes the earlier hour's summary.
      offsetMs += 60 * 60_000;
      expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(200);
      expect((await lastUsed())!.getTime()).toBeGreaterThan(first!.getTime());
      const rows = await uses();
      expect(rows).toHaveLength(1);
      expect(rows[0].details).toMatchObject({ hour: new Date(Math.floor(first!.getTime() / 3_600_000) * 3_600_000).toISOString(), requests: 6 });
    } finally {
      offsetMs = 0;
    }
  });

  it.runIf(DB_MODE === 'postgres')('a revocation holds at once on another serve sharing the database', async () => {
    const config = t.env.config();
    let b: { opened: OpenedCore; app: App; url: string } | null = null;
    try {
      const opened = await openCore(config, silentLogger);
      const app = await buildApp(opened.core, config);
      const port = await freePort();
      await app.listen({ host: '127.0.0.1', port });
      b = { opened, app, url: `http://127.0.0.1:${port}` };
      const tok = await made(jwt.mel, ['read']);
      const onB = () => fetch(`${b!.url}/v1/sessions`, { headers: { authorization: `Bearer ${tok.value}` } });
      expect((await onB()).status).toBe(200);
      expect((await api(t, 'DELETE', `/v1/me/tokens/${tok.id}`, { token: jwt.mel })).status).toBe(200);
      const r = await onB();
      expect(r.status).toBe(401);
      expect(await r.json()).toEqual({ error: 'invalid token' });
    } finally {
      if (b) {
        await b.app.close();
        await b.opened.close();
      }
    }
  });
});
