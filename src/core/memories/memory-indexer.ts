import type { Database, Tx } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { JobKind } from '../jobs/jobs.service.js';
import type { JobsRepo } from '../jobs/jobs.repo.js';
import type { EmbeddersRepo } from '../embeddings/embedders.repo.js';
import type { EmbeddingsService } from '../embeddings/embeddings.service.js';
import type { MemoriesRepo } from './memories.repo.js';

/** Queue of the job embedding one memory after it is written: data EmbedMemoryData. */
export const EMBED_MEMORY_JOB = 'embed-memory';
/** Queue of the backfill (`POST /v1/jobs {kind: 'embed-memories'}`): data BackfillData. */
export const EMBED_MEMORIES_JOB = 'embed-memories';
/**
 * Dead-letter queue of the backfill: a backfill that failed for good lands here, also when no handler
 * could record it (the worker running its last attempt was killed; the queue noticed by heartbeat).
 */
export const EMBED_MEMORIES_LOST_JOB = 'embed-memories-lost';
/** Texts per request to the provider (OpenAI takes up to 2,048; local servers like smaller batches). */
export const EMBED_BATCH = 64;
/** A backfill is tried this many times more after a failure (back-off from 1 s), then marked failed. */
export const BACKFILL_RETRY_LIMIT = 3;

export interface EmbedMemoryData {
  tenantId: string;
  memoryId: string;
}

export interface BackfillData {
  tenantId: string;
  /** The tenant_jobs row this run reports to. */
  jobId: string;
  /** The model key when the job was queued: a job queued for an older model stops (a newer backfill runs). */
  modelKey?: string;
}

/** tenant_jobs.result of a backfill, updated after every batch (in the batch's transaction). */
export interface BackfillResult {
  modelKey: string;
  /** What this job set out to embed: min(limit, memories lacking a vector of the model when it started). */
  total: number;
  /** Memories this job embedded. */
  embedded: number;
  /** Memories of the tenant still lacking a vector of the model (exact when the job ends). */
  remaining: number;
  /** Provider requests that were stored. */
  batches: number;
  /** The embedder changed while the job waited or ran; the backfill queued with that change takes over. */
  superseded?: boolean;
}

/** "user:<uuid>" → the uuid, for attributing spending; null for the system and anonymous actors. */
const userOfActor = (actor: string): string | null => (actor.startsWith('user:') && isUuid(actor.slice(5)) ? actor.slice(5) : null);

/**
 * The memories' indexer: the jobs that give each memory a vector of the tenant's embedder (one memory
 * after it is written, and the backfill), made with the embeddings service's calls.
 */
