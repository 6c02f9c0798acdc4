import type { Database, Queryable, Tx } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ValidationError } from '../../kernel/errors.js';
import { publicJob, type PublicJob } from '../jobs/jobs.service.js';
import type { TenantJobRow } from '../jobs/jobs.repo.js';
import type { ProvidersRepo } from '../providers/providers.repo.js';
import { EmbeddingCallError, hasEmbeddings } from './embedding-client.js';
import type { EmbedderRow, EmbeddersRepo } from './embedders.repo.js';
import type { EmbeddingsService } from './embeddings.service.js';
import { MAX_EMBEDDING_DIMENSIONS, modelKeyOf } from './model-key.js';

/** A model id as providers name them (`text-embedding-3-small`, `nomic-embed-text:latest`, `BAAI/bge-m3`). */
const MODEL_ID = /^[^\s\p{Cc}]{1,200}$/u;

export interface EmbedderInput {
  /** The provider's name in the tenant. */
  provider: string;
  model: string;
  /** The vector length expected; checked against what the model answers. */
  dimensions?: number;
}

function publicEmbedder(e: EmbedderRow) {
  return { provider: e.provider, model: e.model, dimensions: e.dimensions, modelKey: e.modelKey, updatedBy: e.updatedBy, updatedAt: e.updatedAt };
}
export type PublicEmbedder = ReturnType<typeof publicEmbedder>;

/**
 * The tenant's embedder (admin.manage_providers, like the providers it runs on): an embeddings model on
 * one of its providers. Setting it probes the model once; a change of model re-embeds every memory
 * through a backfill job queued with the change (vectors of different models are never compared).
 * Clearing it keeps the stored vectors; search answers on full text alone until one is set again.
 */
