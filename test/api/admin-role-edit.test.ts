import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Editing roles (`PATCH /v1/admin/roles/:roleId`, what the dashboard's Custom roles and Cost limits tabs
 * call) and reading the tenant's settings (`GET /v1/admin/tenant`, the Egress tab).
 */
describe(`role edits and tenant settings over the API (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: { tenantId: string; ids: Record<string, string> };
  let beta: { tenantId: string; ids: Record<string, string> };
  const tok: Record<string, string> = {};
  const roleId = async (name: string, token = tok.owner) => (await api(t, 'GET', '/v1/admin/roles', { token })).json.roles.find((r: { name: string }) => r.name === name).id as string;
  const patch = (id: string, body: unknown, token = tok.owner) => api(t, 'PATCH', `/v1/admin/roles/${id}`, { token, body });

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [
      { handle: 'ada', roles: ['admin'] },
      { handle: 'mel', roles: ['member'] },
    ]);
    beta = await seedTenant(t, 'beta');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.member = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
    tok.betaOwner = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(() => t?.close());

  it('a custom role: the groups given replace theirs, the others keep their value; audited with before and after', async () => {
    const created = await api(t, 'POST', '/v1/admin/roles', { token: tok.owner, body: { name: 'analyst', permissions: { memory: { read_own: true }, tools: { allowed: ['read'] }, cost: { monthly_limit_usd: 5 } } } });
    expect(created.status).toBe(201);
    const id = created.json.role.id;
    const r = await patch(id, { description: 'Reads and searches', permissions: { memory: { read_own: true, read_team: true } } });
    expect(r.status).toBe(200);
    expect(r.json.role).toMatchObject({ id, name: 'analyst', description: 'Reads and searches', isSystem: false });
    expect(r.json.role.permissions.memory).toMatchObject({ read_own: true, read_team: true, write: false });
    expect(r.json.role.permissions.tools).toEqual({ allowed: ['read'], denied: [] });
    expect(r.json.role.permissions.cost).toEqual({ monthly_limit_usd: 5 });
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=role.update', { token: tok.owner });
    expect(audit.json.entries[0]).toMatchObject({ target: `role:${id}`, actor: `user:${acme.ids.owner}` });
    // Invalid documents are 400s naming the member.
    const bad = await patch(id, { permissions: { memory: { read_own: 'yes' } } });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toContain('permissions/memory/read_own');
  });

  it('a system role keeps its document and description, but its cost limits change and apply to its members', async () => {
    const member = await roleId('member');
    const widened = await patch(member, { permissions: { admin: { manage_users: true } } });
    expect(widened.status).toBe(400);
    expect(widened.json.message).toContain('only its cost limits, agents.terminal, agents.code_host and models can change');
    expect((await patch(member, { description: 'Something else' })).status).toBe(400);
    // The terminal is the one grant a system role may lose (and get back).
    const agents = systemRolePermissions('member').agents;
    const noTerminal = await patch(member, { permissions: { agents: { ...agents, terminal: false } } });
    expect(noTerminal.status).toBe(200);
    expect(noTerminal.json.role.permissions.agents).toEqual({ ...agents, terminal: false });
    expect((await patch(member, { permissions: { agents } })).json.role.permissions.agents.terminal).toBe(true);
    // So may handing issues to agents from git hosts, without touching the rest.
    const noCodeHost = await patch(member, { permissions: { agents: { ...agents, code_host: false } } });
    expect(noCodeHost.status).toBe(200);
    expect(noCodeHost.json.role.permissions.agents).toEqual({ ...agents, code_host: false });
    expect((await patch(member, { permissions: { agents: { ...agents, code_host: false, delete: true } } })).status).toBe(400);
    expect((await patch(member, { permissions: { agents } })).json.role.permissions.agents.code_host).toBe(true);

    const limited = await patch(member, { permissions: { cost: { monthly_limit_usd: 20, per_request_limit_usd: 1 } } });
    expect(limited.status).toBe(200);
    expect(limited.json.role.permissions).toEqual({ ...systemRolePermissions('member'), cost: { monthly_limit_usd: 20, per_request_limit_usd: 1 } });
    expect(await t.opened.core.spending.limits(acme.tenantId, acme.ids.mel)).toEqual({ monthly: 20, perRequest: 1 });
    // An empty cost group lifts them.
    expect((await patch(member, { permissions: { cost: {} } })).status).toBe(200);
    expect(await t.opened.core.spending.limits(acme.tenantId, acme.ids.mel)).toEqual({});
  });

  it('nobody grants what they do not hold: 403 naming it; only owners change the owner role; members may not edit roles', async () => {
    const analyst = await roleId('analyst');
    const beyond = await patch(analyst, { permissions: { admin: { manage_tenant: true } } }, tok.admin);
    expect(beyond.status).toBe(403);
    expect(beyond.json.details).toEqual({ permission: 'admin.manage_tenant', exceeds: ['admin.manage_tenant'] });
    expect((await patch(await roleId('owner'), { permissions: { cost: { monthly_limit_usd: 1 } } }, tok.admin)).status).toBe(403);
    expect((await patch(analyst, { permissions: { memory: { read_own: true } } }, tok.admin)).status).toBe(200);
    expect((await patch(analyst, { description: 'x' }, tok.member)).status).toBe(403);
  });

  it('another tenant\'s role and an unknown one are 404', async () => {
    const analyst = await roleId('analyst');
    expect((await patch(analyst, { description: 'mine now' }, tok.betaOwner)).status).toBe(404);
    expect((await patch(crypto.randomUUID(), { description: 'x' })).status).toBe(404);
  });

  it('GET /v1/admin/tenant: the tenant and its settings for who manages it (admin.manage_tenant), 403 for others', async () => {
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: tok.owner, body: { settings: { egress: { deny: ['10.0.0.0/8'] } } } })).status).toBe(200);
    const r = await api(t, 'GET', '/v1/admin/tenant', { token: tok.owner });
    expect(r.status).toBe(200);
    expect(r.json.tenant).toMatchObject({ id: acme.tenantId, slug: 'acme', settings: { egress: { allow: [], deny: ['10.0.0.0/8'], ports: [] } } });
    expect((await api(t, 'GET', '/v1/admin/tenant', { token: tok.admin })).status).toBe(403);
    expect((await api(t, 'GET', '/v1/admin/tenant', { token: tok.betaOwner })).json.tenant.id).toBe(beta.tenantId);
  });
});