export function createMemoryIndexer(deps: {
  db: Database;
  repo: EmbeddersRepo;
  /** The memories' vectors (what lacks one, storing them). */
  memories: MemoriesRepo;
  embeddings: Pick<EmbeddingsService, 'current' | 'call'>;
  jobsRepo: JobsRepo;
  queue: JobQueue;
}) {
  const { db, repo, memories, jobsRepo } = deps;
  const { current, call } = deps.embeddings;

  return {
    /**
     * Queues the embedding of a memory just written, in the transaction that writes it (so the job
     * exists if and only if the memory does). Nothing is queued while the tenant has no embedder: the
     * backfill covers those memories. Returns whether a job was queued.
     */
    async queueMemoryEmbedding(tx: Tx, tenantId: string, memoryId: string): Promise<boolean> {
      if (!(await repo.exists(tx, tenantId))) return false;
      await deps.queue.send(EMBED_MEMORY_JOB, { tenantId, memoryId } satisfies EmbedMemoryData, { tx });
      return true;
    },

    /**
     * The `embed-memory` job: embeds one memory if it still lacks a vector of the current model
     * (deleted, embedded meanwhile, or no embedder any more: nothing to do). A provider failure throws,
     * and the queue retries; the backfill is the backstop after that.
     */
    async embedMemory(ctx: Ctx, data: EmbedMemoryData): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.memoryId)) throw new ValidationError('embed-memory: tenantId and memoryId must be UUIDs');
      const c = await current(data.tenantId);
      if (!c || !c.provider.enabled) return;
      const memory = await memories.toEmbed(db, data.tenantId, data.memoryId, c.embedder.modelKey);
      if (!memory) return;
      const [vector] = await call(data.tenantId, c.provider, c.embedder.model, [memory.content], { dimensions: c.embedder.dimensions, userId: memory.userId });
      const stored = await memories.store(db, data.tenantId, c.embedder.modelKey, [{ id: memory.id, vector }]);
      ctx.log.debug({ memoryId: memory.id, stored }, 'memory embedded');
    },

    /**
     * The `embed-memories` job (backfill): embeds up to the job's `limit` memories of the tenant lacking
     * a vector of the current model, EMBED_BATCH texts a request. Each batch's vectors and the job's
     * progress are written in one transaction, into rows that still lack them, so a worker killed midway
     * loses and duplicates nothing, and the retry resumes from the recorded progress with the budget
     * left. A failed attempt is noted on the job; the last one (retryCount = BACKFILL_RETRY_LIMIT) fails it.
     */
    async backfill(ctx: Ctx, data: BackfillData, attempt: { retryCount?: number } = {}): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.jobId)) throw new ValidationError('embed-memories: tenantId and jobId must be UUIDs');
      const { tenantId, jobId } = data;
      const job = await jobsRepo.start(db, tenantId, jobId);
      if (!job) return; // finished already (a redelivered job), or deleted with its tenant
      const limit = Number(job.payload.limit);
      const prev = job.result as unknown as BackfillResult | null;
      const finish = (status: 'completed' | 'failed', result: BackfillResult | null, error: string | null = null) => jobsRepo.finish(db, tenantId, jobId, { status, result, error });

      let c = await current(tenantId);
      if (!c) return finish('failed', prev, 'the tenant has no embedder: set one (PUT /v1/admin/embedder), then start the backfill again');
      if (!c.provider.enabled) return finish('failed', prev, `the embedder's provider "${c.provider.name}" is disabled`);
      const key = c.embedder.modelKey;
      const wanted = prev?.modelKey ?? data.modelKey ?? key;
      const superseded = (p: BackfillResult | null): BackfillResult => ({ ...(p ?? { modelKey: wanted, total: 0, embedded: 0, remaining: 0, batches: 0 }), superseded: true });
      if (key !== wanted) return finish('completed', superseded(prev));

      let progress: BackfillResult;
      if (prev?.modelKey) progress = prev;
      else {
        const pending = await memories.countPending(db, tenantId, key);
        progress = { modelKey: key, total: Math.min(limit, pending), embedded: 0, remaining: pending, batches: 0 };
        await jobsRepo.progress(db, tenantId, jobId, progress);
      }
      const by = userOfActor(job.createdBy);
      const provider = c.provider;
      const { model, dimensions } = c.embedder;
      /** The next batch and its vectors, asked while the previous batch is stored (`skip`: its ids). */
      const fetchBatch = async (size: number, skip: string[]) => {
        const batch = size > 0 ? await memories.pending(db, tenantId, key, size, skip) : [];
        return { batch, vectors: batch.length ? await call(tenantId, provider, model, batch.map((m) => m.content), { dimensions, userId: by }) : [] };
      };
      try {
        let idle = 0;
        let ahead = fetchBatch(Math.min(EMBED_BATCH, limit - progress.embedded), []);
        while (progress.embedded < limit) {
          const { batch, vectors } = await ahead;
          if (!batch.length) break;
          // Embedding the next batch overlaps storing this one: the provider's latency and the
          // database's write are not paid one after the other.
          ahead = fetchBatch(Math.min(EMBED_BATCH, limit - progress.embedded - batch.length), batch.map((m) => m.id));
          // Awaited on the next turn; until then (or if this run ends first) not an unhandled rejection.
          ahead.catch(() => {});
          const next = await db.transaction(async (tx) => {
            const stored = await memories.store(tx, tenantId, key, batch.map((m, i) => ({ id: m.id, vector: vectors[i] })));
            const p = { ...progress, embedded: progress.embedded + stored, remaining: Math.max(0, progress.remaining - stored), batches: progress.batches + 1 };
            await jobsRepo.progress(tx, tenantId, jobId, p);
            return p;
          });
          // Rows embedded by someone else meanwhile (an embed-memory job) drop out of the next selection;
          // a batch that stores nothing again and again means the selection is stuck: stop, not spin.
          idle = next.embedded === progress.embedded ? idle + 1 : 0;
          progress = next;
          if (idle >= 3) break;
          // The embedder may be changed or cleared while a long backfill runs: follow it between batches.
          c = await current(tenantId);
          if (!c || !c.provider.enabled) {
            return finish('failed', progress, c ? `the embedder's provider "${c.provider.name}" was disabled` : 'the embedder was cleared while the backfill ran');
          }
          if (c.embedder.modelKey !== key) return finish('completed', superseded(progress));
        }
        progress = { ...progress, remaining: await memories.countPending(db, tenantId, key) };
        await finish('completed', progress);
        ctx.log.info({ tenantId, jobId, embedded: progress.embedded, remaining: progress.remaining }, 'backfill finished');
      } catch (err) {
        // A batch asked ahead and not stored is dropped: its rows are still pending for the retry.
        const message = (err as Error).message;
        const retryCount = attempt.retryCount ?? 0;
        if (retryCount >= BACKFILL_RETRY_LIMIT) await finish('failed', progress, `${message} (after ${retryCount + 1} attempts)`).catch(() => {});
        else await jobsRepo.progress(db, tenantId, jobId, progress, `attempt ${retryCount + 1} failed, retrying: ${message}`).catch(() => {});
        throw err;
      }
    },

    /**
     * The dead-letter handler of the backfill: a job that failed for good but whose row still says it
     * runs (its last attempt's worker died before it could say so) is marked failed. A row already
     * finished is left alone.
     */
    async backfillLost(ctx: Ctx, data: BackfillData): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.jobId)) return;
      const job = await jobsRepo.find(db, data.tenantId, data.jobId);
      if (!job || (job.status !== 'queued' && job.status !== 'running')) return;
      const embedded = Number((job.result as { embedded?: number } | null)?.embedded ?? 0);
      await jobsRepo.finish(db, data.tenantId, data.jobId, {
        status: 'failed',
        result: null,
        error: `the backfill stopped before it finished: its last attempt ${job.error ? `failed (${job.error})` : 'lost its worker'}; the ${embedded} memories it embedded stay embedded, start it again to resume`,
      });
      ctx.log.warn({ tenantId: data.tenantId, jobId: data.jobId }, 'backfill lost: marked failed');
    },
  };
}

