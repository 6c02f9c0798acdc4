import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import { memberCountSql } from './role-assignments.repo.js';

/** A tenant's role: a name and its permission document (the four system roles and the tenant's own). */
export interface RoleRow {
  id: string;
  tenantId: string;
  name: string;
  description: string;
  permissions: RbacPermissions;
  isSystem: boolean;
  createdAt: Date;
}

const ROLE_COLS = `id, tenant_id as "tenantId", name, description, permissions, is_system as "isSystem", created_at as "createdAt"`;

/** All SQL of the roles table (who holds a role is role-assignments.repo.ts). */
export function createRolesRepo() {
  return {
    /** Inserts the role unless one of that name exists in the tenant; returns whether it was new. */
    async insertIfAbsent(q: Queryable, tenantId: string, r: { name: string; description: string; permissions: RbacPermissions; isSystem: boolean }): Promise<boolean> {
      const { rowCount } = await q.query(
        `insert into roles (tenant_id, name, description, permissions, is_system) values ($1, $2, $3, $4, $5)
         on conflict (tenant_id, name) do nothing`,
        [tenantId, r.name, r.description, JSON.stringify(r.permissions), r.isSystem],
      );
      return rowCount === 1;
    },
    async list(q: Queryable, tenantId: string): Promise<RoleRow[]> {
      const { rows } = await q.query<RoleRow>(`select ${ROLE_COLS} from roles where tenant_id = $1 order by is_system desc, created_at, name`, [tenantId]);
      return rows;
    },
    /** The tenant's roles with how many people hold each (the admin's list). */
    async listWithMembers(q: Queryable, tenantId: string): Promise<Array<Omit<RoleRow, 'tenantId'> & { members: number }>> {
      const { rows } = await q.query<Omit<RoleRow, 'tenantId'> & { members: number }>(
        `select r.id, r.name, r.description, r.permissions, r.is_system as "isSystem", r.created_at as "createdAt",
                ${memberCountSql('r.id')} as members
           from roles r where r.tenant_id = $1 order by r.is_system desc, r.created_at, r.name`,
        [tenantId],
      );
      return rows;
    },
    /** Replaces a role's description and permission document; null when the role is not the tenant's. */
    async update(q: Queryable, tenantId: string, id: string, r: { description: string; permissions: RbacPermissions }): Promise<RoleRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<RoleRow>(`update roles set description = $3, permissions = $4, updated_at = now() where tenant_id = $1 and id = $2 returning ${ROLE_COLS}`, [tenantId, id, r.description, JSON.stringify(r.permissions)]);
      return rows[0] ?? null;
    },
    async findByName(q: Queryable, tenantId: string, name: string): Promise<RoleRow | null> {
      const { rows } = await q.query<RoleRow>(`select ${ROLE_COLS} from roles where tenant_id = $1 and name = $2`, [tenantId, name]);
      return rows[0] ?? null;
    },
  };
}

export type RolesRepo = ReturnType<typeof createRolesRepo>;
