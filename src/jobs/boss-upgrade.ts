import type { Database, Queryable, Tx } from '../db/database.js';
import { ConflictError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { QUEUE_DEFAULTS } from './boss.js';

/**
 * Upgrade of a job queue written by pg-boss 10 (the releases before Node 24) to pg-boss 12.
 *
 * pg-boss 11 rewrote its schema and ships no migration from pg-boss 10's (schema versions 21-24): started
 * on one, pg-boss 11 and 12 refuse ("Cannot migrate pg-boss schema from version 24"). Its authors advise
 * installing the new schema beside the old and moving the jobs over. That is done here, in two steps
 * around pg-boss's own start-up, each one transaction that re-checks the state it acts on:
 *
 * 1. setAsidePgBoss10 (before boss.start): renames the old schema `pgboss` to `pgboss_v10`, so pg-boss 12
 *    installs a fresh `pgboss`.
 * 2. importPgBoss10Jobs (after boss.start and ensureQueues): copies every job of `pgboss_v10` (queued,
 *    retrying, active, finished, archived) into the new schema with its id, state, data, output and retry
 *    count, creates the queues only the old schema had, and drops `pgboss_v10`.
 *
 * A process that dies between the steps leaves `pgboss_v10` behind, and the next one to start finishes the
 * import; the copy skips jobs already copied. Old processes must be stopped first: their queries would
 * reach the renamed schema.
 */
const PGBOSS_SCHEMA = 'pgboss';
const PGBOSS_10_SCHEMA = 'pgboss_v10';
/** pg-boss 10.0-10.4 schema versions: the ones this upgrade reads. */
const PGBOSS_10_VERSIONS = { min: 21, max: 24 };

/** Serialises the two steps between processes (the embedded database has one session, where it is a no-op). */
const lock = (tx: Tx) => tx.query(`select pg_advisory_xact_lock(hashtext('agentws.pgboss-10-upgrade'))`);

/** Whether the old schema waits to be imported, and the version of the schema `pgboss` (null: none). */
async function probe(q: Queryable): Promise<{ pending: boolean; version: number | null }> {
  const { rows } = await q.query<{ installed: boolean; pending: boolean }>(
    `select to_regclass('${PGBOSS_SCHEMA}.version') is not null as installed,
            exists (select 1 from pg_namespace where nspname = '${PGBOSS_10_SCHEMA}') as pending`,
  );
  const { installed, pending } = rows[0];
  if (!installed) return { pending, version: null };
  const version = (await q.query<{ version: number }>(`select version from ${PGBOSS_SCHEMA}.version`)).rows[0]?.version;
  return { pending, version: version === undefined ? null : Number(version) };
}

const isPgBoss10 = (version: number | null) => version !== null && version <= PGBOSS_10_VERSIONS.max;

/**
 * Step 1. True when a pg-boss 10 schema was set aside (now, or by an earlier start that did not finish
 * the import). Costs one or two queries when there is nothing to do.
 */
export async function setAsidePgBoss10(db: Database, log: Logger): Promise<boolean> {
  const seen = await probe(db);
  if (!isPgBoss10(seen.version)) return seen.pending;
  return db.transaction(async (tx) => {
    await lock(tx);
    const { pending, version } = await probe(tx);
    if (!isPgBoss10(version)) return pending;
    if (version! < PGBOSS_10_VERSIONS.min) {
      throw new ConflictError(`the job queue (schema ${PGBOSS_SCHEMA}) has pg-boss schema version ${version}, older than pg-boss 10`, {
        hint: 'Start the release before Node 24 (pg-boss 10) on this database once, then this one.',
      });
    }
    if (pending) {
      throw new ConflictError(`both ${PGBOSS_SCHEMA} (pg-boss 10) and ${PGBOSS_10_SCHEMA} (a pg-boss 10 job queue set aside by an earlier upgrade) exist`, {
        hint: `Rename or drop the one whose jobs you do not need (ALTER SCHEMA ... RENAME TO ...), then start again.`,
      });
    }
    await tx.query(`alter schema ${PGBOSS_SCHEMA} rename to ${PGBOSS_10_SCHEMA}`);
    log.info({ from: PGBOSS_SCHEMA, to: PGBOSS_10_SCHEMA, version }, 'job queue: pg-boss 10 schema set aside for the upgrade to pg-boss 12');
    return true;
  });
}

/** The jobs of a pg-boss 10 schema, finished ones moved to its archive included, in pg-boss 12's columns. */
const oldJobs = (schema: string) => {
  const cols = `id, name, priority, data, state::text as state, retry_limit, retry_count, retry_delay, retry_backoff,
    expire_in, singleton_key, singleton_on, start_after, started_on, created_on, completed_on, keep_until,
    output, dead_letter, policy`;
  return `select ${cols} from ${schema}.job union all select ${cols} from ${schema}.archive`;
};

/** Step 2. Returns what was imported, or null when there was nothing to import. */
export async function importPgBoss10Jobs(db: Database, log: Logger): Promise<{ queues: number; jobs: number } | null> {
  return db.transaction(async (tx) => {
    await lock(tx);
    if (!(await probe(tx)).pending) return null;
    // Queues only the old schema has (the core's own were created by ensureQueues with today's settings).
    // pg-boss 10 left a queue's unset options to the constructor's, which were QUEUE_DEFAULTS.
    const d = QUEUE_DEFAULTS;
    const queues = await tx.query(
      `select ${PGBOSS_SCHEMA}.create_queue(o.name, jsonb_strip_nulls(jsonb_build_object(
          'policy', coalesce(o.policy, 'standard'),
          'retryLimit', coalesce(o.retry_limit, $1),
          'retryDelay', coalesce(o.retry_delay, $2),
          'retryBackoff', coalesce(o.retry_backoff, $3),
          'expireInSeconds', o.expire_seconds,
          'retentionSeconds', coalesce(o.retention_minutes * 60, $4),
          'deleteAfterSeconds', $5::int)))
         from ${PGBOSS_10_SCHEMA}.queue o
        where not exists (select 1 from ${PGBOSS_SCHEMA}.queue n where n.name = o.name)`,
      [d.retryLimit, d.retryDelay, d.retryBackoff, d.retentionSeconds, d.deleteAfterSeconds],
    );
    // Dead-letter links once every queue exists (a queue's dead letter is another queue).
    await tx.query(
      `update ${PGBOSS_SCHEMA}.queue n set dead_letter = o.dead_letter
         from ${PGBOSS_10_SCHEMA}.queue o
        where o.name = n.name and o.dead_letter is not null and n.dead_letter is null`,
    );
    // pg-boss 10 kept a job's expiry as an interval and deleted finished jobs from its archive; pg-boss 12
    // keeps seconds, and the deletion delay of the job's queue.
    const jobs = await tx.query(
      `insert into ${PGBOSS_SCHEMA}.job (id, name, priority, data, state, retry_limit, retry_count, retry_delay,
          retry_backoff, expire_seconds, deletion_seconds, singleton_key, singleton_on, start_after, started_on,
          created_on, completed_on, keep_until, output, dead_letter, policy)
       select j.id, j.name, j.priority, j.data, j.state::${PGBOSS_SCHEMA}.job_state, j.retry_limit, j.retry_count,
          j.retry_delay, j.retry_backoff, greatest(1, ceil(extract(epoch from j.expire_in)))::int, q.deletion_seconds,
          j.singleton_key, j.singleton_on, j.start_after, j.started_on, j.created_on, j.completed_on, j.keep_until,
          j.output, j.dead_letter, coalesce(j.policy, q.policy)
         from (${oldJobs(PGBOSS_10_SCHEMA)}) j
         join ${PGBOSS_SCHEMA}.queue q on q.name = j.name
       on conflict do nothing`,
    );
    await tx.query(`drop schema ${PGBOSS_10_SCHEMA} cascade`);
    const result = { queues: queues.rowCount ?? 0, jobs: jobs.rowCount ?? 0 };
    log.info(result, 'job queue: jobs of pg-boss 10 imported into pg-boss 12');
    return result;
  });
}
