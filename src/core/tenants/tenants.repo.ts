import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { RbacPermissions } from '../../kernel/permissions.js';

export interface TenantRow {
  id: string;
  slug: string;
  name: string;
  externalTenantId: string | null;
  settings: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

export interface RoleRow {
  id: string;
  tenantId: string;
  name: string;
  description: string;
  permissions: RbacPermissions;
  isSystem: boolean;
  createdAt: Date;
}

const TENANT_COLS = `id, slug, name, external_tenant_id as "externalTenantId", settings, created_at as "createdAt", updated_at as "updatedAt"`;
const ROLE_COLS = `id, tenant_id as "tenantId", name, description, permissions, is_system as "isSystem", created_at as "createdAt"`;

export function createTenantsRepo() {
  return {
    async findBySlug(q: Queryable, slug: string): Promise<TenantRow | null> {
      const { rows } = await q.query<TenantRow>(`select ${TENANT_COLS} from tenants where slug = $1`, [slug]);
      return rows[0] ?? null;
    },
    async findByExternalId(q: Queryable, externalId: string): Promise<TenantRow | null> {
      const { rows } = await q.query<TenantRow>(`select ${TENANT_COLS} from tenants where external_tenant_id = $1`, [externalId]);
      return rows[0] ?? null;
    },
    /** A tenant by slug or id: how operators name tenants on the command line. */
    async findByRef(q: Queryable, ref: string): Promise<TenantRow | null> {
      if (isUuid(ref)) return this.findById(q, ref);
      return this.findBySlug(q, ref.toLowerCase());
    },
    async findById(q: Queryable, id: string): Promise<TenantRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<TenantRow>(`select ${TENANT_COLS} from tenants where id = $1`, [id]);
      return rows[0] ?? null;
    },
    async list(q: Queryable): Promise<Array<TenantRow & { userCount: number }>> {
      const { rows } = await q.query<TenantRow & { userCount: number }>(
        `select ${TENANT_COLS.replace(/(^|, )(\w+)/g, '$1t.$2')},
                (select count(*)::int from users u where u.tenant_id = t.id) as "userCount"
           from tenants t order by t.created_at, t.slug`,
      );
      return rows;
    },
    /** Inserts the tenant unless its slug exists; returns the row and whether it was new. */
    async insertIfAbsent(q: Queryable, t: { slug: string; name: string; externalTenantId?: string | null }): Promise<{ tenant: TenantRow; created: boolean }> {
      const { rows } = await q.query<TenantRow>(
        `insert into tenants (slug, name, external_tenant_id) values ($1, $2, $3) on conflict (slug) do nothing returning ${TENANT_COLS}`,
        [t.slug, t.name, t.externalTenantId ?? null],
      );
      if (rows[0]) return { tenant: rows[0], created: true };
      return { tenant: (await this.findBySlug(q, t.slug))!, created: false };
    },
    /** Inserts the role unless one of that name exists in the tenant; returns whether it was new. */
    async insertRoleIfAbsent(
      q: Queryable,
      tenantId: string,
      r: { name: string; description: string; permissions: RbacPermissions; isSystem: boolean },
    ): Promise<boolean> {
      const { rowCount } = await q.query(
        `insert into roles (tenant_id, name, description, permissions, is_system) values ($1, $2, $3, $4, $5)
         on conflict (tenant_id, name) do nothing`,
        [tenantId, r.name, r.description, JSON.stringify(r.permissions), r.isSystem],
      );
      return rowCount === 1;
    },
    async setExternalId(q: Queryable, id: string, externalId: string | null): Promise<void> {
      await q.query(`update tenants set external_tenant_id = $2, updated_at = now() where id = $1`, [id, externalId]);
    },
    async updateSettings(q: Queryable, id: string, settings: Record<string, unknown>): Promise<TenantRow> {
      const { rows } = await q.query<TenantRow>(`update tenants set settings = $2, updated_at = now() where id = $1 returning ${TENANT_COLS}`, [id, settings]);
      return rows[0];
    },
    async listRoles(q: Queryable, tenantId: string): Promise<RoleRow[]> {
      const { rows } = await q.query<RoleRow>(`select ${ROLE_COLS} from roles where tenant_id = $1 order by is_system desc, created_at, name`, [tenantId]);
      return rows;
    },
    /** Replaces a role's description and permission document; null when the role is not the tenant's. */
    async updateRole(q: Queryable, tenantId: string, id: string, r: { description: string; permissions: RbacPermissions }): Promise<RoleRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<RoleRow>(`update roles set description = $3, permissions = $4, updated_at = now() where tenant_id = $1 and id = $2 returning ${ROLE_COLS}`, [tenantId, id, r.description, JSON.stringify(r.permissions)]);
      return rows[0] ?? null;
    },
    async findRoleByName(q: Queryable, tenantId: string, name: string): Promise<RoleRow | null> {
      const { rows } = await q.query<RoleRow>(`select ${ROLE_COLS} from roles where tenant_id = $1 and name = $2`, [tenantId, name]);
      return rows[0] ?? null;
    },

    /**
     * Sets one top-level key of the tenant's settings in one statement, so a concurrent change of another
     * key is not lost (retention's periods, settings.retention).
     */
    async setSetting(q: Queryable, id: string, key: string, value: unknown): Promise<TenantRow> {
      const { rows } = await q.query<TenantRow>(
        `update tenants set settings = jsonb_set(coalesce(settings, '{}'::jsonb), array[$2::text], $3::jsonb, true), updated_at = now() where id = $1 returning ${TENANT_COLS}`,
        [id, key, JSON.stringify(value)],
      );
      return rows[0];
    },
    /** Tenants whose settings hold retention periods (the daily job's round). */
    async withRetention(q: Queryable): Promise<TenantRow[]> {
      const { rows } = await q.query<TenantRow>(`select ${TENANT_COLS} from tenants where settings ? 'retention' order by created_at, id`);
      return rows;
    },
  };
}

export type TenantsRepo = ReturnType<typeof createTenantsRepo>;
