import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { api, captureLogs, seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * One-time sign-in links (the first hour in a container): made by the operator for an owner or admin,
 * used once from the dashboard's page (POST /v1/auth/link), the same sign-in and cookies as the identity
 * provider's, refused when used, expired, for a deactivated, removed or demoted person, or forged; never
 * in the log or the audit log. Both databases: single use rests on one UPDATE racing with another.
 */
describe(`sign-in links (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: { tenantId: string; ids: Record<string, string> };
  const logs = captureLogs('debug');
  // The dashboard's own request: its origin and the CSRF header.
  const use = (token: unknown, headers: Record<string, string> = { origin: t.url, 'x-agentws-csrf': '1' }) => api(t, 'POST', '/v1/auth/link', { body: { token }, headers });
  const make = (userId: string, minutes?: number) =>
    t.opened.core.auth.createSignInLink(systemCtx(silentLogger, { tenantId: acme.tenantId }), { userId, minutes, command: 'user sign-in-link' });
  const tokenOf = (url: string) => url.split('#/sign-in-link/')[1];
  const audit = async (action: string) =>
    (await t.opened.db.query<{ actor: string; target: string; channel: string; details: Record<string, any> }>(`select actor, target, channel, details from audit_log where tenant_id = $1 and action = $2 order by ts`, [acme.tenantId, action])).rows;

  beforeAll(async () => {
    // Every request in the access log, every level: a link's token must be in none of it.
    t = await startTestApp({ logger: logs.logger, vars: { AGENTWS_ACCESS_LOG: 'all', AGENTWS_LOG_LEVEL: 'debug' } });
    acme = await seedTenant(t, 'acme', [
      { handle: 'ada', roles: ['admin'] },
      { handle: 'mel', roles: ['member'] },
      { handle: 'dee', roles: ['admin'] },
      { handle: 'rex', roles: ['admin'] },
      { handle: 'dem', roles: ['admin'] },
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  const tokens: string[] = [];

  it('signs an owner in once with the same cookies as the identity provider, audited without the token', async () => {
    const { url, link } = await make(acme.ids.owner);
    expect(url).toMatch(new RegExp(`^${t.url}/#/sign-in-link/agentws_link_[A-Za-z0-9_-]{43}$`));
    expect(link.expiresAt.getTime() - Date.now()).toBeGreaterThan(9.9 * 60_000);
    expect(link.expiresAt.getTime() - Date.now()).toBeLessThanOrEqual(10 * 60_000);
    const token = tokenOf(url);
    tokens.push(token);
    const stored = await t.opened.db.query(`select * from auth_sign_in_links where id = $1`, [link.id]);
    expect(JSON.stringify(stored.rows)).not.toContain(token);

    const res = await use(token);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ user: { id: acme.ids.owner, handle: expect.any(String), email: 'owner@acme.example', displayName: expect.any(String), tenantId: acme.tenantId }, roles: ['owner'] });
    expect(res.headers.get('cache-control')).toBe('no-store');
    const cookies = res.headers.getSetCookie();
    // What /v1/auth/callback sets (docs/admin/identity.md, "Sign-in"), attribute for attribute.
    expect(cookies.map((c) => c.replace(/=[^;]*/, '=…'))).toEqual([
      'agentws_access=…; Max-Age=900; Path=/; HttpOnly; SameSite=Lax',
      'agentws_refresh=…; Max-Age=604800; Path=/v1/auth; HttpOnly; SameSite=Lax',
    ]);
    const value = (name: string) => decodeURIComponent(cookies.find((c) => c.startsWith(`${name}=`))!.split(';')[0].slice(name.length + 1));
    const claims = decodeJwt(value('agentws_access'));
    expect(claims).toMatchObject({ sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'], typ: 'access', sid: expect.any(String) });

    // The cookie signs the browser in; it refreshes and signs out as any sign-in's does.
    const me = await api(t, 'GET', '/v1/auth/me', { headers: { cookie: `agentws_access=${value('agentws_access')}` } });
    expect(me.json.user.email).toBe('owner@acme.example');
    const refreshed = await api(t, 'POST', '/v1/auth/refresh', { headers: { cookie: `agentws_refresh=${value('agentws_refresh')}`, 'x-agentws-csrf': '1' } });
    expect(refreshed.status).toBe(200);

    // Once.
    const again = await use(token);
    expect(again.status).toBe(400);
    expect(again.json).toMatchObject({ error: 'sign_in_link_used', message: expect.stringMatching(/already used/), hint: expect.stringMatching(/aws user sign-in-link/) });

    const [created] = await audit('auth.sign_in_link.create');
    expect(created).toMatchObject({ actor: 'system:cli', channel: 'cli', target: `user:${acme.ids.owner}`, details: { linkId: link.id, minutes: 10, command: 'user sign-in-link' } });
    const [signedIn] = await audit('auth.sign_in');
    expect(signedIn).toMatchObject({ actor: `user:${acme.ids.owner}`, channel: 'web', details: { via: 'sign-in-link', linkId: link.id, linkCreatedBy: 'system:cli', signInId: claims.sid, ip: '127.0.0.1' } });
    const denied = await audit('auth.sign_in_denied');
    expect(denied.at(-1)).toMatchObject({ actor: 'anonymous', target: `user:${acme.ids.owner}`, details: { reason: 'sign_in_link_used', linkId: link.id, ip: '127.0.0.1' } });
  });

  it('is made only by the operator, only for owners and admins, for 1 to 60 minutes', async () => {
    const ctx = systemCtx(silentLogger, { tenantId: acme.tenantId });
    const { core } = t.opened;
    await expect(core.auth.createSignInLink(ctx, { userId: acme.ids.mel })).rejects.toMatchObject({ status: 403, code: 'sign_in_link_not_allowed', message: expect.stringMatching(/holds member/) });
    await expect(core.auth.createSignInLink(ctx, { userId: acme.ids.ada, minutes: 61 })).rejects.toMatchObject({ status: 400 });
    await expect(core.auth.createSignInLink(ctx, { userId: acme.ids.ada, minutes: 0 })).rejects.toMatchObject({ status: 400 });
    await expect(core.auth.createSignInLink(ctx, { userId: crypto.randomUUID() })).rejects.toMatchObject({ status: 404 });
    // A signed-in owner (the API, a token) cannot mint one: the service asks for the system actor.
    const owner = { kind: 'user' as const, userId: acme.ids.owner, tenantId: acme.tenantId, roles: ['owner'], permissions: await core.rbac.resolvePermissions(acme.tenantId, ['owner']), via: 'token' as const };
    await expect(core.auth.createSignInLink({ ...ctx, actor: owner }, { userId: acme.ids.owner })).rejects.toMatchObject({ status: 403 });
    const { url } = await make(acme.ids.ada, 1);
    tokens.push(tokenOf(url));
    expect((await use(tokenOf(url))).json.roles).toEqual(['admin']);
  });

  it('is refused once expired, or for a person deactivated, removed or no longer an admin since', async () => {
    const expired = await make(acme.ids.dee);
    await t.opened.db.query(`update auth_sign_in_links set expires_at = now() - interval '1 second' where id = $1`, [expired.link.id]);
    const r1 = await use(tokenOf(expired.url));
    expect(r1.status).toBe(400);
    expect(r1.json).toMatchObject({ error: 'sign_in_link_expired', message: expect.stringMatching(/expired at/) });

    const deactivated = await make(acme.ids.dee);
    await t.opened.db.query(`update users set deactivated_at = now() where id = $1`, [acme.ids.dee]);
    const r2 = await use(tokenOf(deactivated.url));
    expect(r2.status).toBe(403);
    expect(r2.json.error).toBe('user_deactivated');
    expect(r2.headers.getSetCookie()).toEqual([]);
    await expect(make(acme.ids.dee)).rejects.toMatchObject({ code: 'user_deactivated' });

    const removed = await make(acme.ids.rex);
    await t.opened.core.users.removeUser(systemCtx(silentLogger, { tenantId: acme.tenantId }), { userId: acme.ids.rex });
    const r3 = await use(tokenOf(removed.url));
    expect(r3.status).toBe(400);
    expect(r3.json.error).toBe('sign_in_link_invalid');

    const demoted = await make(acme.ids.dem);
    await t.opened.db.query(`update user_roles set role_id = (select id from roles where tenant_id = $1 and name = 'member') where user_id = $2`, [acme.tenantId, acme.ids.dem]);
    const r4 = await use(tokenOf(demoted.url));
    expect(r4.status).toBe(403);
    expect(r4.json.error).toBe('sign_in_link_not_allowed');

    const reasons = (await audit('auth.sign_in_denied')).map((d) => d.details.reason);
    expect(reasons).toEqual(expect.arrayContaining(['sign_in_link_expired', 'user_deactivated', 'sign_in_link_not_allowed']));
    tokens.push(...[expired, deactivated, removed, demoted].map((l) => tokenOf(l.url)));
  });

  it('refuses a forged or made-up request without using the link', async () => {
    const { url } = await make(acme.ids.ada);
    const token = tokenOf(url);
    tokens.push(token);
    // Another site's form or script (login CSRF: signing a victim's browser in as someone else).
    const cross = await use(token, { origin: 'https://evil.example', 'x-agentws-csrf': '1' });
    expect(cross.status).toBe(403);
    expect(cross.json.error).toBe('csrf_failed');
    expect((await use(token, { origin: t.url })).json.error).toBe('csrf_failed');
    expect((await use(token, { 'sec-fetch-site': 'cross-site', 'x-agentws-csrf': '1' })).status).toBe(403);
    // Made up, or cut short: invalid, and the real one still works after.
    expect((await use(`agentws_link_${'A'.repeat(43)}`)).json.error).toBe('sign_in_link_invalid');
    expect((await use(token.slice(0, -1))).json.error).toBe('sign_in_link_invalid');
    expect((await use('')).status).toBe(400);
    expect((await use(token)).status).toBe(200);
    const unknown = await t.opened.db.query<{ details: Record<string, unknown> }>(`select details from audit_log where tenant_id is null and action = 'auth.sign_in_denied'`);
    // These two, and the removed person's link above (it went with them): audited outside any tenant.
    expect(unknown.rows.map((r) => r.details.reason)).toEqual(['sign_in_link_invalid', 'sign_in_link_invalid', 'sign_in_link_invalid']);
  });

  it('is used once when two requests race with it', async () => {
    const { url } = await make(acme.ids.ada);
    tokens.push(tokenOf(url));
    const both = await Promise.all([use(tokenOf(url)), use(tokenOf(url))]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 400]);
  });

  it('is rate-limited like the other sign-in routes, and no token reached the log or the audit log', async () => {
    expect(tokens.length).toBeGreaterThanOrEqual(8);
    const logged = logs.text();
    expect(logged).toContain('/v1/auth/link');
    const entries = JSON.stringify((await t.opened.db.query(`select * from audit_log`)).rows);
    for (const token of tokens) {
      expect(logged).not.toContain(token.slice(13));
      expect(entries).not.toContain(token.slice(13));
    }
    let status = 0;
    for (let i = 0; i < 61 && status !== 429; i++) status = (await use(`junk-${i}`)).status;
    expect(status).toBe(429);
  });
});
