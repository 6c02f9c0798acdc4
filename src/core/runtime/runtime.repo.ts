import type { Queryable } from '../../db/database.js';
import type { ProviderKind, ProviderModel } from './runtime.schemas.js';

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

export interface AppliedState {
  defaultModel: string;
  providers: string[];
}

export interface RuntimeSettingsRow {
  tenantId: string;
  defaultModel: string | null;
  applied: AppliedState | null;
  appliedAt: Date | null;
  appliedBy: string | null;
  updatedAt: Date;
}

const PROVIDER = `id, tenant_id as "tenantId", name, kind, base_url as "baseUrl", api_key_sealed as "apiKeySealed", models, enabled,
  created_at as "createdAt", updated_at as "updatedAt"`;
const SETTINGS = `tenant_id as "tenantId", default_model as "defaultModel", applied, applied_at as "appliedAt", applied_by as "appliedBy", updated_at as "updatedAt"`;

export function createRuntimeRepo() {
  return {
    async listProviders(q: Queryable, tenantId: string): Promise<ProviderRow[]> {
      return (await q.query<ProviderRow>(`select ${PROVIDER} from providers where tenant_id = $1 order by name`, [tenantId])).rows;
    },
    async findProvider(q: Queryable, tenantId: string, name: string): Promise<ProviderRow | null> {
      return (await q.query<ProviderRow>(`select ${PROVIDER} from providers where tenant_id = $1 and name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    async insertProvider(q: Queryable, p: Omit<ProviderRow, 'id' | 'createdAt' | 'updatedAt'>): Promise<ProviderRow> {
      const { rows } = await q.query<ProviderRow>(
        `insert into providers (tenant_id, name, kind, base_url, api_key_sealed, models, enabled) values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant_id, name) do nothing returning ${PROVIDER}`,
        [p.tenantId, p.name, p.kind, p.baseUrl, p.apiKeySealed, JSON.stringify(p.models), p.enabled],
      );
      return rows[0] ?? null!;
    },
    /** Null when the provider is gone (removed meanwhile). */
    async updateProvider(q: Queryable, tenantId: string, id: string, p: Pick<ProviderRow, 'baseUrl' | 'apiKeySealed' | 'models' | 'enabled'>): Promise<ProviderRow | null> {
      const { rows } = await q.query<ProviderRow>(
        `update providers set base_url = $3, api_key_sealed = $4, models = $5, enabled = $6, updated_at = now() where id = $1 and tenant_id = $2 returning ${PROVIDER}`,
        [id, tenantId, p.baseUrl, p.apiKeySealed, JSON.stringify(p.models), p.enabled],
      );
      return rows[0] ?? null;
    },
    async deleteProvider(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from providers where id = $1 and tenant_id = $2`, [id, tenantId]);
    },
    /** Every tenant's providers, for building the runtime's one global configuration. */
    async allProviders(q: Queryable): Promise<ProviderRow[]> {
      return (await q.query<ProviderRow>(`select ${PROVIDER} from providers order by tenant_id, name`)).rows;
    },
    async settings(q: Queryable, tenantId: string): Promise<RuntimeSettingsRow | null> {
      return (await q.query<RuntimeSettingsRow>(`select ${SETTINGS} from runtime_settings where tenant_id = $1`, [tenantId])).rows[0] ?? null;
    },
    async allApplied(q: Queryable): Promise<RuntimeSettingsRow[]> {
      return (await q.query<RuntimeSettingsRow>(`select ${SETTINGS} from runtime_settings where applied is not null`)).rows;
    },
    async setDefaultModel(q: Queryable, tenantId: string, model: string | null): Promise<void> {
      await q.query(
        `insert into runtime_settings (tenant_id, default_model) values ($1, $2)
         on conflict (tenant_id) do update set default_model = excluded.default_model, updated_at = now()`,
        [tenantId, model],
      );
    },
    async setApplied(q: Queryable, tenantId: string, applied: AppliedState, by: string): Promise<void> {
      await q.query(
        `insert into runtime_settings (tenant_id, default_model, applied, applied_at, applied_by) values ($1, $2, $3, now(), $4)
         on conflict (tenant_id) do update set default_model = excluded.default_model, applied = excluded.applied, applied_at = now(), applied_by = excluded.applied_by, updated_at = now()`,
        [tenantId, applied.defaultModel, JSON.stringify(applied), by],
      );
    },
    /** Where the managed runtime was recorded to listen (by the `aws serve` that started it), if anywhere. */
    async endpoint(q: Queryable): Promise<{ url: string; passwordSealed: string; pid: number | null } | null> {
      const { rows } = await q.query<{ url: string; passwordSealed: string; pid: number | null }>(`select url, password_sealed as "passwordSealed", pid from runtime_endpoint where id = 1`);
      return rows[0] ?? null;
    },
    /** Forgets the record of a runtime that stopped, unless another one has been recorded since. */
    async clearEndpoint(q: Queryable, pid: number): Promise<void> {
      await q.query(`delete from runtime_endpoint where id = 1 and pid = $1`, [pid]);
    },
    async publishEndpoint(q: Queryable, e: { url: string; passwordSealed: string; pid: number | null }): Promise<void> {
      await q.query(
        `insert into runtime_endpoint (id, url, password_sealed, pid, started_at) values (1, $1, $2, $3, now())
         on conflict (id) do update set url = excluded.url, password_sealed = excluded.password_sealed, pid = excluded.pid, started_at = now()`,
        [e.url, e.passwordSealed, e.pid],
      );
    },
  };
}

export type RuntimeRepo = ReturnType<typeof createRuntimeRepo>;
