import type { Queryable, Tx } from '../../db/database.js';

export const JOB_STATUSES = ['queued', 'running', 'completed', 'failed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** A job started through the API (tenant_jobs), as the tenant sees it. */
export interface TenantJobRow {
  id: string;
  tenantId: string;
  kind: string;
  status: JobStatus;
  payload: Record<string, unknown>;
  result: Record<string, unknown> | null;
  error: string | null;
  createdBy: string;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const JOB = `id, tenant_id as "tenantId", kind, status, payload, result, error, created_by as "createdBy", created_at as "createdAt",
  started_at as "startedAt", finished_at as "finishedAt"`;

/** Every query names the tenant. Handlers update the row they run for; a finished row never changes again. */
export function createJobsRepo() {
  return {
    async insert(tx: Tx, j: { tenantId: string; kind: string; payload: object; createdBy: string }): Promise<TenantJobRow> {
      const { rows } = await tx.query<TenantJobRow>(`insert into tenant_jobs (tenant_id, kind, payload, created_by) values ($1, $2, $3, $4) returning ${JOB}`, [
        j.tenantId,
        j.kind,
        JSON.stringify(j.payload),
        j.createdBy,
      ]);
      return rows[0];
    },
    /** The id of a job of this kind queued or running in the tenant; null when none. */
    async activeOfKind(q: Queryable, tenantId: string, kind: string): Promise<string | null> {
      return (await q.query<{ id: string }>(`select id from tenant_jobs where tenant_id = $1 and kind = $2 and status in ('queued', 'running') limit 1`, [tenantId, kind])).rows[0]?.id ?? null;
    },
    async find(q: Queryable, tenantId: string, id: string): Promise<TenantJobRow | null> {
      return (await q.query<TenantJobRow>(`select ${JOB} from tenant_jobs where tenant_id = $1 and id = $2`, [tenantId, id])).rows[0] ?? null;
    },
    async list(q: Queryable, tenantId: string, f: { status?: JobStatus; kind?: string; limit: number }): Promise<TenantJobRow[]> {
      const { rows } = await q.query<TenantJobRow>(
        `select ${JOB} from tenant_jobs where tenant_id = $1 and ($2::text is null or status = $2) and ($3::text is null or kind = $3)
          order by created_at desc, id desc limit $4`,
        [tenantId, f.status ?? null, f.kind ?? null, f.limit],
      );
      return rows;
    },
    /** Marks the job running (again, on a retry); null when it is already finished or gone. */
    async start(q: Queryable, tenantId: string, id: string): Promise<TenantJobRow | null> {
      const { rows } = await q.query<TenantJobRow>(
        `update tenant_jobs set status = 'running', started_at = coalesce(started_at, now())
          where tenant_id = $1 and id = $2 and status in ('queued', 'running') returning ${JOB}`,
        [tenantId, id],
      );
      return rows[0] ?? null;
    },
    /** Progress of a running job (the error of a failed attempt that will be retried, if any). */
    async progress(q: Queryable, tenantId: string, id: string, result: object, error: string | null = null): Promise<void> {
      await q.query(`update tenant_jobs set result = $3, error = $4 where tenant_id = $1 and id = $2 and status = 'running'`, [tenantId, id, JSON.stringify(result), error]);
    },
    async finish(q: Queryable, tenantId: string, id: string, end: { status: 'completed' | 'failed'; result: object | null; error: string | null }): Promise<void> {
      await q.query(
        `update tenant_jobs set status = $3, result = coalesce($4, result), error = $5, started_at = coalesce(started_at, now()), finished_at = now()
          where tenant_id = $1 and id = $2 and status in ('queued', 'running')`,
        [tenantId, id, end.status, end.result ? JSON.stringify(end.result) : null, end.error],
      );
    },
  };
}

export type JobsRepo = ReturnType<typeof createJobsRepo>;
