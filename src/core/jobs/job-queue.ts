import type { Tx } from '../../db/database.js';
import type { Ctx } from '../../kernel/context.js';

export interface SendOptions {
  tx?: Tx;
  singletonKey?: string;
  retryLimit?: number;
  /** Seconds between retries (doubling with back-off). */
  retryDelay?: number;
  /** A job still active after this long is taken to have lost its worker and is retried. */
  expireInSeconds?: number;
  /** Seconds before the job may start (a turn waiting for a free runtime). */
  startAfterSeconds?: number;
  /**
   * The worker refreshes the job's claim this often (pg-boss does it while the handler runs); a job not
   * refreshed for this long lost its worker and is retried. For long jobs, with a large expireInSeconds.
   */
  heartbeatSeconds?: number;
  /** A queue that gets the job once it has failed for good (its last retry failed, or its worker died). */
  deadLetter?: string;
}

/** The core's view of the job queue (pg-boss behind it, see src/jobs/). */
export interface JobQueue {
  /**
   * Enqueues a job. Pass the transaction of the state change that causes the job, so that the job
   * exists if and only if that change commits.
   */
  send(name: string, data: object, options?: SendOptions): Promise<string>;
}

/** What the job queue holds, for /metrics (a separate port: services that send jobs need none of it). */
export interface JobQueueStats {
  /** How many jobs each queue holds in each state, counted in the queue's own tables. */
  stats(): Promise<QueueStats>;
}

/**
 * The jobs being worked on, for finding those whose worker died (the turn runner's recovery): the core
 * decides whose they were; the queue takes one back from its worker.
 */
export interface JobRecovery {
  /** The jobs of a queue being worked on now (state active), oldest first. */
  activeJobs(name: string): Promise<Array<{ id: string; data: unknown; startedAt: Date }>>;
  /**
   * Takes a job away from its worker (cancelled: a worker that still runs cannot complete it): true when
   * it was still queued or being worked on, in `tx`, so the caller queues its replacement in the same
   * transaction.
   */
  takeBack(name: string, id: string, tx: Tx): Promise<boolean>;
}

/**
 * The job states stats() counts: waiting (created), waiting to be retried (retry), running (active) and
 * failed for good (failed, kept a week). Completed and cancelled jobs (kept a week too) are not counted:
 * there are many of them, and no index to count them by.
 */
export const QUEUE_STATES = ['created', 'retry', 'active', 'failed'] as const;

/** The job queue's state as counted at one moment. */
export interface QueueStats {
  /** Jobs per queue and state (QUEUE_STATES). */
  counts: Array<{ queue: string; state: string; count: number }>;
  /** Per queue with a job ready to run that no worker has taken: how long the oldest has waited, in seconds. */
  oldestWaiting: Array<{ queue: string; seconds: number }>;
}

/**
 * Published (after commit) whenever a job is enqueued, so workers fetch it at once instead of at their
 * next poll; polling remains as a slow backstop (retries, missed events).
 */
export const JOBS_ENQUEUED = 'jobs.enqueued';

/** `send` with a singleton key whose job is still pending: the job is queued already (the same cause heard twice). */
export class JobAlreadyQueuedError extends Error {
  constructor(name: string) {
    super(`job ${name} was not queued (a singleton job with the same key is pending)`);
  }
}

/** A job handler: a thin adapter that calls one core service method. What it returns is logged with the job. */
type JobHandler = (ctx: Ctx, data: any, job: JobInfo) => Promise<unknown>;

export interface JobInfo {
  id: string;
  name: string;
  /** Earlier attempts of this job (0 on the first): a handler can tell its last attempt (retryLimit). */
  retryCount?: number;
}

export type JobHandlers = Record<string, JobHandler>;
