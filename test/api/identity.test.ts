import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { api, seedTenant, signInAs, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { browserSignIn, startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.js';
import { DB_MODE } from '../helpers/test-env.js';

const TID = '72f988bf-0000-4000-8000-000000000001';
const OTHER_TID = '72f988bf-0000-4000-8000-000000000002';

describe(`sign-in and tokens (${DB_MODE})`, () => {
  let idp: TestOidcProvider;
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({
      vars: async (url) => {
        idp = await startOidcProvider({
          redirectUris: [`${url}/v1/auth/callback`],
          users: [
            { sub: 'sub-alice', email: 'alice@acme.example', name: 'Alice Liddell', preferred_username: 'alice@acme.example', tid: TID },
            { sub: 'sub-mallory', email: 'mallory@other.example', name: 'Mallory', tid: OTHER_TID },
          ],
        });
        return {
          AGENTWS_OIDC_ISSUER_URL: idp.issuer,
          AGENTWS_OIDC_CLIENT_ID: idp.clientId,
          AGENTWS_OIDC_CLIENT_SECRET: idp.clientSecret,
          AGENTWS_AUTH_REDIRECT_ORIGINS: 'https://app.example.com',
        };
      },
    });
    await seedTenant(t, 'acme', [], TID);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('reports the identity provider on /auth/status', async () => {
    expect((await api(t, 'GET', '/v1/auth/status')).json).toEqual({ auth: { allowAnonymous: false, entraConfigured: true, gatewaysProtected: true } });
  });

  it('signs a user in through the whole browser flow and sets the access-token cookie', async () => {
    const r = await browserSignIn(`${t.url}/v1/auth/login?redirect=/dashboard`, 'alice@acme.example');
    expect(r.finalStatus).toBe(302);
    expect(r.location).toBe(`${t.url}/dashboard`);
    const access = r.setCookies.find((c) => c.startsWith('agentws_access='))!;
    expect(access).toMatch(/HttpOnly/);
    expect(access).toMatch(/SameSite=Lax/);
    expect(access).toMatch(/Path=\//);
    expect(access).not.toMatch(/Secure/); // http public URL
    expect(r.setCookies.find((c) => c.startsWith('agentws_refresh='))).toMatch(/Path=\/v1\/auth/);

    const token = r.cookies.agentws_access;
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ iss: t.url, aud: 'agentws', typ: 'access', roles: ['member'] });
    expect((claims.exp as number) - (claims.iat as number)).toBe(900);

    // The cookie alone authenticates a browser request; the same token works as a Bearer.
    const viaCookie = await api(t, 'GET', '/v1/auth/me', { headers: { cookie: `agentws_access=${token}` } });
    expect(viaCookie.status).toBe(200);
    expect(viaCookie.json).toEqual({
      user: { id: claims.sub, handle: 'alice', email: 'alice@acme.example', displayName: 'Alice Liddell', tenantId: claims.tid },
      roles: ['member'],
      permissions: systemRolePermissions('member'),
    });
    expect((await api(t, 'GET', '/v1/auth/me', { token })).json).toEqual(viaCookie.json);

    const audit = await t.opened.db.query(`select action, actor, channel from audit_log where action = 'auth.sign_in' and user_id = $1`, [claims.sub]);
    expect(audit.rows).toEqual([{ action: 'auth.sign_in', actor: `user:${claims.sub}`, channel: 'web' }]);

    // A second sign-in finds the same user rather than creating another.
    const again = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice');
    expect(again.location).toBe(`${t.url}/`);
    expect(decodeJwt(again.cookies.agentws_access).sub).toBe(claims.sub);
    const { rows } = await t.opened.db.query(`select count(*)::int as n from users where email = 'alice@acme.example'`);
    expect(rows[0].n).toBe(1);
  });

  it('links the first sign-in of a user created by the CLI to that user, by email', async () => {
    idp.setUsers([{ sub: 'sub-owner', email: 'owner@acme.example', name: 'The Owner', tid: TID }]);
    const { rows } = await t.opened.db.query(`select id from users where email = 'owner@acme.example'`);
    const r = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-owner');
    expect(r.finalStatus).toBe(302);
    const claims = decodeJwt(r.cookies.agentws_access);
    expect(claims).toMatchObject({ sub: rows[0].id, roles: ['owner'] });
  });

  it('never hands an account bound to one identity to another identity with the same email', async () => {
    // Someone else at the provider later gets alice's address: the existing account stays alice's.
    idp.setUsers([
      { sub: 'sub-alice', email: 'alice@acme.example', name: 'Alice Liddell', preferred_username: 'alice@acme.example', tid: TID },
      { sub: 'sub-impostor', email: 'alice@acme.example', name: 'Not Alice', tid: TID },
      { sub: 'sub-mallory', email: 'mallory@other.example', name: 'Mallory', tid: OTHER_TID },
    ]);
    await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice');
    const r = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-impostor');
    expect(r.finalStatus).toBe(409);
    expect(JSON.parse(r.body)).toMatchObject({ error: 'identity_conflict' });
    expect(r.setCookies.filter((c) => c.startsWith('agentws_'))).toEqual([]);
    const { rows } = await t.opened.db.query(`select external_subject from users where email = 'alice@acme.example'`);
    expect(rows).toEqual([{ external_subject: 'sub-alice' }]);
  });

  it('refuses users whose organisation has no tenant (403 tenant_not_provisioned), and audits it', async () => {
    const r = await browserSignIn(`${t.url}/v1/auth/login`, 'mallory@other.example');
    expect(r.finalStatus).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ error: 'tenant_not_provisioned' });
    expect(r.setCookies.filter((c) => c.startsWith('agentws_'))).toEqual([]);
    const audit = await t.opened.db.query(`select tenant_id from audit_log where action = 'auth.sign_in_denied'`);
    expect(audit.rows).toEqual([{ tenant_id: null }]);
  });

  it('rejects a tampered state, a tampered code, and a replayed callback', async () => {
    const badState = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice', {
      tamper: (u) => void u.searchParams.set('state', 'forged-state'),
    });
    expect(badState.finalStatus).toBe(400);
    expect(JSON.parse(badState.body)).toMatchObject({ error: 'sign_in_failed' });

    const badCode = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice', {
      tamper: (u) => void u.searchParams.set('code', 'forged-code'),
    });
    expect(badCode.finalStatus).toBe(400);
    expect(badCode.setCookies.filter((c) => c.startsWith('agentws_'))).toEqual([]);

    const ok = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice');
    expect(ok.finalStatus).toBe(302);
    const replay = await fetch(ok.callbackUrl, { redirect: 'manual' });
    expect(replay.status).toBe(400);
  });

  it('sends the PKCE challenge and rejects a swapped verifier', async () => {
    const start = await fetch(`${t.url}/v1/auth/login`, { redirect: 'manual' });
    const authUrl = new URL(start.headers.get('location')!);
    expect(authUrl.origin).toBe(idp.issuer);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authUrl.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authUrl.searchParams.get('nonce')).toBeTruthy();
    // Swap the stored verifier of every pending sign-in: the provider must refuse the code exchange.
    const r = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-alice', {
      tamper: async (u) => {
        await t.opened.db.query(`update auth_login_states set code_verifier = $1`, ['x'.repeat(43)]);
        return u;
      },
    });
    expect(r.finalStatus).toBe(400);
  });

  it('accepts only same-origin paths and configured origins as redirect targets', async () => {
    for (const bad of ['https://evil.example/x', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', 'http://127.0.0.1:1/x']) {
      const r = await api(t, 'GET', `/v1/auth/login?redirect=${encodeURIComponent(bad)}`);
      expect(r.status, bad).toBe(400);
    }
    const ok = await browserSignIn(`${t.url}/v1/auth/login?redirect=${encodeURIComponent('https://app.example.com/home')}`, 'sub-alice');
    expect(ok.location).toBe('https://app.example.com/home');
  });

  describe('tokens', () => {
    let tenantId: string;
    let ids: Record<string, string>;
    beforeAll(async () => {
      ({ tenantId, ids } = await seedTenant(t, 'tok', [{ handle: 'bob', roles: ['member'] }, { handle: 'gone', roles: ['member'] }]));
    });

    it('refresh returns a 900-second token that keeps the original role claims', async () => {
      const { refresh } = await signInAs(t, { sub: ids.bob, tid: tenantId, roles: ['member'] });
      // An admin role granted after sign-in does not appear until the next full sign-in.
      await t.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'admin'`, [tenantId, ids.bob]);
      const r = await api(t, 'POST', '/v1/auth/refresh', { body: { token: refresh } });
      expect(r.status).toBe(200);
      const claims = decodeJwt(r.json.token);
      expect(claims).toMatchObject({ sub: ids.bob, tid: tenantId, roles: ['member'], typ: 'access' });
      expect((claims.exp as number) - (claims.iat as number)).toBe(900);
      expect((await api(t, 'GET', '/v1/auth/me', { token: r.json.token })).json.roles).toEqual(['member']);
    });

    it('rejects forged, expired, mis-addressed and alg:none tokens with 401', async () => {
      const now = Math.floor(Date.now() / 1000);
      const base = { sub: ids.bob, tid: tenantId, roles: ['owner'] };
      const good = await signToken(t, base);
      const [h, p] = good.split('.');
      const forged = [
        await signToken(t, base, 'another-secret-another-secret-another-secret'),
        await signToken(t, { ...base, expS: now - 10, iatS: now - 1000 }),
        await signToken(t, { ...base, aud: 'someone-else' }),
        await signToken(t, { ...base, iss: 'https://evil.example' }),
        `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${p}.`,
        `${h}.${Buffer.from(JSON.stringify({ ...decodeJwt(good), roles: ['owner', 'admin'] })).toString('base64url')}.${good.split('.')[2]}`,
        'not-a-jwt',
      ];
      for (const token of forged) {
        const me = await api(t, 'GET', '/v1/auth/me', { token });
        expect(me.status, token).toBe(401);
        const refresh = await api(t, 'POST', '/v1/auth/refresh', { body: { token } });
        expect(refresh.status).toBe(401);
        // SPEC.md fixes this body exactly; the request id is in the header.
        expect(refresh.json).toEqual({ error: 'invalid token' });
        expect(refresh.headers.get('x-request-id')).toBeTruthy();
      }
      const failures = await t.opened.db.query(`select count(*)::int as n from audit_log where action = 'auth.refresh_failed'`);
      expect(failures.rows[0].n).toBeGreaterThanOrEqual(forged.length);
      // A refresh token is not an access token.
      const refreshToken = await signToken(t, { ...base, typ: 'refresh' });
      expect((await api(t, 'GET', '/v1/auth/me', { token: refreshToken })).status).toBe(401);
    });

    it('answers 404 user not found for a deleted user and 403 tenant_not_provisioned for a missing tenant', async () => {
      const token = await signToken(t, { sub: ids.gone, tid: tenantId, roles: ['member'] });
      await t.opened.db.query(`delete from users where id = $1`, [ids.gone]);
      const me = await api(t, 'GET', '/v1/auth/me', { token });
      expect(me.status).toBe(404);
      expect(me.json.error).toBe('user not found');
      expect((await api(t, 'POST', '/v1/auth/refresh', { body: { token } })).status).toBe(404);

      const orphan = await signToken(t, { sub: ids.bob, tid: crypto.randomUUID(), roles: ['member'] });
      for (const r of [await api(t, 'GET', '/v1/auth/me', { token: orphan }), await api(t, 'POST', '/v1/auth/refresh', { body: { token: orphan } })]) {
        expect(r.status).toBe(403);
        expect(r.json).toEqual({ error: 'tenant_not_provisioned' });
      }
    });

    it('requires authentication: 401 without a token; the service API key acts as the operator', async () => {
      const none = await api(t, 'GET', '/v1/auth/me');
      expect(none.status).toBe(401);
      expect(none.json).toMatchObject({ error: 'unauthenticated', requestId: expect.any(String) });
      expect((await api(t, 'GET', '/v1/auth/me', { token: 'wrong-key' })).status).toBe(401);
    });
  });
});

// Demo mode cannot be on with an identity provider (config refuses it): it is tested in edge-hardening.test.ts.
describe(`API key and auto-provisioning (${DB_MODE})`, () => {
  let idp: TestOidcProvider;
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      vars: async (url) => {
        idp = await startOidcProvider({ redirectUris: [`${url}/v1/auth/callback`], users: [{ sub: 'sub-new', email: 'first@fresh.example', name: 'First', tid: 'fresh-org' }] });
        return {
          AGENTWS_OIDC_ISSUER_URL: idp.issuer,
          AGENTWS_OIDC_CLIENT_ID: idp.clientId,
          AGENTWS_OIDC_CLIENT_SECRET: idp.clientSecret,
          AGENTWS_AUTO_PROVISION_TENANTS: 'true',
          AGENTWS_OPERATOR_EMAIL: 'owner@ops.example',
        };
      },
    });
    await seedTenant(t, 'ops');
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('acts as the operator with the API key', async () => {
    const withKey = await api(t, 'GET', '/v1/auth/me', { token: t.env.vars.AGENTWS_API_KEY });
    expect(withKey.status).toBe(200);
    expect(withKey.json).toMatchObject({ user: { email: 'owner@ops.example' }, roles: ['owner'] });
    expect((await api(t, 'GET', '/v1/auth/status')).json.auth.allowAnonymous).toBe(false);
    expect((await api(t, 'GET', '/v1/auth/me')).status).toBe(401);
    expect((await api(t, 'GET', '/v1/auth/me', { token: 'nope' })).status).toBe(401);
  });

  it('rate-limits refresh attempts per client (60 a minute), answering 429 with the error envelope', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await api(t, 'POST', '/v1/auth/refresh', { body: { token: `junk-${i}` } })).status);
    expect(statuses.slice(0, 60).every((s) => s === 401)).toBe(true);
    const limited = await api(t, 'POST', '/v1/auth/refresh', { body: { token: 'junk' } });
    expect(limited.status).toBe(429);
    expect(limited.json).toMatchObject({ error: 'rate_limited', message: expect.stringMatching(/try again in/), requestId: expect.any(String) });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Only the limited routes: authenticated routes are unaffected.
    expect((await api(t, 'GET', '/v1/auth/me', { token: t.env.vars.AGENTWS_API_KEY })).status).toBe(200);
  });

  it('creates the tenant of a new organisation on first sign-in and makes its first user the owner', async () => {
    const r = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-new');
    expect(r.finalStatus).toBe(302);
    const claims = decodeJwt(r.cookies.agentws_access);
    expect(claims.roles).toEqual(['owner']);
    const { rows } = await t.opened.db.query(`select slug, external_tenant_id from tenants where id = $1`, [claims.tid]);
    expect(rows).toEqual([{ slug: 'fresh-example', external_tenant_id: 'fresh-org' }]);
    expect((await t.opened.db.query(`select count(*)::int as n from roles where tenant_id = $1`, [claims.tid])).rows[0].n).toBe(4);
  });
});
