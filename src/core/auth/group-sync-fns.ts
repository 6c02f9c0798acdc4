/**
 * Group mapping at sign-in (opt-in, tenant setting `signIn.applyGroupMapping`): the pure rules. What the
 * identity provider says about a person's groups, and which roles and team memberships a sign-in adds
 * and removes because of it. The auth service applies the plan inside the sign-in's transaction.
 */

/** `user_roles.assigned_by` and `team_members.added_by` of what the mapping gave: only these it takes away. */
export const GROUP_SYNC_SOURCE = 'system:idp-groups';

/** The tenant settings the mapping reads (stored in `tenants.settings`). */
export interface GroupMappingSettings {
  apply: boolean;
  /** Group id or name -> role name (`groupRoleMapping`, SPEC.md's shape). */
  roles: Record<string, string>;
  /** Group id or name -> team name (`groupTeamMapping`). */
  teams: Record<string, string>;
}

/** Reads the mapping out of a tenant's settings; anything malformed counts as absent (off). */
export function groupMappingSettings(settings: Record<string, unknown> | null | undefined): GroupMappingSettings {
  const s = settings ?? {};
  const signIn = s.signIn as { applyGroupMapping?: unknown } | undefined;
  const record = (v: unknown): Record<string, string> =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== '')) : {};
  return { apply: signIn?.applyGroupMapping === true, roles: record(s.groupRoleMapping), teams: record(s.groupTeamMapping) };
}

/**
 * What the ID token (or userinfo) says about the person's groups:
 * - `groups`: the list it carries; an empty list means "in no group" (mapped roles are taken away);
 * - `overage`: Entra's group overage (more than 200 groups, or a token kind that never carries them):
 *   no `groups` claim but `_claim_names.groups` pointing at Microsoft Graph, or `hasgroups: true`. The
 *   groups are unknown, which is not the same as none;
 * - `absent`: no word about groups at all (the provider is not configured to send them).
 */
export type GroupsClaim = { kind: 'groups'; groups: string[] } | { kind: 'overage'; endpoint: string | null } | { kind: 'absent' };

export function readGroupsClaim(claims: Record<string, unknown>): GroupsClaim {
  const groups = claims.groups;
  if (Array.isArray(groups)) return { kind: 'groups', groups: groups.filter((g): g is string => typeof g === 'string' && g !== '') };
  // Some providers send a single group as a string.
  if (typeof groups === 'string' && groups) return { kind: 'groups', groups: [groups] };
  const names = claims._claim_names as Record<string, unknown> | undefined;
  const sourceName = names && typeof names === 'object' ? names.groups : undefined;
  if (typeof sourceName === 'string') {
    const sources = claims._claim_sources as Record<string, { endpoint?: unknown }> | undefined;
    const endpoint = sources?.[sourceName]?.endpoint;
    return { kind: 'overage', endpoint: typeof endpoint === 'string' ? endpoint : null };
  }
  if (claims.hasgroups === true || claims.hasgroups === 'true') return { kind: 'overage', endpoint: null };
  return { kind: 'absent' };
}

/** A role or team the person holds now, and whether the mapping gave it (else: by hand, SCIM, first sign-in). */
export interface Held {
  name: string;
  mapped: boolean;
}

export interface GroupSyncPlan {
  addRoles: string[];
  removeRoles: string[];
  addTeams: string[];
  removeTeams: string[];
}

/**
 * The changes one sign-in makes. With the groups known: the roles and teams their groups map to are
 * added; those the mapping gave earlier that no group maps to any more are removed; what was given by
 * other means is never removed. A person whom the mapping gives no role and who holds none otherwise
 * gets the default role (as the mapping's, so a later group replaces it): nobody signs in with no role.
 * With the groups unknown (overage, no claim): nothing is removed; only a person without any role gets
 * the default role. Role names match exactly; group ids and team names ignoring case (Entra's object
 * ids are GUIDs in either case; team names are unique ignoring case).
 */
export function planGroupSync(input: {
  groups: string[] | null;
  mapping: Pick<GroupMappingSettings, 'roles' | 'teams'>;
  defaultRole: string | null;
  roles: Held[];
  teams: Held[];
}): GroupSyncPlan {
  const { mapping, roles, teams, defaultRole } = input;
  if (input.groups === null) {
    return { addRoles: roles.length === 0 && defaultRole ? [defaultRole] : [], removeRoles: [], addTeams: [], removeTeams: [] };
  }
  const member = new Set(input.groups.map((g) => g.toLowerCase()));
  const mapped = (m: Record<string, string>) => [...new Set(Object.entries(m).filter(([g]) => member.has(g.toLowerCase())).map(([, v]) => v))].sort();

  const wantRoles = mapped(mapping.roles);
  const handRoles = roles.filter((r) => !r.mapped);
  if (wantRoles.length === 0 && handRoles.length === 0 && defaultRole) wantRoles.push(defaultRole);
  const heldRoles = new Set(roles.map((r) => r.name));
  const addRoles = wantRoles.filter((r) => !heldRoles.has(r));
  const removeRoles = roles.filter((r) => r.mapped && !wantRoles.includes(r.name)).map((r) => r.name).sort();

  const key = (s: string) => s.toLowerCase();
  const wantTeams = new Map(mapped(mapping.teams).map((t) => [key(t), t]));
  const heldTeams = new Set(teams.map((t) => key(t.name)));
  const addTeams = [...wantTeams.entries()].filter(([k]) => !heldTeams.has(k)).map(([, t]) => t);
  const removeTeams = teams.filter((t) => t.mapped && !wantTeams.has(key(t.name))).map((t) => t.name).sort();
  return { addRoles, removeRoles, addTeams, removeTeams };
}
