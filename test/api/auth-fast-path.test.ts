import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signInAs, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * A caller this process checked moments ago is authenticated without waiting (authenticateCached): the
 * answer must be the one the full check gives, also when what was remembered runs out.
 */
describe(`authentication from what was checked moments ago (${DB_MODE})`, () => {
  let t: TestApp;
  let offsetMs = 0;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  beforeAll(async () => {
    t = await startTestApp({ clock: { now: () => new Date(Date.now() + offsetMs) } });
    acme = await seedTenant(t, 'acme', [{ handle: 'gone', roles: ['member'] }, { handle: 'kim', roles: ['member'] }]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('notices a deleted user once the 2 s user check runs out, on every route', async () => {
    const token = await signToken(t, { sub: acme.ids.gone, tid: acme.tenantId, roles: ['member'] });
    for (let i = 0; i < 3; i++) expect((await api(t, 'GET', '/v1/auth/me', { token })).status).toBe(200);
    await t.opened.db.query(`delete from users where id = $1`, [acme.ids.gone]);
    offsetMs += 2001;
    const me = await api(t, 'GET', '/v1/auth/me', { token });
    expect(me.status).toBe(404);
    expect((await api(t, 'GET', '/v1/sessions', { token })).status).toBe(404);
  });

  it('refuses a remembered token once it expires, and a refresh token at any time', async () => {
    const nowS = Math.floor((Date.now() + offsetMs) / 1000);
    const token = await signToken(t, { sub: acme.ids.kim, tid: acme.tenantId, roles: ['member'], iatS: nowS, expS: nowS + 5 });
    expect((await api(t, 'GET', '/v1/auth/me', { token })).json.user.handle).toBe('kim');
    expect((await api(t, 'GET', '/v1/auth/me', { token })).status).toBe(200);
    offsetMs += 6000;
    const late = await api(t, 'GET', '/v1/auth/me', { token });
    expect(late.status).toBe(401);
    expect(late.json.error).toBe('unauthenticated');
    const { refresh } = await signInAs(t, { sub: acme.ids.kim, tid: acme.tenantId, roles: ['member'] }, { authTimeS: nowS + 6 });
    expect((await api(t, 'POST', '/v1/auth/refresh', { body: { token: refresh } })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/auth/me', { token: refresh })).status).toBe(401);
  });

  it('answers the same actor as the full check: roles and permissions from the token, profile from the user', async () => {
    const token = await signToken(t, { sub: acme.ids.kim, tid: acme.tenantId, roles: ['member'] });
    const first = await api(t, 'GET', '/v1/auth/me', { token });
    const second = await api(t, 'GET', '/v1/auth/me', { token });
    expect(second.json).toEqual(first.json);
    expect(first.json).toEqual({ user: { id: acme.ids.kim, handle: 'kim', email: 'kim@acme.example', displayName: 'kim', tenantId: acme.tenantId }, roles: ['member'], permissions: systemRolePermissions('member') });
    // Permissions still apply on the remembered path: a member is no admin.
    expect((await api(t, 'GET', '/v1/admin/users', { token })).status).toBe(403);
    expect((await api(t, 'GET', '/v1/admin/users', { token })).status).toBe(403);
  });
});
