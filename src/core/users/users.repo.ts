import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';

export interface UserRow {
  id: string;
  tenantId: string;
  handle: string;
  email: string;
  displayName: string;
  /** The identity provider's subject once the user has signed in; null for users made by the CLI. */
  externalSubject: string | null;
  createdAt: Date;
  /** When SCIM deactivated the user (null: active); a deactivated user cannot authenticate. */
  deactivatedAt: Date | null;
  /** The identity provider's SCIM externalId (not the OIDC subject); null unless provisioned by SCIM. */
  scimExternalId: string | null;
  /** Created or taken over by the tenant's identity provider through SCIM. */
  scimManaged: boolean;
  givenName: string;
  familyName: string;
}

const USER_COLS = `id, tenant_id as "tenantId", handle, email, display_name as "displayName", external_subject as "externalSubject", created_at as "createdAt", deactivated_at as "deactivatedAt", scim_external_id as "scimExternalId", scim_managed as "scimManaged", given_name as "givenName", family_name as "familyName"`;

export function createUsersRepo() {
  return {
    async findByEmail(q: Queryable, tenantId: string, email: string): Promise<UserRow | null> {
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and lower(email) = lower($2)`, [tenantId, email]);
      return rows[0] ?? null;
    },
    async findById(q: Queryable, tenantId: string, id: string): Promise<UserRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and id = $2`, [tenantId, id]);
      return rows[0] ?? null;
    },
    /** A user by id, email or handle: how people name users on the command line. */
    async findByRef(q: Queryable, tenantId: string, ref: string): Promise<UserRow | null> {
      if (isUuid(ref)) return this.findById(q, tenantId, ref);
      if (ref.includes('@')) return this.findByEmail(q, tenantId, ref);
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and handle = lower($2)`, [tenantId, ref]);
      return rows[0] ?? null;
    },
    async findBySubject(q: Queryable, tenantId: string, subject: string): Promise<UserRow | null> {
      const { rows } = await q.query<UserRow>(`select ${USER_COLS} from users where tenant_id = $1 and external_subject = $2`, [tenantId, subject]);
      return rows[0] ?? null;
    },
    async list(q: Queryable, tenantId: string): Promise<Array<UserRow & { roles: string[] }>> {
      const { rows } = await q.query<UserRow & { roles: string[] }>(
        `select ${USER_COLS.replace(/(^|, )(\w+)/g, '$1u.$2')},
                coalesce((select array_agg(r.name order by r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = u.id), '{}') as roles
           from users u where u.tenant_id = $1 order by u.created_at, u.handle`,
        [tenantId],
      );
      return rows;
    },
    async insert(q: Queryable, u: { tenantId: string; handle: string; email: string; displayName: string; externalSubject?: string | null }): Promise<UserRow> {
      const { rows } = await q.query<UserRow>(
        `insert into users (tenant_id, handle, email, display_name, external_subject) values ($1, $2, $3, $4, $5) returning ${USER_COLS}`,
        [u.tenantId, u.handle, u.email, u.displayName, u.externalSubject ?? null],
      );
      return rows[0];
    },
    /** Refreshes what the identity provider says about a user at each sign-in. */
    async updateProfile(q: Queryable, id: string, p: { email: string; displayName: string; externalSubject: string }): Promise<UserRow> {
      const { rows } = await q.query<UserRow>(
        `update users set email = $2, display_name = $3, external_subject = $4, updated_at = now() where id = $1 returning ${USER_COLS}`,
        [id, p.email, p.displayName, p.externalSubject],
      );
      return rows[0];
    },
    async handleTaken(q: Queryable, tenantId: string, handle: string): Promise<boolean> {
      const { rowCount } = await q.query(`select 1 from users where tenant_id = $1 and handle = $2`, [tenantId, handle]);
      return rowCount === 1;
    },
    /**
     * Assigns a role unless already assigned; returns whether the assignment is new. Assigning by any other
     * means a role the sign-in's group mapping gave ('system:idp-groups') takes it over (and counts as
     * new), so the mapping never takes away a role someone also assigned by hand.
     */
    async assignRole(q: Queryable, a: { tenantId: string; userId: string; roleId: string; assignedBy: string }): Promise<boolean> {
      const { rowCount } = await q.query(
        `insert into user_roles (tenant_id, user_id, role_id, assigned_by) values ($1, $2, $3, $4)
         on conflict (user_id, role_id) do update set assigned_by = excluded.assigned_by
          where user_roles.assigned_by = 'system:idp-groups' and excluded.assigned_by <> 'system:idp-groups'`,
        [a.tenantId, a.userId, a.roleId, a.assignedBy],
      );
      return rowCount === 1;
    },
    /** Deletes a user; roles, sign-ins and sessions go with it (foreign keys cascade). */
    async remove(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from users where tenant_id = $1 and id = $2`, [tenantId, id]);
    },
    /** Ids of the gateways whose service user this is (they act as it for paired chat users). */
    async gatewaysServedBy(q: Queryable, tenantId: string, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ id: string }>(`select id from gateways where tenant_id = $1 and service_user_id = $2`, [tenantId, userId]);
      return rows.map((r) => r.id);
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
    /** Removes a role assignment only if `assignedBy` made it (false otherwise, or when there was none). */
    async unassignRoleFrom(q: Queryable, a: { tenantId: string; userId: string; roleId: string; assignedBy: string }): Promise<boolean> {
      const { rowCount } = await q.query(`delete from user_roles where tenant_id = $1 and user_id = $2 and role_id = $3 and assigned_by = $4`, [a.tenantId, a.userId, a.roleId, a.assignedBy]);
      return rowCount === 1;
    },
    async roleNames(q: Queryable, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ name: string }>(
        `select r.name from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = $1 order by r.name`,
        [userId],
      );
      return rows.map((r) => r.name);
    },
  };
}

export type UsersRepo = ReturnType<typeof createUsersRepo>;
