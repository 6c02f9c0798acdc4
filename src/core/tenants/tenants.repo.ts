import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';

export interface TenantRow {
  id: string;
  slug: string;
  name: string;
  externalTenantId: string | null;
  settings: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

const TENANT_COLS = `id, slug, name, external_tenant_id as "externalTenantId", settings, created_at as "createdAt", updated_at as "updatedAt"`;

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
    /** Serialises, until the transaction ends, whatever else creates a tenant for this external id. */
    async lockExternalId(tx: Queryable, externalId: string): Promise<void> {
      await tx.query(`select pg_advisory_xact_lock(hashtext($1))`, [externalId]);
    },
    async setExternalId(q: Queryable, id: string, externalId: string | null): Promise<void> {
      await q.query(`update tenants set external_tenant_id = $2, updated_at = now() where id = $1`, [id, externalId]);
    },
    async updateSettings(q: Queryable, id: string, settings: Record<string, unknown>): Promise<TenantRow> {
      const { rows } = await q.query<TenantRow>(`update tenants set settings = $2, updated_at = now() where id = $1 returning ${TENANT_COLS}`, [id, settings]);
      return rows[0];
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
