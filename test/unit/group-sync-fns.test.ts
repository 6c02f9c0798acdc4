import { describe, expect, it } from 'vitest';
import { groupMappingSettings, planGroupSync, readGroupsClaim } from '../../src/core/auth/group-sync-fns.js';

const mapping = { roles: { 'g-admins': 'admin', 'G-VIEW': 'viewer' }, teams: { 'g-plat': 'Platform', 'g-data': 'Data' } };
const plan = (groups: string[] | null, roles: Array<[string, boolean]> = [], teams: Array<[string, boolean]> = []) =>
  planGroupSync({ groups, mapping, defaultRole: 'member', roles: roles.map(([name, mapped]) => ({ name, mapped })), teams: teams.map(([name, mapped]) => ({ name, mapped })) });

describe('reading the groups claim', () => {
  it('reads a list, an empty list (no groups), and a single string', () => {
    expect(readGroupsClaim({ groups: ['a', 'b', 3, ''] })).toEqual({ kind: 'groups', groups: ['a', 'b'] });
    expect(readGroupsClaim({ groups: [] })).toEqual({ kind: 'groups', groups: [] });
    expect(readGroupsClaim({ groups: 'a' })).toEqual({ kind: 'groups', groups: ['a'] });
  });

  it("tells Entra's overage (groups unknown) from no claim at all", () => {
    const endpoint = 'https://graph.microsoft.com/v1.0/users/u1/getMemberObjects';
    expect(readGroupsClaim({ _claim_names: { groups: 'src1' }, _claim_sources: { src1: { endpoint } } })).toEqual({ kind: 'overage', endpoint });
    expect(readGroupsClaim({ _claim_names: { groups: 'src1' } })).toEqual({ kind: 'overage', endpoint: null });
    expect(readGroupsClaim({ hasgroups: true })).toEqual({ kind: 'overage', endpoint: null });
    expect(readGroupsClaim({ _claim_names: { roles: 'src1' } })).toEqual({ kind: 'absent' });
    expect(readGroupsClaim({ sub: 'x' })).toEqual({ kind: 'absent' });
  });
});

describe('the tenant setting', () => {
  it('is off unless signIn.applyGroupMapping is exactly true', () => {
    expect(groupMappingSettings({}).apply).toBe(false);
    expect(groupMappingSettings({ groupRoleMapping: { g: 'admin' } }).apply).toBe(false);
    expect(groupMappingSettings({ signIn: { applyGroupMapping: 'true' } }).apply).toBe(false);
    expect(groupMappingSettings({ signIn: { applyGroupMapping: true }, groupRoleMapping: { g: 'admin', bad: 3 } })).toEqual({ apply: true, roles: { g: 'admin' }, teams: {} });
  });
});

describe('planning a sign-in', () => {
  it('adds what the groups map to, matching group ids ignoring case', () => {
    expect(plan(['G-ADMINS', 'g-view', 'g-plat', 'unmapped'])).toEqual({ addRoles: ['admin', 'viewer'], removeRoles: [], addTeams: ['Platform'], removeTeams: [] });
  });

  it('removes what the mapping gave when the group is gone, never what was given by hand', () => {
    expect(plan(['g-view'], [['admin', true], ['member', false]], [['Platform', true], ['Data', false]])).toEqual({
      addRoles: ['viewer'],
      removeRoles: ['admin'],
      addTeams: [],
      removeTeams: ['Platform'],
    });
  });

  it('does not add what is already held, by either means', () => {
    expect(plan(['g-admins', 'g-data'], [['admin', false]], [['data', false]])).toEqual({ addRoles: [], removeRoles: [], addTeams: [], removeTeams: [] });
  });

  it('gives the default role only to someone left with no role', () => {
    expect(plan([]).addRoles).toEqual(['member']);
    expect(plan([], [['admin', true]])).toMatchObject({ addRoles: ['member'], removeRoles: ['admin'] });
    expect(plan([], [['admin', false]]).addRoles).toEqual([]);
    // The mapping's default role goes once a group gives a role.
    expect(plan(['g-admins'], [['member', true]])).toMatchObject({ addRoles: ['admin'], removeRoles: ['member'] });
  });

  it('removes nothing when the groups are unknown (overage), and gives only a role-less person the default', () => {
    expect(plan(null, [['admin', true]], [['Platform', true]])).toEqual({ addRoles: [], removeRoles: [], addTeams: [], removeTeams: [] });
    expect(plan(null)).toEqual({ addRoles: ['member'], removeRoles: [], addTeams: [], removeTeams: [] });
  });
});
