import type { Queryable } from '../../db/database.js';
import type { ProviderKind, ProviderModel } from './providers.schemas.js';

/** A tenant's model provider: where model calls go, with which (sealed) key, offering which models. */
export interface ProviderRow {
  id: string;
  tenantId: string;
  name: string;
  kind: ProviderKind;
  baseUrl: string | null;
  apiKeySealed: string | null;
  models: ProviderModel[];
  enabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

const PROVIDER = `id, tenant_id as "tenantId", name, kind, base_url as "baseUrl", api_key_sealed as "apiKeySealed", models, enabled,
  created_at as "createdAt", updated_at as "updatedAt"`;

/** All SQL of the providers table; every query names the tenant. */
export function createProvidersRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<ProviderRow[]> {
      return (await q.query<ProviderRow>(`select ${PROVIDER} from providers where tenant_id = $1 order by name`, [tenantId])).rows;
    },
    async find(q: Queryable, tenantId: string, name: string): Promise<ProviderRow | null> {
      return (await q.query<ProviderRow>(`select ${PROVIDER} from providers where tenant_id = $1 and name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    /** Null when the tenant has a provider of that name already. */
    async insert(q: Queryable, p: Omit<ProviderRow, 'id' | 'createdAt' | 'updatedAt'>): Promise<ProviderRow | null> {
      const { rows } = await q.query<ProviderRow>(
        `insert into providers (tenant_id, name, kind, base_url, api_key_sealed, models, enabled) values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant_id, name) do nothing returning ${PROVIDER}`,
        [p.tenantId, p.name, p.kind, p.baseUrl, p.apiKeySealed, JSON.stringify(p.models), p.enabled],
      );
      return rows[0] ?? null;
    },
    /** Null when the provider is gone (removed meanwhile). */
    async update(q: Queryable, tenantId: string, id: string, p: Pick<ProviderRow, 'baseUrl' | 'apiKeySealed' | 'models' | 'enabled'>): Promise<ProviderRow | null> {
      const { rows } = await q.query<ProviderRow>(
        `update providers set base_url = $3, api_key_sealed = $4, models = $5, enabled = $6, updated_at = now() where id = $1 and tenant_id = $2 returning ${PROVIDER}`,
        [id, tenantId, p.baseUrl, p.apiKeySealed, JSON.stringify(p.models), p.enabled],
      );
      return rows[0] ?? null;
    },
    async remove(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from providers where id = $1 and tenant_id = $2`, [id, tenantId]);
    },
  };
}

export type ProvidersRepo = ReturnType<typeof createProvidersRepo>;
