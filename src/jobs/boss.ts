import PgBoss from 'pg-boss';
import type { Database, Queryable } from '../db/database.js';
import type { EventBus } from '../core/events.js';
import { JOBS_ENQUEUED, type JobQueue } from '../core/jobs/job-queue.js';
import type { Logger } from '../core/logger.js';

export interface BossOptions {
  /** Run pg-boss maintenance (expiry, retention, archive). Only worker processes do. */
  supervise: boolean;
}

/**
 * pg-boss over the same database as everything else (schema `pgboss`). It keeps a small pool of its own:
 * jobs sent inside a service transaction go through that transaction instead (see createJobQueue).
 */
export function createBoss(db: Database, log: Logger, options: BossOptions): PgBoss {
  const boss = new PgBoss({
    ...(db.connection as PgBoss.DatabaseOptions),
    max: db.mode === 'embedded' ? 2 : 4,
    application_name: 'agentws-jobs',
    supervise: options.supervise,
    schedule: options.supervise,
    migrate: true,
    retryLimit: 3,
    retryBackoff: true,
    // Completed jobs are kept a week for `GET /v1/jobs`, then pg-boss archives and deletes them.
    retentionDays: 7,
    // Maintenance is what notices a job whose worker died (active past its expireInSeconds) and
    // retries it; the default 2 minutes would leave a crashed agent turn hanging that much longer.
    maintenanceIntervalSeconds: 15,
  });
  boss.on('error', (err) => log.error({ err: err.message }, 'job queue error'));
  return boss;
}

/** Creates every queue the core serves (idempotent; run by `aws migrate` and at start-up). */
export async function ensureQueues(boss: PgBoss, names: string[]): Promise<void> {
  for (const name of names) await boss.createQueue(name);
}

/**
 * The core's JobQueue over pg-boss: a job sent with a transaction commits or rolls back with it, and
 * workers hear of it through the event bus once it is committed.
 */
export function createJobQueue(boss: PgBoss, bus: EventBus): JobQueue {
  const inTx = (tx: Queryable): PgBoss.Db => ({
    executeSql: (text, values) => tx.query(text, values),
  });
  return {
    async send(name, data, options = {}) {
      const id = await boss.send(name, data, {
        ...(options.tx ? { db: inTx(options.tx) } : {}),
        ...(options.singletonKey ? { singletonKey: options.singletonKey } : {}),
        ...(options.retryLimit !== undefined ? { retryLimit: options.retryLimit } : {}),
        ...(options.retryDelay !== undefined ? { retryDelay: options.retryDelay } : {}),
        ...(options.expireInSeconds !== undefined ? { expireInSeconds: options.expireInSeconds } : {}),
      });
      if (!id) throw new Error(`job ${name} was not queued (a singleton job with the same key is pending)`);
      await bus.publish(JOBS_ENQUEUED, { name }, options.tx);
      return id;
    },
  };
}