export function createEmbeddersService(deps: {
  db: Database;
  repo: EmbeddersRepo;
  /** What the embedder's vectors are made for (the memories): how many have one of a model, and lack one. */
  memories: { countEmbedded(q: Queryable, tenantId: string, modelKey: string): Promise<number>; countPending(q: Queryable, tenantId: string, modelKey: string): Promise<number> };
  providers: Pick<ProvidersRepo, 'find'>;
  audit: AuditService;
  embeddings: Pick<EmbeddingsService, 'probe'>;
  /**
   * Queues the re-embedding of `limit` memories through the jobs API (row, queue job and audit in the
   * caller's transaction): the memories' backfill (memories/memory-indexer.ts).
   */
  queueBackfill(tx: Tx, ctx: Ctx, tenantId: string, limit: number): Promise<TenantJobRow>;
}) {
  const { db, repo, memories, audit } = deps;

  return {
    /** The embedder (null when none) and how many memories have a vector of its model. */
    async get(ctx: Ctx): Promise<{ embedder: PublicEmbedder | null; memories?: { embedded: number; pending: number } }> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const e = await repo.get(db, tenantId);
      if (!e) return { embedder: null };
      const [embedded, pending] = await Promise.all([memories.countEmbedded(db, tenantId, e.modelKey), memories.countPending(db, tenantId, e.modelKey)]);
      return { embedder: publicEmbedder(e), memories: { embedded, pending } };
    },

    /**
     * Sets the embedder. The provider must be the tenant's, enabled, and of a kind with an
     * OpenAI-compatible /embeddings endpoint; the model is probed (its dimensions learnt, or checked
     * against `dimensions`). 400 naming the field when any of that fails. Audited; on a change of model,
     * the backfill job is queued in the same transaction.
     */
    async set(ctx: Ctx, input: EmbedderInput) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      if (typeof input.model !== 'string' || !MODEL_ID.test(input.model)) {
        throw new ValidationError('model: must be the model id as the provider names it (1 to 200 characters, no spaces)', { details: { field: 'model' } });
      }
      if (input.dimensions !== undefined && (!Number.isInteger(input.dimensions) || input.dimensions < 1 || input.dimensions > MAX_EMBEDDING_DIMENSIONS)) {
        throw new ValidationError(`dimensions: must be a whole number from 1 to ${MAX_EMBEDDING_DIMENSIONS}`, { details: { field: 'dimensions' } });
      }
      const provider = await deps.providers.find(db, tenantId, input.provider);
      if (!provider) {
        throw new ValidationError(`provider: this workspace has no provider "${input.provider}"`, { details: { field: 'provider' }, hint: 'List providers with `npx aws provider list`; register the embeddings server with `npx aws provider add`.' });
      }
      if (!provider.enabled) throw new ValidationError(`provider: "${provider.name}" is disabled`, { details: { field: 'provider' }, hint: `Enable it first: \`npx aws provider update ${provider.name} --enable\`.` });
      if (!hasEmbeddings(provider.kind)) {
        throw new ValidationError(`provider: ${provider.kind} providers have no OpenAI-compatible /embeddings endpoint`, {
          details: { field: 'provider' },
          hint: 'Use an openai or openai-compatible provider (OpenAI, Azure OpenAI, Ollama, text-embeddings-inference, vLLM).',
        });
      }
      let dimensions: number;
      try {
        dimensions = await deps.embeddings.probe(tenantId, provider, input.model, ctx.actor.kind === 'user' ? ctx.actor.userId : null);
      } catch (err) {
        if (!(err instanceof EmbeddingCallError)) throw err;
        throw new ValidationError(`model: "${input.model}" on provider "${provider.name}" could not embed a test text: ${err.message}`, {
          details: { field: 'model', providerStatus: err.status },
          hint: 'Check the model id (an embeddings model, e.g. text-embedding-3-small or nomic-embed-text), the provider\'s base URL (it must serve POST <baseUrl>/embeddings) and its key.',
        });
      }
      if (input.dimensions !== undefined && input.dimensions !== dimensions) {
        throw new ValidationError(`dimensions: "${input.model}" answers ${dimensions}-dimensional vectors, not ${input.dimensions}`, { details: { field: 'dimensions', actual: dimensions } });
      }
      if (dimensions > MAX_EMBEDDING_DIMENSIONS) {
        throw new ValidationError(`model: "${input.model}" answers ${dimensions}-dimensional vectors; at most ${MAX_EMBEDDING_DIMENSIONS} dimensions are supported`, { details: { field: 'model', actual: dimensions } });
      }
      const modelKey = modelKeyOf(provider.id, input.model, dimensions);
      return db.transaction(async (tx) => {
        const previous = await repo.lockedKey(tx, tenantId);
        await repo.upsert(tx, { tenantId, providerId: provider.id, model: input.model, dimensions, modelKey, updatedBy: actorString(ctx.actor) });
        const pending = await memories.countPending(tx, tenantId, modelKey);
        // A change of model makes every stored vector useless to search: re-embed them all. The first
        // embedder does not start spending on its own: memories written before it wait for a backfill
        // someone starts (`aws memory backfill`), as SPEC.md says.
        let backfill: TenantJobRow | null = null;
        if (previous && previous !== modelKey && pending > 0) {
          backfill = await deps.queueBackfill(tx, ctx, tenantId, pending);
        }
        await audit.record(tx, ctx, {
          action: 'embedder.set',
          target: `tenant:${tenantId}`,
          details: { provider: provider.name, model: input.model, dimensions, modelKey, previous, ...(backfill ? { backfillJobId: backfill.id } : {}) },
        });
        const e = await repo.get(tx, tenantId);
        return {
          embedder: publicEmbedder(e!),
          changed: previous !== modelKey,
          /** Memories lacking a vector of this model. */
          pending,
          backfill: backfill ? (publicJob(backfill) as PublicJob) : null,
        };
      });
    },

    /** Removes the embedder (audited). Stored vectors stay; search runs on full text until one is set. */
    async clear(ctx: Ctx): Promise<{ cleared: boolean }> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const removed = await db.transaction(async (tx) => {
        const key = await repo.remove(tx, tenantId);
        if (key) await audit.record(tx, ctx, { action: 'embedder.clear', target: `tenant:${tenantId}`, details: { modelKey: key } });
        return key;
      });
      return { cleared: removed !== null };
    },
  };
}
