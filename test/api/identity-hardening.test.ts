import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { openCore } from '../../src/cli/open-core.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { buildApp } from '../../src/http/build-app.js';
import { api, seedTenant, signInAs, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { browserSignIn, startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.js';
import { DB_MODE } from '../helpers/test-env.js';

const TID = '5a1e0c3d-0000-4000-8000-0000000000aa';
const DAY_S = 86_400;

/** Our service's time, movable: expiry rules are checked without sleeping for days. */
const clock = { offsetMs: 0, now: () => new Date(Date.now() + clock.offsetMs) };
const nowS = () => Math.floor(clock.now().getTime() / 1000);

describe(`sign-ins end: auth_time, sign-out, removed users (${DB_MODE})`, () => {
  let idp: TestOidcProvider;
  let t: TestApp;
  let tenantId: string;
  let ids: Record<string, string>;

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      vars: async (url) => {
        idp = await startOidcProvider({
          redirectUris: [`${url}/v1/auth/callback`],
          users: [{ sub: 'sub-carol', email: 'carol@end.example', name: 'Carol', tid: TID }],
        });
        return { AGENTWS_OIDC_ISSUER_URL: idp.issuer, AGENTWS_OIDC_CLIENT_ID: idp.clientId, AGENTWS_OIDC_CLIENT_SECRET: idp.clientSecret };
      },
    });
    ({ tenantId, ids } = await seedTenant(t, 'end', [{ handle: 'adm', roles: ['admin'] }, { handle: 'dave', roles: ['member'] }], TID));
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('carries auth_time through every refresh and refuses beyond 7 days of the sign-in', async () => {
    clock.offsetMs = 0;
    const signedIn = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-carol');
    const access = decodeJwt(signedIn.cookies.agentws_access);
    const refresh = decodeJwt(signedIn.cookies.agentws_refresh);
    expect(access.sid).toEqual(expect.any(String));
    expect(refresh).toMatchObject({ sid: access.sid, auth_time: access.auth_time });
    const authTime = access.auth_time as number;

    // A refreshed token belongs to the same sign-in, with the same auth_time, and refreshes again.
    const first = await api(t, 'POST', '/v1/auth/refresh', { body: { token: signedIn.cookies.agentws_access } });
    expect(first.status).toBe(200);
    expect(decodeJwt(first.json.token)).toMatchObject({ sid: access.sid, auth_time: authTime, roles: ['member'] });
    const second = await api(t, 'POST', '/v1/auth/refresh', { body: { token: first.json.token } });
    expect(decodeJwt(second.json.token)).toMatchObject({ sid: access.sid, auth_time: authTime });
    // A browser refreshes with its cookie alone, posting no body, with the CSRF header (a page of another
    // origin cannot add it), and gets the new access token as its cookie too.
    const cookie = `agentws_refresh=${signedIn.cookies.agentws_refresh}`;
    const forged = await api(t, 'POST', '/v1/auth/refresh', { headers: { cookie } });
    expect(forged.status).toBe(403);
    expect(forged.json.error).toBe('csrf_failed');
    const byCookie = await api(t, 'POST', '/v1/auth/refresh', { headers: { cookie, 'x-agentws-csrf': '1' } });
    expect(byCookie.status).toBe(200);
    expect(decodeJwt(byCookie.json.token)).toMatchObject({ sid: access.sid });
    expect(byCookie.headers.get('set-cookie')).toMatch(new RegExp(`^agentws_access=${byCookie.json.token}; Max-Age=900; Path=/; HttpOnly; SameSite=Lax`));

    // Nearly 7 days on, the last link of a chain of refreshes (an access token of that sign-in issued
    // minutes ago) still refreshes, but never past the sign-in's end.
    clock.offsetMs = (7 * DAY_S - 300) * 1000;
    const link = await signToken(t, { sub: access.sub!, tid: access.tid as string, roles: ['member'], sid: access.sid as string, authTimeS: authTime, iatS: nowS() - 60, expS: nowS() + 840 });
    const late = await api(t, 'POST', '/v1/auth/refresh', { body: { token: link } });
    expect(late.status).toBe(200);
    const lateClaims = decodeJwt(late.json.token);
    expect(lateClaims.exp).toBe(authTime + 7 * DAY_S);
    expect(lateClaims.auth_time).toBe(authTime);

    // Past 7 days of the sign-in, nothing refreshes, however fresh the token presented.
    clock.offsetMs = (7 * DAY_S + 60) * 1000;
    const fresh = await signToken(t, { sub: access.sub!, tid: access.tid as string, roles: ['member'], sid: access.sid as string, authTimeS: authTime, iatS: nowS() - 10, expS: nowS() + 890 });
    const refused = await api(t, 'POST', '/v1/auth/refresh', { body: { token: fresh } });
    expect(refused.status).toBe(401);
    expect(refused.json).toEqual({ error: 'invalid token' });
    expect((await api(t, 'GET', '/v1/auth/me', { token: fresh })).status).toBe(401);
    const audit = await t.opened.db.query(`select details->>'reason' as reason from audit_log where action = 'auth.refresh_failed' order by ts desc limit 1`);
    expect(audit.rows[0].reason).toMatch(/7 days/);
    clock.offsetMs = 0;
  });

  it('refuses a refresh of a token that names no recorded sign-in', async () => {
    const legacy = await signToken(t, { sub: ids.dave, tid: tenantId, roles: ['member'], typ: 'refresh', expS: nowS() + DAY_S });
    const r = await api(t, 'POST', '/v1/auth/refresh', { body: { token: legacy } });
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: 'invalid token' });
  });

  it('signs out: every token of that sign-in stops at once, the cookies are cleared, and it is audited', async () => {
    const signedIn = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-carol');
    const { agentws_access: access, agentws_refresh: refresh } = signedIn.cookies;
    const refreshed = (await api(t, 'POST', '/v1/auth/refresh', { body: { token: refresh } })).json.token;
    // Warm the per-process caller cache: sign-out must not wait for it to expire.
    expect((await api(t, 'GET', '/v1/auth/me', { token: access })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/auth/me', { token: refreshed })).status).toBe(200);
    // Another sign-in of the same user is not affected.
    const other = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-carol');

    const out = await api(t, 'POST', '/v1/auth/logout', { headers: { cookie: `agentws_access=${access}; agentws_refresh=${refresh}` } });
    expect(out.status).toBe(200);
    expect(out.json).toEqual({ signedOut: true });
    const cleared = out.headers.getSetCookie();
    expect(cleared).toEqual(expect.arrayContaining([expect.stringMatching(/^agentws_access=; Max-Age=0; Path=\//), expect.stringMatching(/^agentws_refresh=; Max-Age=0; Path=\/v1\/auth/)]));

    for (const token of [access, refreshed]) {
      const me = await api(t, 'GET', '/v1/auth/me', { token });
      expect(me.status, token).toBe(401);
    }
    expect((await api(t, 'POST', '/v1/auth/refresh', { body: { token: refresh } })).json).toEqual({ error: 'invalid token' });
    expect((await api(t, 'GET', '/v1/auth/me', { token: other.cookies.agentws_access })).status).toBe(200);

    const { rows } = await t.opened.db.query(`select actor, details->>'signInId' as sid from audit_log where action = 'auth.sign_out'`);
    expect(rows).toEqual([{ actor: `user:${decodeJwt(access).sub}`, sid: decodeJwt(access).sid }]);
    // Signing out again, or with junk, still answers 200 and clears the cookies: a browser can always sign out.
    const again = await api(t, 'POST', '/v1/auth/logout', { token: access });
    expect(again.json).toEqual({ signedOut: false });
    expect(again.headers.getSetCookie()).toHaveLength(2);
    expect((await api(t, 'POST', '/v1/auth/logout', { body: { token: 'junk' } })).status).toBe(200);
    // A refresh token in the body signs out API clients.
    const api2 = await signInAs(t, { sub: ids.dave, tid: tenantId, roles: ['member'] });
    expect((await api(t, 'POST', '/v1/auth/logout', { body: { token: api2.refresh } })).json).toEqual({ signedOut: true });
    expect((await api(t, 'GET', '/v1/auth/me', { token: api2.access })).status).toBe(401);
  });

  it.runIf(DB_MODE === 'postgres')('a sign-out reaches every serve process at once (LISTEN/NOTIFY), not after its cache expires', async () => {
    // The second process's clock stands still, so its per-process cache (USER_CHECK_TTL_MS) never
    // expires: a 401 there can only come from the notification, however slow a loaded machine is.
    const frozen = new Date(Date.now() + 5000);
    const second = await openCore(t.env.config(), silentLogger, { clock: { now: () => new Date(frozen) } });
    const app2 = await buildApp(second.core, t.env.config());
    const url2 = await app2.listen({ host: '127.0.0.1', port: 0 });
    try {
      const s = await signInAs(t, { sub: ids.dave, tid: tenantId, roles: ['member'] });
      const me2 = () => fetch(`${url2}/v1/auth/me`, { headers: { authorization: `Bearer ${s.access}` } }).then((r) => r.status);
      expect(await me2()).toBe(200);
      expect(await me2()).toBe(200);
      expect((await api(t, 'POST', '/v1/auth/logout', { token: s.access })).json).toEqual({ signedOut: true });
      await expect.poll(me2, { timeout: 10_000, interval: 20 }).toBe(401);
    } finally {
      await app2.close();
      await second.close();
    }
  });

  it('removing a user revokes their tokens at once, even cached ones', async () => {
    const { ids: more } = await seedTenant(t, 'end2', [{ handle: 'erin', roles: ['member'] }, { handle: 'adm2', roles: ['admin'] }]);
    const tid2 = (await t.opened.db.query(`select tenant_id from users where id = $1`, [more.erin])).rows[0].tenant_id;
    const erin = await signInAs(t, { sub: more.erin, tid: tid2, roles: ['member'] });
    const legacy = await signToken(t, { sub: more.erin, tid: tid2, roles: ['member'] });
    expect((await api(t, 'GET', '/v1/auth/me', { token: erin.access })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/auth/me', { token: legacy })).status).toBe(200);

    const admin = await signToken(t, { sub: more.adm2, tid: tid2, roles: ['admin'] });
    const removed = await api(t, 'DELETE', `/v1/admin/users/${more.erin}`, { token: admin });
    expect(removed.status).toBe(204);
    for (const token of [erin.access, legacy]) expect((await api(t, 'GET', '/v1/auth/me', { token })).status).toBe(404);
    expect((await api(t, 'POST', '/v1/auth/refresh', { body: { token: erin.refresh } })).status).toBe(404);
    const audit = await t.opened.db.query(`select actor, target, details->>'email' as email from audit_log where action = 'user.remove'`);
    expect(audit.rows).toEqual([{ actor: `user:${more.adm2}`, target: `user:${more.erin}`, email: 'erin@end2.example' }]);
    expect((await api(t, 'DELETE', `/v1/admin/users/${more.erin}`, { token: admin })).status).toBe(404);
  });

  it('refuses to remove yourself, an owner (unless you are one), the last owner, the operator, and a gateway service user', async () => {
    const admin = await signToken(t, { sub: ids.adm, tid: tenantId, roles: ['admin'] });
    const owner = await signToken(t, { sub: ids.owner, tid: tenantId, roles: ['owner'] });
    expect((await api(t, 'DELETE', `/v1/admin/users/${ids.adm}`, { token: admin })).status).toBe(409);
    const byAdmin = await api(t, 'DELETE', `/v1/admin/users/${ids.owner}`, { token: admin });
    expect(byAdmin.status).toBe(403);
    expect(byAdmin.json.message).toMatch(/only an owner/);
    // The operator (CLI) holds every permission, but the tenant keeps its last owner.
    const cli = { ...systemCtx(silentLogger), tenantId };
    await expect(t.opened.core.users.removeUser(cli, { userId: ids.owner })).rejects.toThrow(/last owner/);
    const gw = await api(t, 'POST', '/v1/gateways', { token: owner, body: { kind: 'bot_chat', botToken: '123:abc', botUsername: 'end_bot', botId: '123' } });
    expect(gw.status).toBe(201);
    const { rows } = await t.opened.db.query(`select service_user_id as id from gateways where id = $1`, [gw.json.id]);
    const svc = await api(t, 'DELETE', `/v1/admin/users/${rows[0].id}`, { token: owner });
    expect(svc.status).toBe(409);
    expect(svc.json.hint).toMatch(/gateway delete/);
    // Members cannot remove anyone; another tenant's user is unknown here.
    const member = await signToken(t, { sub: ids.dave, tid: tenantId, roles: ['member'] });
    expect((await api(t, 'DELETE', `/v1/admin/users/${ids.adm}`, { token: member })).status).toBe(403);
    expect((await api(t, 'DELETE', `/v1/admin/users/${crypto.randomUUID()}`, { token: owner })).status).toBe(404);
    const stillThere = await t.opened.db.query(`select count(*)::int as n from users where id = any($1)`, [[ids.adm, ids.owner, rows[0].id]]);
    expect(stillThere.rows[0].n).toBe(3);
  });
});

describe(`nobody grants what they do not hold (${DB_MODE})`, () => {
  let t: TestApp;
  let tenantId: string;
  let ids: Record<string, string>;
  let roleId: (name: string) => Promise<string>;

  beforeAll(async () => {
    t = await startTestApp();
    ({ tenantId, ids } = await seedTenant(t, 'esc', [{ handle: 'adm', roles: ['admin'] }, { handle: 'mem', roles: ['member'] }, { handle: 'rm', roles: [] }]));
    roleId = async (name) => (await t.opened.db.query(`select id from roles where tenant_id = $1 and name = $2`, [tenantId, name])).rows[0].id;
  });
  afterAll(async () => t?.close());

  it('an admin cannot make itself owner, create a role with manage_tenant, or take the owner role away', async () => {
    const admin = await signToken(t, { sub: ids.adm, tid: tenantId, roles: ['admin'] });
    const self = await api(t, 'POST', `/v1/admin/users/${ids.adm}/roles`, { token: admin, body: { roleId: await roleId('owner') } });
    expect(self.status).toBe(403);
    expect(self.json).toMatchObject({ error: 'forbidden', message: expect.stringMatching(/owner/) });
    const created = await api(t, 'POST', '/v1/admin/roles', { token: admin, body: { name: 'tenant-admin', permissions: { admin: { manage_tenant: true } } } });
    expect(created.status).toBe(403);
    expect(created.json.details).toEqual({ permission: 'admin.manage_tenant', exceeds: ['admin.manage_tenant'] });
    const revoke = await api(t, 'DELETE', `/v1/admin/users/${ids.owner}/roles/${await roleId('owner')}`, { token: admin });
    expect(revoke.status).toBe(403);

    const roles = await t.opened.db.query(`select r.name from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = any($1) order by r.name`, [[ids.adm, ids.owner]]);
    expect(roles.rows.map((r) => r.name)).toEqual(['admin', 'owner']);
    expect((await t.opened.db.query(`select count(*)::int as n from roles where name = 'tenant-admin'`)).rows[0].n).toBe(0);
    // Within what it holds, an admin still manages roles.
    expect((await api(t, 'POST', `/v1/admin/users/${ids.mem}/roles`, { token: admin, body: { roleId: await roleId('admin') } })).status).toBe(200);
    expect((await api(t, 'POST', '/v1/admin/roles', { token: admin, body: { name: 'auditor', permissions: { admin: { view_audit_log: true } } } })).status).toBe(201);
  });

  it('a role manager without other rights cannot grant them, to itself or anyone', async () => {
    const owner = await signToken(t, { sub: ids.owner, tid: tenantId, roles: ['owner'] });
    const made = await api(t, 'POST', '/v1/admin/roles', { token: owner, body: { name: 'role-manager', permissions: { admin: { manage_roles: true }, cost: { monthly_limit_usd: 5 } } } });
    expect(made.status).toBe(201);
    await api(t, 'POST', `/v1/admin/users/${ids.rm}/roles`, { token: owner, body: { roleId: made.json.role.id } });
    const rm = await signToken(t, { sub: ids.rm, tid: tenantId, roles: ['role-manager'] });
    const toSelf = await api(t, 'POST', `/v1/admin/users/${ids.rm}/roles`, { token: rm, body: { roleId: await roleId('member') } });
    expect(toSelf.status).toBe(403);
    expect(toSelf.json.details.exceeds).toEqual(expect.arrayContaining(['agents.create', 'cost.monthly_limit_usd']));
    const looser = await api(t, 'POST', '/v1/admin/roles', { token: rm, body: { name: 'looser', permissions: { admin: { manage_roles: true }, cost: { monthly_limit_usd: 50 } } } });
    expect(looser.status).toBe(403);
    expect(looser.json.details.exceeds).toEqual(['cost.monthly_limit_usd']);
    expect((await api(t, 'POST', '/v1/admin/roles', { token: rm, body: { name: 'stricter', permissions: { admin: { manage_roles: true }, cost: { monthly_limit_usd: 1 } } } })).status).toBe(201);
  });

  it('owners grant and revoke owner; the tenant keeps at least one owner', async () => {
    const owner = await signToken(t, { sub: ids.owner, tid: tenantId, roles: ['owner'] });
    const ownerRole = await roleId('owner');
    expect((await api(t, 'DELETE', `/v1/admin/users/${ids.owner}/roles/${ownerRole}`, { token: owner })).status).toBe(409);
    expect((await api(t, 'POST', `/v1/admin/users/${ids.adm}/roles`, { token: owner, body: { roleId: ownerRole } })).status).toBe(200);
    expect((await api(t, 'DELETE', `/v1/admin/users/${ids.adm}/roles/${ownerRole}`, { token: owner })).status).toBe(200);
  });
});

describe(`the operator: API key and demo mode (${DB_MODE})`, () => {
  let t: TestApp;
  let ops: { tenantId: string; ids: Record<string, string> };

  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'owner@ops.example' } });
    ops = await seedTenant(t, 'ops');
    // Another tenant has a user with the operator's email, created earlier: it must never be taken for the operator.
    const evil = await seedTenant(t, 'evil', [{ handle: 'imposter', roles: ['owner'] }]);
    await t.opened.db.query(`update users set email = 'OWNER@ops.example', created_at = '2000-01-01' where id = $1`, [evil.ids.imposter]);
  });
  afterAll(async () => t?.close());

  it('finds the operator in the operator\'s tenant only', async () => {
    const anon = await api(t, 'GET', '/v1/auth/me');
    expect(anon.status).toBe(200);
    expect(anon.json.user).toMatchObject({ id: ops.ids.owner, tenantId: ops.tenantId });
    const withKey = await api(t, 'GET', '/v1/auth/me', { token: t.env.vars.AGENTWS_API_KEY });
    expect(withKey.json.user.id).toBe(ops.ids.owner);
  });

  it('the service API key acts as the operator with the owner role, whatever roles the operator user holds', async () => {
    const key = t.env.vars.AGENTWS_API_KEY;
    await t.opened.db.query(`delete from user_roles where user_id = $1`, [ops.ids.owner]);
    await t.opened.db.query(
      `insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'viewer'`,
      [ops.tenantId, ops.ids.owner],
    );
    const me = await api(t, 'GET', '/v1/auth/me', { token: key });
    expect(me.json.roles).toEqual(['owner']);
    expect((await api(t, 'GET', '/v1/admin/roles', { token: key })).status).toBe(200);
    // Demo mode (local only) has the operator user's current roles.
    expect((await api(t, 'GET', '/v1/auth/me')).json.roles).toEqual(['viewer']);
    expect((await api(t, 'GET', '/v1/admin/roles')).status).toBe(403);
  });
});
