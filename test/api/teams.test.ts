import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/** Teams through /v1/admin/teams: admin.manage_users, audited, tenant-scoped, 400/404/409 as expected. */
describe(`teams API (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  const tok: Record<string, string> = {};

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'ann', roles: ['member'] }, { handle: 'bob', roles: ['member'] }, { handle: 'ada', roles: ['admin'] }]);
    beta = await seedTenant(t, 'beta', [{ handle: 'zoe', roles: ['member'] }]);
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.member = await signToken(t, { sub: acme.ids.ann, tid: acme.tenantId, roles: ['member'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('creates, lists with members, adds and removes members, deletes; every change audited', async () => {
    const created = await api(t, 'POST', '/v1/admin/teams', { token: tok.admin, body: { name: '  Platform  ' } });
    expect(created.status, created.text).toBe(201);
    expect(created.json.team).toEqual({ id: expect.any(String), name: 'Platform', createdAt: expect.any(String), members: [] });
    const id = created.json.team.id;

    const add = await api(t, 'POST', `/v1/admin/teams/${id}/members`, { token: tok.admin, body: { userId: acme.ids.ann } });
    expect(add.status, add.text).toBe(200);
    expect(add.json.added).toBe(true);
    expect(add.json.team.members).toEqual([{ userId: acme.ids.ann, handle: 'ann', email: 'ann@acme.example', displayName: 'ann', addedAt: expect.any(String) }]);
    // Adding again changes nothing.
    const again = await api(t, 'POST', `/v1/admin/teams/${id}/members`, { token: tok.admin, body: { userId: acme.ids.ann } });
    expect(again.json.added).toBe(false);
    await api(t, 'POST', `/v1/admin/teams/${id}/members`, { token: tok.admin, body: { userId: acme.ids.bob } });

    const list = await api(t, 'GET', '/v1/admin/teams', { token: tok.admin });
    expect(list.status).toBe(200);
    expect(list.json.teams.find((x: any) => x.id === id).members.map((m: any) => m.handle)).toEqual(['ann', 'bob']);

    const rm = await api(t, 'DELETE', `/v1/admin/teams/${id}/members/${acme.ids.bob}`, { token: tok.admin });
    expect(rm.status).toBe(204);
    expect((await api(t, 'DELETE', `/v1/admin/teams/${id}/members/${acme.ids.bob}`, { token: tok.admin })).status).toBe(404);

    const del = await api(t, 'DELETE', `/v1/admin/teams/${id}`, { token: tok.admin });
    expect(del.status).toBe(204);
    expect((await api(t, 'DELETE', `/v1/admin/teams/${id}`, { token: tok.admin })).status).toBe(404);
    expect((await t.opened.db.query(`select count(*)::int as n from team_members where team_id = $1`, [id])).rows[0].n).toBe(0);

    const audit = await api(t, 'GET', '/v1/admin/audit-log?limit=500', { token: tok.owner });
    const actions = audit.json.entries.filter((e: any) => e.target === `team:${id}`).map((e: any) => e.action).reverse();
    expect(actions).toEqual(['team.create', 'team.member_add', 'team.member_add', 'team.member_remove', 'team.delete']);
    expect(audit.json.entries.find((e: any) => e.action === 'team.create' && e.target === `team:${id}`).actor).toBe(`user:${acme.ids.ada}`);
  });

  it('409 on a duplicate name (ignoring case), 400 naming the field', async () => {
    expect((await api(t, 'POST', '/v1/admin/teams', { token: tok.admin, body: { name: 'Data' } })).status).toBe(201);
    const dup = await api(t, 'POST', '/v1/admin/teams', { token: tok.admin, body: { name: 'data' } });
    expect(dup.status).toBe(409);
    expect(dup.json.error).toBe('conflict');
    // Another tenant may use the name.
    expect((await api(t, 'POST', '/v1/admin/teams', { token: tok.beta, body: { name: 'Data' } })).status).toBe(201);
    for (const [body, field] of [[{}, /name/], [{ name: '' }, /name/], [{ name: '   ' }, /name must not be empty/], [{ name: 'x'.repeat(101) }, /name/], [{ name: 'a\u0007b' }, /name must be printable/]] as const) {
      const r = await api(t, 'POST', '/v1/admin/teams', { token: tok.admin, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.message).toMatch(field);
    }
    const team = (await api(t, 'GET', '/v1/admin/teams', { token: tok.admin })).json.teams.find((x: any) => x.name === 'Data');
    const bad = await api(t, 'POST', `/v1/admin/teams/${team.id}/members`, { token: tok.admin, body: { userId: 'bob' } });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toMatch(/userId/);
  });

  it('needs admin.manage_users; another tenant’s team or user is 404', async () => {
    const member = await api(t, 'GET', '/v1/admin/teams', { token: tok.member });
    expect(member.status).toBe(403);
    expect(member.json.details).toEqual({ permission: 'admin.manage_users' });
    expect((await api(t, 'POST', '/v1/admin/teams', { token: tok.member, body: { name: 'x' } })).status).toBe(403);
    expect((await api(t, 'GET', '/v1/admin/teams')).status).toBe(401);

    const mine = (await api(t, 'POST', '/v1/admin/teams', { token: tok.admin, body: { name: 'Ops' } })).json.team;
    const theirs = (await api(t, 'POST', '/v1/admin/teams', { token: tok.beta, body: { name: 'Ops' } })).json.team;
    // Their team from here, and mine from there: 404.
    expect((await api(t, 'DELETE', `/v1/admin/teams/${theirs.id}`, { token: tok.admin })).status).toBe(404);
    expect((await api(t, 'POST', `/v1/admin/teams/${theirs.id}/members`, { token: tok.admin, body: { userId: acme.ids.ann } })).status).toBe(404);
    expect((await api(t, 'DELETE', `/v1/admin/teams/${mine.id}/members/${acme.ids.ann}`, { token: tok.beta })).status).toBe(404);
    // Another tenant's user cannot join my team.
    const foreign = await api(t, 'POST', `/v1/admin/teams/${mine.id}/members`, { token: tok.admin, body: { userId: beta.ids.zoe } });
    expect(foreign.status).toBe(404);
    expect((await api(t, 'POST', `/v1/admin/teams/${mine.id}/members`, { token: tok.admin, body: { userId: crypto.randomUUID() } })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/admin/teams', { token: tok.beta })).json.teams.map((x: any) => x.name).sort()).toEqual(['Data', 'Ops']);
  });
});
