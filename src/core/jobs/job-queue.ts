import type { Queryable } from '../../db/database.js';
import type { Ctx } from '../context.js';

/** The core's view of the job queue (pg-boss behind it, see src/jobs/). */
export interface JobQueue {
  /**
   * Enqueues a job. Pass the transaction of the state change that causes the job, so that the job
   * exists if and only if that change commits.
   */
  send(name: string, data: object, options?: { tx?: Queryable; singletonKey?: string; retryLimit?: number }): Promise<string>;
}

/** A job handler: a thin adapter that calls one core service method. */
export type JobHandler = (ctx: Ctx, data: any, job: { id: string; name: string }) => Promise<void>;

export type JobHandlers = Record<string, JobHandler>;
