import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signInAs, startTestApp, type TestApp } from '../helpers/app.js';
import { browserSignIn, startOidcProvider, type TestOidcProvider, type TestOidcUser } from '../helpers/oidc-provider.js';
import { DB_MODE } from '../helpers/test-env.js';

// Group mapping at sign-in through the real in-process OIDC provider: off by default
// (SPEC.md), and when a tenant turns it on, roles and teams follow the ID token's groups without ever
// taking away what an admin gave by hand, the tenant's last owner, or anything when Entra's overage hides
// the groups.
const TID = '72f988bf-0000-4000-8000-0000000029a3';
const G_ADMINS = 'aaaaaaaa-0000-4000-8000-000000000001';
const G_VIEW = 'aaaaaaaa-0000-4000-8000-000000000002';
const G_PLATFORM = 'aaaaaaaa-0000-4000-8000-000000000003';
const G_DATA = 'aaaaaaaa-0000-4000-8000-000000000004';
const G_OWNERS = 'aaaaaaaa-0000-4000-8000-000000000005';
const GRAPH = 'https://graph.microsoft.com/v1.0/users/00000000-0000-4000-8000-00000000c1c1/getMemberObjects';

const person = (handle: string, extra: Partial<TestOidcUser> = {}): TestOidcUser => ({ sub: `sub-${handle}`, email: `${handle}@acme.example`, name: handle, tid: TID, ...extra });

