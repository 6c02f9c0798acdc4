import type { Tx } from '../../db/database.js';
import { ConflictError, RateLimitedError } from '../../kernel/errors.js';
import type { EmbeddersRepo } from '../embeddings/embedders.repo.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { MemoriesRepo, MemoryRow } from './memories.repo.js';
import { writeRefusal, type MemoryWriteLimits } from './memory-fns.js';
import { EMBED_MEMORY_JOB } from './memory-indexer.js';

/** The user a runtime acts for (the agent's memories are that user's). */
export interface MemoryOwner {
  tenantId: string;
  userId: string;
}

/** Defaults of AGENTWS_MEMORY_WRITES_PER_MINUTE and AGENTWS_MEMORY_QUOTA (see config.schema.ts). */
const MEMORY_WRITE_LIMITS_DEFAULT: MemoryWriteLimits = { writesPerMinute: 30, quota: 2000 };

/** What every write of a memory does in its transaction, whether a person or their agent writes it: the limits, then the embedding. */
export function createMemoryWrites(deps: {
  repo: MemoriesRepo;
  /** Whether the tenant has an embedder: then every new memory gets an embedding job. */
  embedders: Pick<EmbeddersRepo, 'exists'>;
  queue: JobQueue;
  /** Per-user write limits; absent: the defaults. */
  limits?: MemoryWriteLimits;
}) {
  const limits = deps.limits ?? MEMORY_WRITE_LIMITS_DEFAULT;
  return {
    /**
     * The per-user write limits, checked in the writing transaction under the user's lock: the rate (API
     * writes only: the agent's saves have their own limit, see agent-egress.ts) and the quota (every memory
     * the user keeps, whoever wrote it). 429 with Retry-After, 409 with the figures.
     */
    async checkWriteLimits(tx: Tx, owner: MemoryOwner, via: 'api' | 'agent'): Promise<void> {
      const state = await deps.repo.lockedWriteState(tx, owner.tenantId, owner.userId, { rateWindow: via === 'api' });
      const refusal = writeRefusal(state, limits);
      if (refusal?.reason === 'rate') {
        throw new RateLimitedError(`too many memories written: at most ${refusal.limit} a minute; try again in ${refusal.retryAfterSeconds} s`, {
          details: { limit: refusal.limit, windowSeconds: 60, retryAfterSeconds: refusal.retryAfterSeconds },
          headers: { 'retry-after': String(refusal.retryAfterSeconds) },
        });
      }
      if (refusal?.reason === 'quota') {
        throw new ConflictError(`memory quota reached: you keep ${refusal.memories} memories, the quota is ${refusal.quota} a person`, {
          code: 'memory_quota_exceeded',
          details: { memories: refusal.memories, quota: refusal.quota },
          hint: 'Delete memories you no longer need (DELETE /v1/memories/:id), or ask the operator to raise AGENTWS_MEMORY_QUOTA.',
        });
      }
    },

    /**
     * Queues the new memory's embedding in its own transaction, when the tenant has an embedder (data
     * `{ tenantId, memoryId }`); the job's handler is the memories' indexer (memory-indexer.ts).
     */
    async queueEmbedding(tx: Tx, m: MemoryRow): Promise<void> {
      if (!(await deps.embedders.exists(tx, m.tenantId))) return;
      await deps.queue.send(EMBED_MEMORY_JOB, { tenantId: m.tenantId, memoryId: m.id }, { tx, singletonKey: `embed-memory:${m.id}` });
    },
  };
}
