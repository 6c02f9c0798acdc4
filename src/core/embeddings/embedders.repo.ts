import type { Queryable, Tx } from '../../db/database.js';
import { vectorLiteral } from './model-key.js';

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

/** A memory still lacking a vector of the current model. */
export interface MemoryToEmbed {
  id: string;
  userId: string;
  content: string;
}

const EMBEDDER = `e.tenant_id as "tenantId", e.provider_id as "providerId", p.name as provider, e.model, e.dimensions, e.model_key as "modelKey",
  e.updated_by as "updatedBy", e.updated_at as "updatedAt"`;

/** Every query names the tenant: memories and embedders of one tenant never meet another's. */
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

    /**
     * Up to `limit` of the tenant's memories lacking a vector of `modelKey`, oldest first: those with
     * none first (the partial index memories_unembedded_idx finds them), then those of another model.
     * `skip`: ids already being embedded (the batch in flight), left out.
     */
    async pending(q: Queryable, tenantId: string, modelKey: string, limit: number, skip: string[] = []): Promise<MemoryToEmbed[]> {
      const cols = `id, user_id as "userId", content`;
      const missing = (
        await q.query<MemoryToEmbed>(`select ${cols} from memories where tenant_id = $1 and embedding is null and id <> all($3::uuid[]) order by created_at, id limit $2`, [
          tenantId,
          limit,
          skip,
        ])
      ).rows;
      if (missing.length >= limit) return missing;
      const other = await q.query<MemoryToEmbed>(
        `select ${cols} from memories where tenant_id = $1 and embedding is not null and embedding_model is distinct from $2 and id <> all($4::uuid[]) order by created_at, id limit $3`,
        [tenantId, modelKey, limit - missing.length, skip],
      );
      return [...missing, ...other.rows];
    },
    /** How many of the tenant's memories lack a vector of `modelKey`. */
    async countPending(q: Queryable, tenantId: string, modelKey: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding_model is distinct from $2`, [tenantId, modelKey]);
      return rows[0].n;
    },
    async countEmbedded(q: Queryable, tenantId: string, modelKey: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding_model = $2`, [tenantId, modelKey]);
      return rows[0].n;
    },
    /** One memory, if it still lacks a vector of `modelKey`. */
    async toEmbed(q: Queryable, tenantId: string, memoryId: string, modelKey: string): Promise<MemoryToEmbed | null> {
      const { rows } = await q.query<MemoryToEmbed>(
        `select id, user_id as "userId", content from memories where tenant_id = $1 and id = $2 and embedding_model is distinct from $3`,
        [tenantId, memoryId, modelKey],
      );
      return rows[0] ?? null;
    },
    /**
     * Stores vectors of `modelKey`, only into rows that still lack one: a batch written twice (a retried
     * job, an embed-memory job racing the backfill) changes nothing the second time. Returns how many
     * rows it wrote.
     */
    async store(q: Queryable, tenantId: string, modelKey: string, items: Array<{ id: string; vector: number[] }>): Promise<number> {
      if (!items.length) return 0;
      const { rowCount } = await q.query(
        `update memories m set embedding = v.e::vector, embedding_model = $2, embedded_at = now()
           from unnest($3::uuid[], $4::text[]) as v(id, e)
          where m.id = v.id and m.tenant_id = $1 and m.embedding_model is distinct from $2`,
        [tenantId, modelKey, items.map((i) => i.id), items.map((i) => vectorLiteral(i.vector))],
      );
      return rowCount ?? 0;
    },
  };
}

export type EmbeddersRepo = ReturnType<typeof createEmbeddersRepo>;