describe(`sign-in group mapping (${DB_MODE})`, () => {
  let idp: TestOidcProvider;
  let t: TestApp;
  let tenantId: string;
  let ownerId: string;
  let owner: string;
  const users: Record<string, TestOidcUser> = {};

  /** Replaces one person's entry at the provider (their groups) and keeps the others. */
  const setPerson = (u: TestOidcUser) => {
    users[u.sub] = u;
    idp.setUsers(Object.values(users));
  };
  /** A whole browser sign-in; answers the roles of the access token it issued. */
  const signIn = async (handle: string) => {
    const r = await browserSignIn(`${t.url}/v1/auth/login`, `${handle}@acme.example`);
    expect(r.finalStatus, r.body).toBe(302);
    return (decodeJwt(r.cookies.agentws_access).roles as string[]).slice().sort();
  };
  const userId = async (handle: string) => (await t.opened.db.query<{ id: string }>(`select id from users where tenant_id = $1 and handle = $2`, [tenantId, handle])).rows[0].id;
  const teamsOf = async (handle: string) => {
    const { rows } = await t.opened.db.query<{ name: string }>(
      `select t.name from team_members tm join teams t on t.id = tm.team_id where tm.user_id = $1 order by t.name`,
      [await userId(handle)],
    );
    return rows.map((r) => r.name);
  };
  const roleId = async (name: string) => ((await api(t, 'GET', '/v1/admin/roles', { token: owner })).json.roles as Array<{ id: string; name: string }>).find((r) => r.name === name)!.id;
  /** The person's audit entries of an action, newest first (the API lists entries without their details). */
  const audit = async (action: string, handle: string) =>
    (
      await t.opened.db.query<{ details: Record<string, unknown>; actor: string }>(
        `select details, actor from audit_log where tenant_id = $1 and action = $2 and user_id = $3 order by ts desc, seq desc`,
        [tenantId, action, await userId(handle)],
      )
    ).rows;

  beforeAll(async () => {
    t = await startTestApp({
      vars: async (url) => {
        idp = await startOidcProvider({ redirectUris: [`${url}/v1/auth/callback`] });
        return { AGENTWS_OIDC_ISSUER_URL: idp.issuer, AGENTWS_OIDC_CLIENT_ID: idp.clientId, AGENTWS_OIDC_CLIENT_SECRET: idp.clientSecret };
      },
    });
    const seeded = await seedTenant(t, 'acme', [], TID);
    tenantId = seeded.tenantId;
    ownerId = seeded.ids.owner;
    owner = (await signInAs(t, { sub: ownerId, tid: tenantId, roles: ['owner'] })).access;
    for (const name of ['Platform', 'Data']) expect((await api(t, 'POST', '/v1/admin/teams', { token: owner, body: { name } })).status).toBe(201);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('is off by default: a stored mapping is not applied and the groups are ignored (SPEC.md)', async () => {
    const saved = await api(t, 'PATCH', '/v1/admin/tenant', {
      token: owner,
      body: { settings: { groupRoleMapping: { [G_ADMINS]: 'admin', [G_VIEW]: 'viewer', [G_OWNERS]: 'owner' }, groupTeamMapping: { [G_PLATFORM]: 'platform', [G_DATA]: 'Data' } } },
    });
    expect(saved.status, saved.text).toBe(200);
    // Team names are stored as the team is named (they match ignoring case).
    expect(saved.json.tenant.settings.groupTeamMapping).toEqual({ [G_PLATFORM]: 'Platform', [G_DATA]: 'Data' });
    expect(saved.json.tenant.settings.signIn).toBeUndefined();

    setPerson(person('bob', { groups: [G_ADMINS, G_PLATFORM] }));
    expect(await signIn('bob')).toEqual(['member']);
    expect(await teamsOf('bob')).toEqual([]);
  });

  it('refuses a mapping naming a team or role that does not exist, and a non-boolean switch', async () => {
    const team = await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { groupTeamMapping: { [G_DATA]: 'Nope' } } } });
    expect(team.status).toBe(400);
    expect(team.json.message).toContain('settings.groupTeamMapping');
    expect(team.json.message).toContain('Nope');
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { groupRoleMapping: { [G_DATA]: 'wizard' } } } })).status).toBe(400);
    expect((await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { signIn: { applyGroupMapping: 'yes' } } } })).status).toBe(400);
    // Nothing of the refused changes was kept.
    const now = (await api(t, 'GET', '/v1/admin/tenant', { token: owner })).json.tenant.settings;
    expect(now.groupTeamMapping).toEqual({ [G_PLATFORM]: 'Platform', [G_DATA]: 'Data' });
    expect(now.signIn).toBeUndefined();
  });

  it('when on, a first sign-in gets the roles and teams of its groups (not the default role), audited', async () => {
    const on = await api(t, 'PATCH', '/v1/admin/tenant', { token: owner, body: { settings: { signIn: { applyGroupMapping: true } } } });
    expect(on.json.tenant.settings.signIn).toEqual({ applyGroupMapping: true });

    setPerson(person('ana', { groups: [G_ADMINS, G_PLATFORM, 'some-unmapped-group'] }));
    expect(await signIn('ana')).toEqual(['admin']);
    expect(await teamsOf('ana')).toEqual(['Platform']);
    const [entry] = await audit('auth.group_sync', 'ana');
    expect(entry.details).toMatchObject({ rolesAdded: ['admin'], rolesRemoved: [], teamsAdded: ['Platform'], teamsRemoved: [] });
    expect(entry.actor).toBe('system:idp-groups');
    // The API's audit log lists it under the person too.
    const listed = await api(t, 'GET', `/v1/admin/audit-log?action=auth.group_sync&userId=${await userId('ana')}`, { token: owner });
    expect(listed.json.count).toBe(1);

    // Someone whose groups map to no role still gets the default role (nobody signs in with none).
    setPerson(person('cat', { groups: [G_DATA] }));
    expect(await signIn('cat')).toEqual(['member']);
    expect(await teamsOf('cat')).toEqual(['Data']);
  });

  it('changed groups add and remove mapped roles and teams at the next sign-in, keeping those given by hand', async () => {
    const ana = await userId('ana');
    // By hand: the admin role the mapping gave (now the admin's too) and the Data team.
    expect((await api(t, 'POST', `/v1/admin/users/${ana}/roles`, { token: owner, body: { roleId: await roleId('admin') } })).json.changed).toBe(true);
    const data = (await api(t, 'GET', '/v1/admin/teams', { token: owner })).json.teams.find((x: { name: string }) => x.name === 'Data');
    expect((await api(t, 'POST', `/v1/admin/teams/${data.id}/members`, { token: owner, body: { userId: ana } })).json.added).toBe(true);

    setPerson(person('ana', { groups: [G_VIEW] }));
    expect(await signIn('ana')).toEqual(['admin', 'viewer']);
    expect(await teamsOf('ana')).toEqual(['Data']); // Platform was the mapping's; Data is the admin's
    const [entry] = await audit('auth.group_sync', 'ana');
    expect(entry.details).toMatchObject({ rolesAdded: ['viewer'], rolesRemoved: [], teamsAdded: [], teamsRemoved: ['Platform'] });

    // An empty groups claim means "in no group": the mapped viewer role goes, the hand-given admin stays.
    setPerson(person('ana', { groups: [] }));
    expect(await signIn('ana')).toEqual(['admin']);
    expect(await teamsOf('ana')).toEqual(['Data']);

    // Without hand-given roles, a person who leaves every mapped group falls back to the default role.
    setPerson(person('cat', { groups: [G_ADMINS] }));
    expect(await signIn('cat')).toEqual(['admin']);
    setPerson(person('cat', { groups: [] }));
    expect(await signIn('cat')).toEqual(['member']);
    expect(await teamsOf('cat')).toEqual([]);
  });

  it("Entra's group overage does not fail the sign-in, removes nothing, and is audited", async () => {
    setPerson(person('dan', { groups: [G_ADMINS, G_PLATFORM] }));
    expect(await signIn('dan')).toEqual(['admin']);

    setPerson(person('dan', { groupOverage: { endpoint: GRAPH, hasgroups: true } }));
    expect(await signIn('dan')).toEqual(['admin']);
    expect(await teamsOf('dan')).toEqual(['Platform']);
    const [entry] = await audit('auth.group_overage', 'dan');
    expect(entry.details).toMatchObject({ claimSource: GRAPH, rolesAdded: [], rolesRemoved: [], teamsRemoved: [] });

    // A first sign-in under overage gets the default role.
    setPerson(person('eve', { groupOverage: { endpoint: GRAPH } }));
    expect(await signIn('eve')).toEqual(['member']);
  });

  it("never takes the owner role from the tenant's last owner", async () => {
    setPerson(person('fay', { groups: [G_OWNERS] }));
    expect(await signIn('fay')).toEqual(['owner']);
    // The seeded owner steps down: fay, whose owner role came from her group, is the last owner.
    const revoked = await api(t, 'DELETE', `/v1/admin/users/${ownerId}/roles/${await roleId('owner')}`, { token: owner });
    expect(revoked.status, revoked.text).toBe(200);

    // Out of every group: the owner role stays (she is the last owner); she also gets the default role.
    setPerson(person('fay', { groups: [] }));
    expect(await signIn('fay')).toEqual(['member', 'owner']);
    const [entry] = await audit('auth.group_sync', 'fay');
    expect(entry.details).toMatchObject({ kept: ['owner'], rolesRemoved: [] });
  });
});
