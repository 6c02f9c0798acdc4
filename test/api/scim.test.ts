import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { api, seedTenant, signInAs, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { browserSignIn, startOidcProvider, type TestOidcProvider } from '../helpers/oidc-provider.js';
import { DB_MODE } from '../helpers/test-env.js';

const TID = '5c1e0000-0000-4000-8000-00000000a11c';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';

/**
 * SCIM 2.0 at /scim/v2: the request sequences Entra ID's and Okta's provisioning send (modelled on their
 * public documentation), deprovisioning ending a signed-in person's access at once, tenant isolation.
 */
describe(`SCIM provisioning (${DB_MODE})`, () => {
  // The service's clock, moved forward to see a SCIM token expire.
  let skewMs = 0;
  const clock = { now: () => new Date(Date.now() + skewMs) };
  let idp: TestOidcProvider;
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  let owner: string;
  let acmeScim: string;
  let betaScim: string;

  /** A SCIM request as an identity provider makes it: bearer token, application/scim+json. */
  const scim = (method: string, path: string, body?: unknown, token = acmeScim) =>
    api(t, method, `/scim/v2${path}`, {
      token,
      headers: { accept: 'application/scim+json', ...(body !== undefined ? { 'content-type': 'application/scim+json; charset=utf-8' } : {}) },
      ...(body !== undefined ? { body } : {}),
    });
  const q = (filter: string) => encodeURIComponent(filter);
  const auditOf = async (target: string) =>
    (await t.opened.db.query<{ action: string; actor: string }>(`select action, actor from audit_log where target = $1 order by ts, id`, [target])).rows;

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      vars: async (url) => {
        idp = await startOidcProvider({
          redirectUris: [`${url}/v1/auth/callback`],
          users: [{ sub: 'sub-erin', email: 'erin@acme.example', name: 'Erin', tid: TID }],
        });
        return { AGENTWS_OIDC_ISSUER_URL: idp.issuer, AGENTWS_OIDC_CLIENT_ID: idp.clientId, AGENTWS_OIDC_CLIENT_SECRET: idp.clientSecret };
      },
    });
    acme = await seedTenant(t, 'acme', [{ handle: 'mem', roles: ['member'] }, { handle: 'adm', roles: ['admin'] }], TID);
    beta = await seedTenant(t, 'beta');
    owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    // Acme's token through the admin API; beta's through the core (as `aws scim token create` does).
    const made = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'entra' } });
    expect(made.status, made.text).toBe(201);
    expect(made.json.token).toMatch(/^agentws_scim_/);
    acmeScim = made.json.token;
    betaScim = (await t.opened.core.scim.createToken(systemCtx(silentLogger, { tenantId: beta.tenantId }), { name: 'okta' })).token;
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('answers discovery documents without a token, and refuses a wrong or missing token with a SCIM 401', async () => {
    const spc = await api(t, 'GET', '/scim/v2/ServiceProviderConfig');
    expect(spc.status).toBe(200);
    expect(spc.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    expect(spc.json).toMatchObject({ patch: { supported: true }, filter: { supported: true }, bulk: { supported: false } });
    expect((await api(t, 'GET', '/scim/v2/ResourceTypes')).json.Resources.map((r: any) => r.id)).toEqual(['User', 'Group']);
    expect((await api(t, 'GET', '/scim/v2/Schemas')).json.totalResults).toBe(2);

    for (const token of [undefined, 'agentws_scim_' + 'x'.repeat(43), owner]) {
      const r = await api(t, 'GET', '/scim/v2/Users', { token });
      expect(r.status).toBe(401);
      expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/);
      expect(r.json).toMatchObject({ schemas: [ERROR], status: '401' });
    }
  });

  it("replays Entra ID's provisioning of a user and a group", async () => {
    // The provisioning service first looks the user up by userName (mapped from userPrincipalName).
    const none = await scim('GET', `/Users?filter=${q('userName eq "frank.hill@acme.example"')}`);
    expect(none.status, none.text).toBe(200);
    expect(none.json).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'], totalResults: 0, Resources: [] });

    const created = await scim('POST', '/Users', {
      schemas: [USER, 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'],
      externalId: 'b1f3c7aa-entra-object',
      userName: 'Frank.Hill@acme.example',
      active: true,
      emails: [{ primary: true, type: 'work', value: 'frank.hill@acme.example' }],
      meta: { resourceType: 'User' },
      name: { formatted: 'Frank Hill', familyName: 'Hill', givenName: 'Frank' },
      roles: [],
      'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { department: 'Sales' },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    const frank = created.json;
    expect(frank).toMatchObject({ schemas: [USER], userName: 'frank.hill@acme.example', externalId: 'b1f3c7aa-entra-object', active: true, displayName: 'Frank Hill', name: { givenName: 'Frank', familyName: 'Hill' } });
    expect(created.headers.get('location')).toBe(`${t.url}/scim/v2/Users/${frank.id}`);
    // New users get the default role, as sign-in gives them.
    const roles = await t.opened.db.query(`select r.name from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = $1`, [frank.id]);
    expect(roles.rows.map((r: any) => r.name)).toEqual(['member']);

    expect((await scim('GET', `/Users?filter=${q('userName eq "frank.hill@acme.example"')}`)).json.Resources.map((r: any) => r.id)).toEqual([frank.id]);
    expect((await scim('GET', `/Users?filter=${q('externalId eq "b1f3c7aa-entra-object"')}`)).json.totalResults).toBe(1);
    const dup = await scim('POST', '/Users', { schemas: [USER], userName: 'frank.hill@acme.example', active: true });
    expect(dup.status).toBe(409);
    expect(dup.json).toMatchObject({ schemas: [ERROR], status: '409', scimType: 'uniqueness' });
    const badFilter = await scim('GET', `/Users?filter=${q('userName eq "a" or userName eq "b"')}`);
    expect(badFilter.status).toBe(400);
    expect(badFilter.json).toMatchObject({ status: '400', scimType: 'invalidFilter' });

    // Attribute changes come as capitalised operations with paths.
    const patched = await scim('PATCH', `/Users/${frank.id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'name.givenName', value: 'Franklin' },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'frank.hill@acme.example' },
        { op: 'Replace', path: 'displayName', value: 'Franklin Hill' },
      ],
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({ displayName: 'Franklin Hill', name: { givenName: 'Franklin' } });
    expect((await scim('GET', `/Users/${frank.id}`)).json.displayName).toBe('Franklin Hill');

    // A group: looked up by displayName without members, created, members added and removed, renamed.
    const noGroup = await scim('GET', `/Groups?excludedAttributes=members&filter=${q('displayName eq "Sales Team"')}`);
    expect(noGroup.json.totalResults).toBe(0);
    const group = await scim('POST', '/Groups', { schemas: [GROUP], externalId: 'grp-entra-1', displayName: 'Sales Team', meta: { resourceType: 'Group' }, members: [] });
    expect(group.status, group.text).toBe(201);
    const gid = group.json.id;
    const add = await scim('PATCH', `/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Add', path: 'members', value: [{ value: frank.id }, { value: acme.ids.mem }] }] });
    expect(add.status, add.text).toBe(200);
    const full = await scim('GET', `/Groups/${gid}`);
    expect(full.json.members.map((m: any) => m.value).sort()).toEqual([frank.id, acme.ids.mem].sort());
    const slim = await scim('GET', `/Groups/${gid}?excludedAttributes=members`);
    expect(slim.json).not.toHaveProperty('members');
    expect(slim.json).toMatchObject({ id: gid, displayName: 'Sales Team', externalId: 'grp-entra-1' });
    // The team is the tenant's team, as the admin API shows it.
    const teams = await api(t, 'GET', '/v1/admin/teams', { token: owner });
    expect(teams.json.teams.find((x: any) => x.id === gid).members.map((m: any) => m.userId).sort()).toEqual([frank.id, acme.ids.mem].sort());

    await scim('PATCH', `/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Remove', path: `members[value eq "${acme.ids.mem}"]` }, { op: 'Replace', path: 'displayName', value: 'Sales' }] });
    expect((await scim('GET', `/Groups/${gid}`)).json).toMatchObject({ displayName: 'Sales', members: [{ value: frank.id }] });
    const ghost = await scim('PATCH', `/Groups/${gid}`, { schemas: [PATCH_OP], Operations: [{ op: 'Add', path: 'members', value: [{ value: beta.ids.owner }] }] });
    expect(ghost.status).toBe(400);
    expect(ghost.json.scimType).toBe('invalidValue');

    expect((await scim('DELETE', `/Groups/${gid}`)).status).toBe(204);
    const gone = await scim('GET', `/Groups/${gid}`);
    expect(gone.status).toBe(404);
    expect(gone.json).toMatchObject({ schemas: [ERROR], status: '404' });

    // Unassigning the user: Entra sets active false ("False" from older configurations), later deletes.
    const off = await scim('PATCH', `/Users/${frank.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] });
    expect(off.json.active).toBe(false);
    expect((await scim('DELETE', `/Users/${frank.id}`)).status).toBe(204);
    expect((await scim('GET', `/Users/${frank.id}`)).status).toBe(404);
    expect((await t.opened.db.query(`select 1 from users where id = $1`, [frank.id])).rowCount).toBe(0);

    expect((await auditOf(`user:${frank.id}`)).map((a) => a.action)).toEqual(['user.scim_create', 'user.scim_update', 'user.scim_update', 'user.deactivate', 'user.remove']);
    expect((await auditOf(`user:${frank.id}`)).every((a) => a.actor === 'system:scim')).toBe(true);
    expect((await auditOf(`team:${gid}`)).map((a) => a.action)).toEqual(['team.create', 'team.member_add', 'team.member_add', 'team.scim_update', 'team.member_remove', 'team.delete']);
  });

  it("replays Okta's provisioning: create, read, replace, deactivate with a value object, groups, paging", async () => {
    const none = await scim('GET', `/Users?filter=${q('userName eq "gina@acme.example"')}&startIndex=1&count=100`);
    expect(none.json.totalResults).toBe(0);
    const created = await scim('POST', '/Users', {
      schemas: [USER],
      userName: 'gina@acme.example',
      name: { givenName: 'Gina', familyName: 'Lopez' },
      emails: [{ primary: true, value: 'gina@acme.example', type: 'work' }],
      displayName: 'Gina Lopez',
      locale: 'en-US',
      externalId: '00u1okta',
      groups: [],
      password: 'not-kept-1!',
      active: true,
    });
    expect(created.status, created.text).toBe(201);
    const gina = created.json;
    expect(JSON.stringify(gina)).not.toContain('not-kept');

    const put = await scim('PUT', `/Users/${gina.id}`, { ...gina, name: { givenName: 'Georgina', familyName: 'Lopez' }, displayName: 'Georgina Lopez' });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toMatchObject({ id: gina.id, displayName: 'Georgina Lopez', name: { givenName: 'Georgina' }, active: true });

    const off = await scim('PATCH', `/Users/${gina.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] });
    expect(off.status, off.text).toBe(200);
    expect(off.json.active).toBe(false);
    expect((await scim('GET', `/Users?filter=${q('userName eq "gina@acme.example"')}`)).json.Resources[0].active).toBe(false);
    const on = await scim('PATCH', `/Users/${gina.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    expect(on.json.active).toBe(true);

    // Paging: 1-based startIndex, count per page, totalResults over all.
    const all = (await scim('GET', '/Users')).json;
    expect(all.totalResults).toBeGreaterThanOrEqual(3);
    const page2 = (await scim('GET', '/Users?startIndex=2&count=1')).json;
    expect(page2).toMatchObject({ totalResults: all.totalResults, startIndex: 2, itemsPerPage: 1 });
    expect(page2.Resources[0].id).toBe(all.Resources[1].id);

    // Groups: pushed with members, renamed with a value object, members added and removed.
    const g = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'Engineering', members: [{ value: gina.id, display: 'gina@acme.example' }] });
    expect(g.status, g.text).toBe(201);
    expect(g.json.members.map((m: any) => m.value)).toEqual([gina.id]);
    const renamed = await scim('PATCH', `/Groups/${g.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { id: g.json.id, displayName: 'Eng' } }] });
    expect(renamed.json.displayName).toBe('Eng');
    await scim('PATCH', `/Groups/${g.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'add', path: 'members', value: [{ value: acme.ids.mem, display: 'mem' }] }] });
    await scim('PATCH', `/Groups/${g.json.id}`, { schemas: [PATCH_OP], Operations: [{ op: 'remove', path: `members[value eq "${gina.id}"]` }] });
    expect((await scim('GET', `/Groups/${g.json.id}`)).json.members.map((m: any) => m.value)).toEqual([acme.ids.mem]);
    const replaced = await scim('PUT', `/Groups/${g.json.id}`, { schemas: [GROUP], id: g.json.id, displayName: 'Engineering', members: [{ value: gina.id }] });
    expect(replaced.json).toMatchObject({ displayName: 'Engineering', members: [{ value: gina.id }] });
    const list = await scim('GET', `/Groups?filter=${q('displayName eq "engineering"')}&startIndex=1&count=100`);
    expect(list.json.Resources.map((r: any) => r.id)).toEqual([g.json.id]);
    const dupGroup = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'ENGINEERING' });
    expect(dupGroup.json).toMatchObject({ status: '409', scimType: 'uniqueness' });
  });

  it("deprovisioning ends a signed-in person's access within a second; reactivation lets them sign in again", async () => {
    const created = await scim('POST', '/Users', { schemas: [USER], userName: 'erin@acme.example', name: { givenName: 'Erin', familyName: 'Ng' }, active: true });
    expect(created.status, created.text).toBe(201);
    const erin = created.json.id;
    const session = await signInAs(t, { sub: erin, tid: acme.tenantId, roles: ['member'] });
    // A token naming no sign-in (as other credentials of the person may): refused by the deactivation itself.
    const unbound = await signToken(t, { sub: erin, tid: acme.tenantId, roles: ['member'] });
    expect((await api(t, 'GET', '/v1/auth/me', { token: unbound })).status).toBe(200);
    // Twice: the second answer comes from this process's authentication cache.
    expect((await api(t, 'GET', '/v1/auth/me', { token: session.access })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/auth/me', { token: session.access })).status).toBe(200);

    const started = Date.now();
    const off = await scim('PATCH', `/Users/${erin}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: false }] });
    expect(off.status, off.text).toBe(200);
    const next = await api(t, 'GET', '/v1/auth/me', { token: session.access });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(next.status).toBe(401);
    expect(next.json.error).toBe('user_deactivated');
    expect((await api(t, 'GET', '/v1/auth/me', { token: unbound })).json.error).toBe('user_deactivated');
    expect((await api(t, 'POST', '/v1/auth/refresh', { body: { token: session.refresh } })).status).toBe(401);
    // Signing in through the identity provider is refused too.
    const refused = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-erin');
    expect(refused.finalStatus).toBe(403);
    expect(refused.body).toContain('user_deactivated');
    expect(refused.cookies.agentws_access).toBeUndefined();

    const on = await scim('PATCH', `/Users/${erin}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    expect(on.json.active).toBe(true);
    // The old sign-in stays ended; a new one works.
    expect((await api(t, 'GET', '/v1/auth/me', { token: session.access })).status).toBe(401);
    const again = await browserSignIn(`${t.url}/v1/auth/login`, 'sub-erin');
    expect(again.finalStatus).toBe(302);
    const me = await api(t, 'GET', '/v1/auth/me', { token: again.cookies.agentws_access });
    expect(me.status, me.text).toBe(200);
    expect(me.json.user).toMatchObject({ id: erin, email: 'erin@acme.example' });
    expect((await auditOf(`user:${erin}`)).map((a) => a.action)).toEqual(expect.arrayContaining(['user.deactivate', 'auth.sign_in_denied', 'user.reactivate', 'auth.sign_in']));
  });

  it("keeps tenants apart: beta's token neither sees nor changes acme's users and groups", async () => {
    const acmeUser = (await scim('POST', '/Users', { schemas: [USER], userName: 'hal@acme.example' })).json;
    const acmeGroup = (await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'Acme only' })).json;
    expect((await scim('GET', `/Users/${acmeUser.id}`, undefined, betaScim)).status).toBe(404);
    expect((await scim('PATCH', `/Users/${acmeUser.id}`, { Operations: [{ op: 'replace', value: { active: false } }] }, betaScim)).status).toBe(404);
    expect((await scim('DELETE', `/Users/${acmeUser.id}`, undefined, betaScim)).status).toBe(404);
    expect((await scim('GET', `/Groups/${acmeGroup.id}`, undefined, betaScim)).status).toBe(404);
    const betaUsers = (await scim('GET', `/Users?filter=${q('userName eq "hal@acme.example"')}`, undefined, betaScim)).json;
    expect(betaUsers.totalResults).toBe(0);
    const everyone = (await scim('GET', '/Users', undefined, betaScim)).json;
    expect(everyone.Resources.map((r: any) => r.userName)).toEqual(['owner@beta.example']);
    // The same userName may exist in both tenants.
    expect((await scim('POST', '/Users', { schemas: [USER], userName: 'hal@acme.example' }, betaScim)).status).toBe(201);
    expect((await scim('GET', `/Users/${acmeUser.id}`)).json.active).toBe(true);
  });

  it('rotates and revokes tokens (admin API), each audited; members may not manage them', async () => {
    const member = await signToken(t, { sub: acme.ids.mem, tid: acme.tenantId, roles: ['member'] });
    expect((await api(t, 'POST', '/v1/admin/scim/tokens', { token: member, body: {} })).status).toBe(403);
    const rotated = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'entra' } });
    expect(rotated.json).toMatchObject({ name: 'entra', replaced: true });
    expect((await scim('GET', '/Users')).status).toBe(401);
    expect((await scim('GET', '/Users', undefined, rotated.json.token)).status).toBe(200);
    const listed = await api(t, 'GET', '/v1/admin/scim/tokens', { token: owner });
    expect(listed.json.tokens).toEqual([expect.objectContaining({ name: 'entra', lastUsedAt: expect.any(String) })]);
    expect(listed.text).not.toContain('agentws_scim_');
    expect((await api(t, 'DELETE', '/v1/admin/scim/tokens/entra', { token: owner })).status).toBe(204);
    expect((await scim('GET', '/Users', undefined, rotated.json.token)).status).toBe(401);
    const actions = (await t.opened.db.query<{ action: string }>(`select action from audit_log where tenant_id = $1 and action like 'scim.%' order by ts, id`, [acme.tenantId])).rows.map((r) => r.action);
    expect(actions.slice(0, 3)).toEqual(['scim.token_create', 'scim.token_rotate', 'scim.token_revoke']);
  });

  it('lets only owners mint SCIM tokens, never through a personal access token, and records who minted each', async () => {
    const admin = await signToken(t, { sub: acme.ids.adm, tid: acme.tenantId, roles: ['admin'] });
    const byAdmin = await api(t, 'POST', '/v1/admin/scim/tokens', { token: admin, body: { name: 'shadow' } });
    expect(byAdmin.status, byAdmin.text).toBe(403);
    expect(byAdmin.json.details).toMatchObject({ permission: 'admin.manage_tenant' });
    // Personal access tokens with the admin scope: the admin's, and even the owner's.
    const sys = systemCtx(silentLogger, { tenantId: acme.tenantId });
    for (const userId of [acme.ids.adm, acme.ids.owner]) {
      const pat = (await t.opened.core.personalTokens.create(sys, { userId, name: 'ci', scopes: ['admin'], expiresInDays: 30 })).value;
      const viaPat = await api(t, 'POST', '/v1/admin/scim/tokens', { token: pat, body: { name: 'shadow' } });
      expect(viaPat.status, viaPat.text).toBe(403);
      expect(viaPat.json.error).toBe('token_cannot_create_tokens');
    }
    expect((await t.opened.db.query(`select 1 from scim_tokens where name = 'shadow'`)).rowCount).toBe(0);
    // An admin may see them (and revoke one: that only takes access away).
    expect((await api(t, 'GET', '/v1/admin/scim/tokens', { token: admin })).status).toBe(200);

    const made = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'okta', expiresInDays: 30 } });
    expect(made.status, made.text).toBe(201);
    const days = (Date.parse(made.json.expiresAt) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThan(30.1);
    const listed = (await api(t, 'GET', '/v1/admin/scim/tokens', { token: owner })).json.tokens.find((x: any) => x.name === 'okta');
    expect(listed).toMatchObject({ createdBy: `user:${acme.ids.owner}`, expiresAt: made.json.expiresAt, expired: false });
    const entry = (await t.opened.db.query<{ actor: string; details: any }>(`select actor, details from audit_log where action = 'scim.token_create' and target = $1`, [`scim_token:${made.json.id}`])).rows;
    expect(entry).toEqual([{ actor: `user:${acme.ids.owner}`, details: expect.objectContaining({ name: 'okta', expiresAt: made.json.expiresAt }) }]);
    // Without a lifetime: the default; beyond the tenant's maximum: 400 naming the field.
    const dflt = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'dflt' } });
    expect(Math.round((Date.parse(dflt.json.expiresAt) - Date.now()) / 86_400_000)).toBe(180);
    const tooLong = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'long', expiresInDays: 400 } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.details).toMatchObject({ field: 'expiresInDays' });
    // The tenant's maximum: settings.tokens.scimMaxDays (personal tokens' maxDays is another setting).
    const bad = await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { tokens: { scimMaxDays: 0 } } } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('scimMaxDays');
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { tokens: { scimMaxDays: 30 } } } })).status).toBe(200);
    try {
      const capped = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'capped' } });
      expect(Math.round((Date.parse(capped.json.expiresAt) - Date.now()) / 86_400_000)).toBe(30);
      const over = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'capped', expiresInDays: 31 } });
      expect(over.json).toMatchObject({ details: { field: 'expiresInDays', maxDays: 30 } });
      expect((await api(t, 'DELETE', '/v1/admin/scim/tokens/capped', { token: owner })).status).toBe(204);
    } finally {
      await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { tokens: { scimMaxDays: 365 } } } });
    }
    expect((await api(t, 'DELETE', '/v1/admin/scim/tokens/dflt', { token: admin })).status).toBe(204);
    expect((await api(t, 'DELETE', '/v1/admin/scim/tokens/okta', { token: owner })).status).toBe(204);
  });

  it("obeys the owner rules: an identity provider cannot deactivate, delete or rename an owner (403), even with several owners", async () => {
    const token = (await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'owners' } })).json.token as string;
    const ownerUser = (await scim('GET', `/Users/${acme.ids.owner}`, undefined, token)).json;
    expect(ownerUser.userName).toBe('owner@acme.example');
    const refusedFor = async (r: { status: number; json: any }) => {
      expect(r.status).toBe(403);
      expect(r.json).toMatchObject({ schemas: [ERROR], status: '403', detail: expect.stringMatching(/owner/) });
    };
    // The tenant's only owner: neither deactivated nor deleted.
    await refusedFor(await scim('PATCH', `/Users/${acme.ids.owner}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] }, token));
    await refusedFor(await scim('PATCH', `/Users/${acme.ids.owner}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] }, token));
    await refusedFor(await scim('PUT', `/Users/${acme.ids.owner}`, { ...ownerUser, active: false }, token));
    await refusedFor(await scim('DELETE', `/Users/${acme.ids.owner}`, undefined, token));
    // Nor their sign-in identity changed (an attacker's address would sign in as the owner).
    await refusedFor(await scim('PATCH', `/Users/${acme.ids.owner}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'userName', value: 'mallory@evil.example' }] }, token));
    await refusedFor(await scim('PUT', `/Users/${acme.ids.owner}`, { ...ownerUser, userName: 'mallory@evil.example' }, token));

    // A second owner: still not (owners are managed by owners, not by the identity provider).
    await t.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'owner'`, [acme.tenantId, acme.ids.adm]);
    try {
      await refusedFor(await scim('PATCH', `/Users/${acme.ids.adm}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] }, token));
      await refusedFor(await scim('DELETE', `/Users/${acme.ids.adm}`, undefined, token));
      await refusedFor(await scim('PATCH', `/Users/${acme.ids.adm}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'userName', value: 'adm2@acme.example' }] }, token));
    } finally {
      await t.opened.db.query(`delete from user_roles where user_id = $1 and role_id = (select id from roles where tenant_id = $2 and name = 'owner')`, [acme.ids.adm, acme.tenantId]);
    }
    const rows = (await t.opened.db.query<{ email: string; deactivated: boolean }>(`select email, deactivated_at is not null as deactivated from users where id = any($1) order by email`, [[acme.ids.owner, acme.ids.adm]])).rows;
    expect(rows).toEqual([{ email: 'adm@acme.example', deactivated: false }, { email: 'owner@acme.example', deactivated: false }]);

    // What an identity provider keeps in step for an owner: names and its own key.
    const named = await scim('PATCH', `/Users/${acme.ids.owner}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'displayName', value: 'Olive Owner' }, { op: 'Replace', path: 'externalId', value: 'entra-owner' }] }, token);
    expect(named.status, named.text).toBe(200);
    expect(named.json).toMatchObject({ displayName: 'Olive Owner', externalId: 'entra-owner', active: true, userName: 'owner@acme.example' });
    // A non-owner is the identity provider's to deactivate, as before.
    const off = await scim('PATCH', `/Users/${acme.ids.adm}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] }, token);
    expect(off.json.active).toBe(false);
    await scim('PATCH', `/Users/${acme.ids.adm}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] }, token);
  });

  it('refuses an expired SCIM token with 401; creating it again under its name renews it', async () => {
    const made = await api(t, 'POST', '/v1/admin/scim/tokens', { token: owner, body: { name: 'short', expiresInDays: 1 } });
    expect((await scim('GET', '/Users', undefined, made.json.token)).status).toBe(200);
    skewMs = 86_400_000 + 60_000;
    try {
      const r = await scim('GET', '/Users', undefined, made.json.token);
      expect(r.status).toBe(401);
      expect(r.json).toMatchObject({ schemas: [ERROR], status: '401', detail: expect.stringMatching(/expired/) });
      expect((await t.opened.core.scim.listTokens(systemCtx(silentLogger, { tenantId: acme.tenantId }))).find((x) => x.name === 'short')).toMatchObject({ expired: true });
      const renewed = await t.opened.core.scim.createToken(systemCtx(silentLogger, { tenantId: acme.tenantId }), { name: 'short', expiresInDays: 1 });
      expect(renewed.replaced).toBe(true);
      expect((await scim('GET', '/Users', undefined, renewed.token)).status).toBe(200);
      expect((await scim('GET', '/Users', undefined, made.json.token)).status).toBe(401);
    } finally {
      skewMs = 0;
    }
  });
});
