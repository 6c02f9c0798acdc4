import type { Queryable, Tx } from '../../db/database.js';

export interface EmbedderRow {
  tenantId: string;
  providerId: string;
  /** The provider's name (joined), as the tenant refers to it. */
  provider: string;
  model: string;
  dimensions: number;
  modelKey: string;
  updatedBy: string;
  updatedAt: Date;
}

const EMBEDDER = `e.tenant_id as "tenantId", e.provider_id as "providerId", p.name as provider, e.model, e.dimensions, e.model_key as "modelKey",
  e.updated_by as "updatedBy", e.updated_at as "updatedAt"`;

/** All SQL of memory_embedders; every query names the tenant. The memories' vectors are memories.repo.ts's. */
export function createEmbeddersRepo() {
  return {
    async get(q: Queryable, tenantId: string): Promise<EmbedderRow | null> {
      const { rows } = await q.query<EmbedderRow>(`select ${EMBEDDER} from memory_embedders e join providers p on p.id = e.provider_id and p.tenant_id = e.tenant_id where e.tenant_id = $1`, [tenantId]);
      return rows[0] ?? null;
    },
    /** The tenant's current model key, read in the caller's transaction (locks the row until it ends). */
    async lockedKey(tx: Tx, tenantId: string): Promise<string | null> {
      const { rows } = await tx.query<{ modelKey: string }>(`select model_key as "modelKey" from memory_embedders where tenant_id = $1 for update`, [tenantId]);
      return rows[0]?.modelKey ?? null;
    },
    async upsert(tx: Tx, e: { tenantId: string; providerId: string; model: string; dimensions: number; modelKey: string; updatedBy: string }): Promise<void> {
      await tx.query(
        `insert into memory_embedders (tenant_id, provider_id, model, dimensions, model_key, updated_by) values ($1, $2, $3, $4, $5, $6)
         on conflict (tenant_id) do update set provider_id = excluded.provider_id, model = excluded.model, dimensions = excluded.dimensions,
           model_key = excluded.model_key, updated_by = excluded.updated_by, updated_at = now()`,
        [e.tenantId, e.providerId, e.model, e.dimensions, e.modelKey, e.updatedBy],
      );
    },
    /** The removed embedder's key; null when there was none. */
    async remove(tx: Tx, tenantId: string): Promise<string | null> {
      const { rows } = await tx.query<{ modelKey: string }>(`delete from memory_embedders where tenant_id = $1 returning model_key as "modelKey"`, [tenantId]);
      return rows[0]?.modelKey ?? null;
    },
    async exists(q: Queryable, tenantId: string): Promise<boolean> {
      return (await q.query(`select 1 from memory_embedders where tenant_id = $1`, [tenantId])).rows.length > 0;
    },

  };
}

export type EmbeddersRepo = ReturnType<typeof createEmbeddersRepo>;
