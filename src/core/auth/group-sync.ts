import type { Tx } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import type { TeamsRepo } from '../teams/teams.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { RolesRepo } from '../rbac/roles.repo.js';
import { GROUP_SYNC_SOURCE, groupMappingSettings, planGroupSync, readGroupsClaim } from './group-sync-fns.js';

export interface GroupSyncResult {
  rolesAdded: string[];
  rolesRemoved: string[];
  teamsAdded: string[];
  teamsRemoved: string[];
  /** Removals the mapping asked for but that were not made (the tenant's last owner keeps the owner role). */
  kept: string[];
}

/**
 * Applies the tenant's group mapping to a person at sign-in, inside the sign-in's transaction (so its
 * audit entries commit with it). Only called when the tenant has turned the mapping on.
 */
export function createGroupSync(deps: { roles: RolesRepo; assignments: RoleAssignmentsRepo; teams: TeamsRepo; audit: AuditService }) {
  const { roles: rolesRepo, assignments, teams, audit } = deps;

  return {
    /** Whether a tenant's settings turn the mapping on (`signIn.applyGroupMapping`, default false: SPEC.md). */
    enabled(settings: Record<string, unknown>): boolean {
      return groupMappingSettings(settings).apply;
    },

    /**
     * Adds the roles and teams the person's groups map to, removes those the mapping gave earlier and no
     * group maps to any more, and audits it (`auth.group_sync`). When the groups are unknown (Entra's
     * overage, or no groups claim at all) nothing is removed and the sign-in goes on; that is audited
     * (`auth.group_overage`, `auth.group_claim_missing`) so an admin sees why the mapping did not apply.
     */
    async apply(tx: Tx, ctx: Ctx, input: { tenantId: string; settings: Record<string, unknown>; userId: string; claims: Record<string, unknown>; defaultRole: string | null }): Promise<GroupSyncResult> {
      const { tenantId, userId } = input;
      const mapping = groupMappingSettings(input.settings);
      const claim = readGroupsClaim(input.claims);
      const heldRoles = await assignments.rolesWithSource(tx, tenantId, userId);
      const heldTeams = await teams.membershipsOf(tx, tenantId, userId);
      const plan = planGroupSync({
        groups: claim.kind === 'groups' ? claim.groups : null,
        mapping,
        defaultRole: input.defaultRole,
        roles: heldRoles.map((r) => ({ name: r.name, mapped: r.assignedBy === GROUP_SYNC_SOURCE })),
        teams: heldTeams.map((t) => ({ name: t.name, mapped: t.addedBy === GROUP_SYNC_SOURCE })),
      });

      const result: GroupSyncResult = { rolesAdded: [], rolesRemoved: [], teamsAdded: [], teamsRemoved: [], kept: [] };
      const missing: string[] = [];
      const roles = new Map((await rolesRepo.list(tx, tenantId)).map((r) => [r.name, r]));
      for (const name of plan.addRoles) {
        const role = roles.get(name);
        // Deleted since the mapping was saved: the sign-in goes on without it (and says so in the audit).
        if (!role) missing.push(`role:${name}`);
        else if (await assignments.assign(tx, { tenantId, userId, roleId: role.id, assignedBy: GROUP_SYNC_SOURCE })) result.rolesAdded.push(name);
      }
      for (const name of plan.removeRoles) {
        const held = heldRoles.find((r) => r.name === name)!;
        // The owner-count lock of user removal and role revocation: the tenant never loses its last owner.
        if (held.isSystem && name === 'owner' && (await assignments.lockAndCountOwners(tx, tenantId)) <= 1) {
          result.kept.push(name);
          continue;
        }
        if (await assignments.unassignFrom(tx, { tenantId, userId, roleId: held.roleId, assignedBy: GROUP_SYNC_SOURCE })) result.rolesRemoved.push(name);
      }
      for (const name of plan.addTeams) {
        const team = await teams.findByName(tx, tenantId, name);
        if (!team) missing.push(`team:${name}`);
        else if (await teams.addMember(tx, tenantId, team.id, userId, GROUP_SYNC_SOURCE)) result.teamsAdded.push(team.name);
      }
      for (const name of plan.removeTeams) {
        const held = heldTeams.find((t) => t.name === name)!;
        if (await teams.removeMemberAddedBy(tx, tenantId, held.teamId, userId, GROUP_SYNC_SOURCE)) result.teamsRemoved.push(name);
      }

      const changed = result.rolesAdded.length + result.rolesRemoved.length + result.teamsAdded.length + result.teamsRemoved.length > 0;
      const details = { ...result, ...(missing.length ? { missing } : {}) };
      const entry = { target: `user:${userId}`, tenantId, userId };
      if (claim.kind === 'overage') {
        await audit.record(tx, ctx, { ...entry, action: 'auth.group_overage', details: { ...details, claimSource: claim.endpoint, hint: 'groups unknown (more than the token can carry): mapped roles and teams left as they were' } });
      } else if (claim.kind === 'absent') {
        await audit.record(tx, ctx, { ...entry, action: 'auth.group_claim_missing', details: { ...details, hint: 'the identity provider sent no groups claim: mapped roles and teams left as they were' } });
      } else if (changed || result.kept.length || missing.length) {
        await audit.record(tx, ctx, { ...entry, action: 'auth.group_sync', details: { ...details, groups: claim.groups.length } });
      }
      return result;
    },
  };
}

export type GroupSync = ReturnType<typeof createGroupSync>;