/** The `embed-memories` kind of the jobs API: payload `{ limit: integer >= 1 }`. */
export function embedMemoriesKind(repo: EmbeddersRepo): JobKind {
  return {
    queue: EMBED_MEMORIES_JOB,
    exclusive: true,
    parse(payload) {
      const extra = Object.keys(payload).filter((k) => k !== 'limit');
      if (extra.length) throw new ValidationError(`payload.${extra[0]}: unknown field (embed-memories takes { limit })`, { details: { field: `payload.${extra[0]}` } });
      const { limit } = payload;
      if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
        throw new ValidationError('payload.limit: must be a whole number of at least 1 (e.g. 500)', { details: { field: 'payload.limit' } });
      }
      return { limit };
    },
    async prepare(q, tenantId) {
      const e = await repo.get(q, tenantId);
      if (!e) {
        // 409: the request is fine, the workspace is not ready for it (like runtime_not_ready).
        throw new ConflictError('embed-memories needs an embedder, and this workspace has none', {
          code: 'no_embedder',
          hint: 'Set one first: PUT /v1/admin/embedder, or `npx aws embedder set --provider <name> --model <model>`.',
        });
      }
      return { modelKey: e.modelKey } satisfies Partial<BackfillData>;
    },
    // A long backfill keeps its claim by heartbeat: a worker that dies is noticed within a minute and
    // the job retried (resuming), while a healthy one may run for hours.
    send: { retryLimit: BACKFILL_RETRY_LIMIT, heartbeatSeconds: 30, expireInSeconds: 6 * 3600, deadLetter: EMBED_MEMORIES_LOST_JOB },
  };
}
