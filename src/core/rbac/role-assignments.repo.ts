/**
 * All SQL of `user_roles`, who holds which role. It lives with rbac rather than users.repo.ts because an
 * assignment is an authorisation fact: what it means (a permission document), who may make it (the
 * grant and last-owner rules) and the cache it invalidates are all rbac's; a user row is only its subject.
 * Other repos that show a person's roles or a role's members embed the fragments below, so the table's
 * SQL is still written here only.
 */
import type { Queryable } from '../../db/database.js';

/** SQL of the names of the roles `userId` (a column or parameter) holds, as a sorted text array. */
export const roleNamesSql = (userId: string) =>
  `coalesce((select array_agg(r.name order by r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = ${userId}), '{}')`;

/** SQL of how many people hold the role `roleId` (a column or parameter). */
export const memberCountSql = (roleId: string) => `(select count(*)::int from user_roles ur where ur.role_id = ${roleId})`;

export function createRoleAssignmentsRepo() {
  return {
    /**
     * Assigns a role unless already assigned; returns whether the assignment is new. Assigning by any other
     * means a role the sign-in's group mapping gave ('system:idp-groups') takes it over (and counts as
     * new), so the mapping never takes away a role someone also assigned by hand.
     */
    async assign(q: Queryable, a: { tenantId: string; userId: string; roleId: string; assignedBy: string }): Promise<boolean> {
      const { rowCount } = await q.query(
        `insert into user_roles (tenant_id, user_id, role_id, assigned_by) values ($1, $2, $3, $4)
         on conflict (user_id, role_id) do update set assigned_by = excluded.assigned_by
          where user_roles.assigned_by = 'system:idp-groups' and excluded.assigned_by <> 'system:idp-groups'`,
        [a.tenantId, a.userId, a.roleId, a.assignedBy],
      );
      return rowCount === 1;
    },
    /** Removes a role from a user, whoever assigned it; false when they did not hold it. */
    async unassign(q: Queryable, a: { tenantId: string; userId: string; roleId: string }): Promise<boolean> {
      const { rowCount } = await q.query(`delete from user_roles where tenant_id = $1 and user_id = $2 and role_id = $3`, [a.tenantId, a.userId, a.roleId]);
      return (rowCount ?? 0) > 0;
    },
    /** Removes a role assignment only if `assignedBy` made it (false otherwise, or when there was none). */
    async unassignFrom(q: Queryable, a: { tenantId: string; userId: string; roleId: string; assignedBy: string }): Promise<boolean> {
      const { rowCount } = await q.query(`delete from user_roles where tenant_id = $1 and user_id = $2 and role_id = $3 and assigned_by = $4`, [a.tenantId, a.userId, a.roleId, a.assignedBy]);
      return rowCount === 1;
    },
    async roleNames(q: Queryable, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ name: string }>(`select r.name from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = $1 order by r.name`, [userId]);
      return rows.map((r) => r.name);
    },
    /** A user's roles with who assigned each (the group mapping at sign-in removes only its own). */
    async rolesWithSource(q: Queryable, tenantId: string, userId: string): Promise<Array<{ roleId: string; name: string; isSystem: boolean; assignedBy: string }>> {
      const { rows } = await q.query<{ roleId: string; name: string; isSystem: boolean; assignedBy: string }>(
        `select r.id as "roleId", r.name, r.is_system as "isSystem", ur.assigned_by as "assignedBy"
           from user_roles ur join roles r on r.id = ur.role_id and r.tenant_id = ur.tenant_id
          where ur.tenant_id = $1 and ur.user_id = $2 order by r.name`,
        [tenantId, userId],
      );
      return rows;
    },
    /** Locks the tenant's owner role (serialising changes to who owns the tenant) and counts its holders. */
    async lockAndCountOwners(q: Queryable, tenantId: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(
        `with owner_role as (select id from roles where tenant_id = $1 and name = 'owner' and is_system for update)
         select count(*)::int as n from user_roles ur join owner_role o on o.id = ur.role_id where ur.tenant_id = $1`,
        [tenantId],
      );
      return rows[0].n;
    },
    /**
     * People of the tenant a role lets manage its model providers (who to ask when the workspace is not set
     * up), owners first, at most `limit`.
     */
    async providerManagers(q: Queryable, tenantId: string, limit: number): Promise<Array<{ handle: string; displayName: string; email: string }>> {
      const { rows } = await q.query<{ handle: string; displayName: string; email: string }>(
        `select u.handle, u.display_name as "displayName", u.email
           from users u
          where u.tenant_id = $1
            and exists (select 1 from user_roles ur join roles r on r.id = ur.role_id
                         where ur.user_id = u.id and r.tenant_id = $1 and (r.permissions->'admin'->>'manage_providers') = 'true')
          order by exists (select 1 from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = u.id and r.name = 'owner' and r.is_system) desc, u.created_at, u.handle
          limit $2`,
        [tenantId, limit],
      );
      return rows;
    },
  };
}

export type RoleAssignmentsRepo = ReturnType<typeof createRoleAssignmentsRepo>;
