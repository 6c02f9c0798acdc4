import { PgBoss, type DatabaseOptions, type Db, type Queue } from 'pg-boss';
import type { Database, Queryable } from '../db/database.js';
import type { EventBus } from '../kernel/events.js';
import { JobAlreadyQueuedError, JOBS_ENQUEUED, QUEUE_STATES, type JobQueue, type JobQueueStats, type JobRecovery, type QueueStats } from '../core/jobs/job-queue.js';
import type { Logger } from '../kernel/logger.js';

export interface BossOptions {
  /** Run pg-boss supervision (expiry of jobs whose worker died, deletion of old jobs). Only worker processes do. */
  supervise: boolean;
}

const DAY_S = 24 * 60 * 60;
/** pg-boss's schema (its default; createBoss does not change it). */
const BOSS_SCHEMA = 'pgboss';

/**
 * What every queue starts with; a job's send options override them. pg-boss 11 moved these from the
 * constructor to the queue, so they are the settings pg-boss 10 applied to every job from the constructor.
 */
export const QUEUE_DEFAULTS = {
  retryLimit: 3,
  // Back-off doubles the delay from 1 s (pg-boss 10 raised a 0 delay to 1 s when backing off).
  retryDelay: 1,
  retryBackoff: true,
  // A job still queued after a week is dropped; a finished one is kept a week for `GET /v1/jobs`.
  retentionSeconds: 7 * DAY_S,
  deleteAfterSeconds: 7 * DAY_S,
} satisfies Omit<Queue, 'name'>;

/**
 * pg-boss over the same database as everything else (schema `pgboss`). It keeps a small pool of its own:
 * jobs sent inside a service transaction go through that transaction instead (see createJobQueue).
 */
export function createBoss(db: Database, log: Logger, options: BossOptions): PgBoss {
  const boss = new PgBoss({
    ...(db.connection as DatabaseOptions),
    max: db.mode === 'embedded' ? 2 : 4,
    application_name: 'agentws-jobs',
    supervise: options.supervise,
    schedule: options.supervise,
    migrate: true,
    // Supervision is what notices a job whose worker died (active past its expireInSeconds) and retries
    // it; the default minute would leave a crashed agent turn hanging that much longer.
    superviseIntervalSeconds: 15,
    monitorIntervalSeconds: 15,
    // The instance registry and vacuum/index-bloat checks are pg-boss's own operations dashboard; the
    // embedded database has no autovacuum statistics to read, and commands are too short-lived to register.
    registerInstance: false,
    monitorVacuum: db.mode === 'postgres',
    reindex: db.mode === 'postgres',
  });
  boss.on('error', (err: Error) => log.error({ err: err.message }, 'job queue error'));
  return boss;
}

/**
 * Creates every queue the core serves, and brings an existing queue's retry and retention settings to
 * QUEUE_DEFAULTS (idempotent; run by `aws migrate` and at start-up). One query when nothing changes.
 */
export async function ensureQueues(boss: PgBoss, names: string[]): Promise<void> {
  const existing = new Map((await boss.getQueues(names)).map((q) => [q.name, q]));
  for (const name of names) {
    const q = existing.get(name);
    if (!q) await boss.createQueue(name, QUEUE_DEFAULTS);
    else if ((Object.keys(QUEUE_DEFAULTS) as Array<keyof typeof QUEUE_DEFAULTS>).some((k) => q[k] !== QUEUE_DEFAULTS[k])) {
      await boss.updateQueue(name, QUEUE_DEFAULTS);
    }
  }
}

/**
 * The core's JobQueue over pg-boss: a job sent with a transaction commits or rolls back with it, and
 * workers hear of it through the event bus once it is committed.
 */
export function createJobQueue(boss: PgBoss, bus: EventBus): JobQueue & JobQueueStats & JobRecovery {
  const inTx = (tx: Queryable): Db => ({
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
        ...(options.startAfterSeconds !== undefined ? { startAfter: options.startAfterSeconds } : {}),
        ...(options.heartbeatSeconds !== undefined ? { heartbeatSeconds: options.heartbeatSeconds } : {}),
        ...(options.deadLetter !== undefined ? { deadLetter: options.deadLetter } : {}),
      });
      if (!id) throw new JobAlreadyQueuedError(name);
      // The job's id makes each payload unique: PostgreSQL delivers identical notifications of one
      // transaction once, which woke one worker for several jobs queued together (a plan's parallel
      // subtasks then started one after another).
      await bus.publish(JOBS_ENQUEUED, { name, id }, options.tx);
      return id;
    },
    async activeJobs(name) {
      // pg-boss indexes jobs by name and state; the active ones of a queue are few (at most one per worker).
      const { rows } = await boss.getDb().executeSql(
        `select id::text as id, data, started_on as "startedAt" from ${BOSS_SCHEMA}.job where name = $1 and state = 'active' order by started_on limit 1000`,
        [name],
      );
      return rows as Array<{ id: string; data: unknown; startedAt: Date }>;
    },
    async takeBack(name, id, tx) {
      // pg-boss types its answer loosely; the command's count is `affected` (manager.mapCommandResponse).
      const r = (await boss.cancel(name, id, { db: inTx(tx) })) as { affected?: number } | undefined;
      return (r?.affected ?? 0) > 0;
    },
    async stats(): Promise<QueueStats> {
      // Counted in the job table itself rather than read from pg-boss's queue table: those counts are
      // refreshed by supervision, which only workers run, and go stale exactly when no worker is left.
      // The states pg-boss indexes (its i14): a millisecond, where counting the week of completed jobs
      // kept as well took 50-70 ms at 200,000 of them.
      const { rows } = await boss.getDb().executeSql(
        `select name as queue, state::text as state, count(*)::int as count,
                extract(epoch from now() - min(start_after) filter (where state in ('created', 'retry') and start_after <= now()))::float8 as waited
           from ${BOSS_SCHEMA}.job where state in (${QUEUE_STATES.map((s) => `'${s}'`).join(', ')}) group by name, state`,
      );
      const oldest = new Map<string, number>();
      for (const r of rows as Array<{ queue: string; waited: number | null }>) {
        if (r.waited !== null) oldest.set(r.queue, Math.max(oldest.get(r.queue) ?? 0, r.waited));
      }
      return {
        counts: (rows as Array<{ queue: string; state: string; count: number }>).map(({ queue, state, count }) => ({ queue, state, count })),
        oldestWaiting: [...oldest].map(([queue, seconds]) => ({ queue, seconds: Math.max(0, seconds) })),
      };
    },
  };
}
