import type { Database, Queryable, Tx } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue, SendOptions } from './job-queue.js';
import { JOB_STATUSES, type JobsRepo, type JobStatus, type TenantJobRow } from './jobs.repo.js';

export const JOBS_LIMIT_DEFAULT = 20;
export const JOBS_LIMIT_MAX = 100;

/** One kind of job the API starts (`POST /v1/jobs {kind, payload}`). */
export interface JobKind {
  /** The queue whose handler runs it; its data is `{ tenantId, jobId, ...data() }`. */
  queue: string;
  /** Checks the payload, naming the field at fault (`payload.limit`), and returns it normalised. */
  parse(payload: Record<string, unknown>): Record<string, unknown>;
  /** What the job needs from the tenant now (e.g. an embedder); throws when it cannot run. Extra queue data. */
  prepare?(q: Queryable, tenantId: string): Promise<Record<string, unknown>>;
  /** Whether only one job of this kind may be queued or running per tenant at a time. */
  exclusive?: boolean;
  send?: Omit<SendOptions, 'tx'>;
}

/** A job as the API shows it. */
export function publicJob(j: TenantJobRow) {
  return {
    id: j.id,
    kind: j.kind,
    status: j.status,
    payload: j.payload,
    result: j.result,
    error: j.error,
    createdBy: j.createdBy,
    createdAt: j.createdAt,
    startedAt: j.startedAt,
    finishedAt: j.finishedAt,
  };
}
export type PublicJob = ReturnType<typeof publicJob>;

/**
 * Jobs a tenant starts and watches through the API. Permission: admin.manage_providers, for starting and
 * for reading. The one kind today (`embed-memories`) spends the tenant's embedding budget on its
 * provider, which is what that permission governs (providers, their keys, the embedder); results and
 * errors can name providers and models, which the same people manage.
 */
export function createJobsService(deps: { db: Database; repo: JobsRepo; queue: JobQueue; audit: AuditService; kinds: Record<string, JobKind> }) {
  const { db, repo, queue, audit, kinds } = deps;

  function kindOf(kind: string): JobKind {
    const k = Object.hasOwn(kinds, kind) ? kinds[kind] : undefined;
    if (!k) {
      throw new ValidationError(`kind: unknown job kind "${kind}" (known: ${Object.keys(kinds).join(', ')})`, { details: { field: 'kind', known: Object.keys(kinds) } });
    }
    return k;
  }

  /**
   * Writes the job's row and queues it in the caller's transaction, audited: all three or none. The
   * caller has checked the permission. `concurrent`: even beside a running job of an exclusive kind (a
   * change of embedder queues a backfill for the new model; the older one stops by itself).
   */
  async function enqueue(tx: Tx, ctx: Ctx, tenantId: string, kind: string, payload: Record<string, unknown>, options: { concurrent?: boolean } = {}): Promise<TenantJobRow> {
    const k = kindOf(kind);
    const parsed = k.parse(payload);
    if (k.exclusive && !options.concurrent) {
      const active = await repo.activeOfKind(tx, tenantId, kind);
      if (active) {
        throw new ConflictError(`a ${kind} job is already queued or running (${active})`, {
          details: { jobId: active },
          hint: `Follow it with GET /v1/jobs/${active}, and start another when it has finished.`,
        });
      }
    }
    const extra = k.prepare ? await k.prepare(tx, tenantId) : {};
    const job = await repo.insert(tx, { tenantId, kind, payload: parsed, createdBy: actorString(ctx.actor) });
    await queue.send(k.queue, { ...extra, tenantId, jobId: job.id }, { ...k.send, tx });
    await audit.record(tx, { ...ctx, tenantId }, { action: 'job.create', target: `job:${job.id}`, details: { kind, payload: parsed } });
    return job;
  }

  return {
    enqueue,

    /** Starts a job (admin.manage_providers): 400 naming the field for an unknown kind or a bad payload. */
    async create(ctx: Ctx, input: { kind: string; payload?: unknown }): Promise<PublicJob> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      kindOf(input.kind);
      const payload = input.payload ?? {};
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
        throw new ValidationError('payload: must be an object', { details: { field: 'payload' } });
      }
      return publicJob(await db.transaction((tx) => enqueue(tx, ctx, tenantId, input.kind, payload as Record<string, unknown>)));
    },

    /** The tenant's jobs, newest first, optionally of one status (admin.manage_providers). */
    async list(ctx: Ctx, input: { status?: string; kind?: string; limit?: number }): Promise<PublicJob[]> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      if (input.status !== undefined && !JOB_STATUSES.includes(input.status as JobStatus)) {
        throw new ValidationError(`status: must be one of ${JOB_STATUSES.join(', ')}`, { details: { field: 'status' } });
      }
      const limit = input.limit ?? JOBS_LIMIT_DEFAULT;
      if (!Number.isInteger(limit) || limit < 1 || limit > JOBS_LIMIT_MAX) {
        throw new ValidationError(`limit: must be a whole number from 1 to ${JOBS_LIMIT_MAX}`, { details: { field: 'limit' } });
      }
      const rows = await repo.list(db, tenantId, { status: input.status as JobStatus | undefined, kind: input.kind, limit });
      return rows.map(publicJob);
    },

    /** One job of the tenant; another tenant's (or an unknown id) is 404. */
    async get(ctx: Ctx, id: string): Promise<PublicJob> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const job = isUuid(id) ? await repo.find(db, tenantId, id) : null;
      if (!job) throw new NotFoundError('job not found');
      return publicJob(job);
    },
  };
}
