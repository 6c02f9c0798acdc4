import type { Database, Queryable, Tx } from '../../db/database.js';
import { embeddingIndexName, embeddingIndexSql, vectorLiteral } from './model-key.js';

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

    /** Creates the partial HNSW index of a model key unless it exists (by its name, a hash of the key). */
    async ensureIndex(tx: Tx, modelKey: string, dimensions: number): Promise<boolean> {
      const { rows } = await tx.query(`select 1 from pg_class where relname = $1 and relkind = 'i'`, [embeddingIndexName(modelKey)]);
      if (rows.length) return false;
      await tx.query(embeddingIndexSql(modelKey, dimensions));
      return true;
    },

    /**
     * Drops the partial HNSW index of a model key (a large backfill builds it again afterwards). On
     * PostgreSQL concurrently: a plain DROP INDEX would lock the whole memories table.
     */
    async dropIndex(db: Database, modelKey: string): Promise<void> {
      await db.query(`drop index ${db.mode === 'postgres' ? 'concurrently ' : ''}if exists ${embeddingIndexName(modelKey)}`);
    },

    /**
     * Builds a model key's index after a large backfill. On PostgreSQL concurrently, outside a
     * transaction: a plain CREATE INDEX would block every write to memories (new memories, their
     * embeddings) for the whole build, about a minute at 100,000 rows. A concurrent build that failed
     * leaves an invalid index of that name behind: it is dropped and built again.
     */
    async rebuildIndex(db: Database, modelKey: string, dimensions: number): Promise<void> {
      if (db.mode !== 'postgres') {
        await db.query(embeddingIndexSql(modelKey, dimensions));
        return;
      }
      const name = embeddingIndexName(modelKey);
      const { rows } = await db.query<{ valid: boolean }>(`select i.indisvalid as valid from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = $1`, [name]);
      if (rows[0]?.valid) return;
      if (rows[0]) await db.query(`drop index concurrently if exists ${name}`);
      await db.query(embeddingIndexSql(modelKey, dimensions).replace(/^create index if not exists /, 'create index concurrently if not exists '));
    },

    /**
     * Up to `limit` of the tenant's memories lacking a vector of `modelKey`, oldest first: those with
     * none first (the partial index memories_unembedded_idx finds them), then those of another model.
     */
    async pending(q: Queryable, tenantId: string, modelKey: string, limit: number): Promise<MemoryToEmbed[]> {
      const cols = `id, user_id as "userId", content`;
      const missing = (
        await q.query<MemoryToEmbed>(`select ${cols} from memories where tenant_id = $1 and embedding is null order by created_at, id limit $2`, [tenantId, limit])
      ).rows;
      if (missing.length >= limit) return missing;
      const other = await q.query<MemoryToEmbed>(
        `select ${cols} from memories where tenant_id = $1 and embedding is not null and embedding_model is distinct from $2 order by created_at, id limit $3`,
        [tenantId, modelKey, limit - missing.length],
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
