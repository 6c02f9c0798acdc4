import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import PgBoss10 from 'pg-boss-10';
import { afterAll, describe, expect, it } from 'vitest';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import type { Core } from '../../src/core/create-core.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { PROVISION_WORKSPACE_JOB } from '../../src/core/tenants/tenants.service.js';
import { openDatabase } from '../../src/db/open-database.js';
import type { Database } from '../../src/db/database.js';
import { QUEUE_DEFAULTS } from '../../src/jobs/boss.js';
import { importPgBoss10Jobs } from '../../src/jobs/boss-upgrade.js';
import { startWorker } from '../../src/jobs/worker.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

const PROBE = 'upgrade-probe';
const PGBOSS_12_SCHEMA_VERSION: number = createRequire(import.meta.url)('pg-boss/package.json').pgboss.schema;

interface JobRow {
  id: string;
  name: string;
  state: string;
  data: { n?: number; tenantId?: string } | null;
  output: unknown;
  retry_count: number;
  singleton_key: string | null;
}

const jobsOf = async (db: Database, tables: string[]) =>
  (
    await db.query<JobRow>(
      tables.map((t) => `select id, name, state::text as state, data, output, retry_count, singleton_key from ${t}`).join(' union all ') + ' order by id',
    )
  ).rows;

/**
 * A job queue as the release before Node 24 left it: pg-boss 10.4 with the settings src/jobs/boss.ts gave
 * it then (retryLimit 3 with back-off, a week's retention), holding jobs in every state a crash or a
 * restart can leave behind. That release's pg-boss is installed beside pg-boss 12 under the alias
 * `pg-boss-10`, for this test only.
 */
async function makeReleaseDatabase(env: TestEnv) {
  const db = await openDatabase(env.config());
  const settings = { ...(db.connection as PgBoss10.DatabaseOptions), max: 2, retryLimit: 3, retryBackoff: true, retentionDays: 7, supervise: false };
  const tx = (run: (q: PgBoss10.Db) => Promise<unknown>) => db.transaction((t) => run({ executeSql: (text, values) => t.query(text, values) }));
  try {
    // First: a job finished more than archiveCompletedAfterSeconds ago sits in pg-boss 10's archive.
    const archiving = new PgBoss10({ ...settings, supervise: true, maintenanceIntervalSeconds: 1, archiveCompletedAfterSeconds: 1 });
    await archiving.start();
    await archiving.createQueue(PROBE);
    await archiving.createQueue(PROVISION_WORKSPACE_JOB);
    const archived = (await archiving.send(PROBE, { n: 10 }))!;
    await archiving.fetch(PROBE);
    await archiving.complete(PROBE, archived, { done: 10 });
    await expect.poll(async () => (await db.query(`select 1 from pgboss.archive where id = $1`, [archived])).rowCount, { timeout: 15_000 }).toBe(1);
    await archiving.stop({ graceful: false, wait: true });

    // Each job that gets fetched is the only one waiting at that moment, so fetch takes that one.
    const boss = new PgBoss10(settings);
    await boss.start();
    // Finished recently (still in the job table); failed for good.
    const done = (await boss.send(PROBE, { n: 11 }))!;
    await boss.fetch(PROBE);
    await boss.complete(PROBE, done, { done: 11 });
    const failed = (await boss.send(PROBE, { n: 30 }, { retryLimit: 0 }))!;
    await boss.fetch(PROBE);
    await boss.fail(PROBE, failed, { why: 'no retries' });
    // Active when its worker died: pg-boss expires it and retries it.
    await boss.send(PROBE, { n: 40 }, { expireInSeconds: 2 });
    await boss.fetch(PROBE);
    // Failed once, waiting for its retry.
    const retrying = (await boss.send(PROBE, { n: 20 }, { retryLimit: 2, retryDelay: 1 }))!;
    await boss.fetch(PROBE);
    await boss.fail(PROBE, retrying, { why: 'first attempt' });
    // Queued: plain, with a singleton key, and enqueued inside the transaction of its cause.
    await boss.send(PROBE, { n: 1 });
    await boss.send(PROBE, { n: 2 }, { singletonKey: 'two' });
    await tx((q) => boss.send(PROBE, { n: 3 }, { db: q }));
    await tx((q) => boss.send(PROVISION_WORKSPACE_JOB, { tenantId: randomUUID() }, { db: q, singletonKey: 'tenant' }));
    await boss.stop({ graceful: false, wait: true });

    const jobs = await jobsOf(db, ['pgboss.job', 'pgboss.archive']);
    const version = (await db.query(`select version from pgboss.version`)).rows[0].version;
    return { jobs, version };
  } finally {
    await db.close();
  }
}

describe(`job queue upgrade from pg-boss 10 (${DB_MODE})`, () => {
  let env: TestEnv | undefined;
  let opened: OpenedCore | undefined;
  afterAll(async () => {
    await opened?.close();
    await env?.cleanup();
  });

  it('moves every job of a pg-boss 10 database into pg-boss 12 at start-up, and the queued ones run', async () => {
    env = await createTestEnv();
    const before = await makeReleaseDatabase(env);
    expect(before.version).toBe(24);
    expect(before.jobs.map((j) => `${j.data?.n ?? j.name}:${j.state}`).sort()).toEqual(
      ['1:created', '10:completed', '11:completed', '2:created', '20:retry', '3:created', '30:failed', '40:active', `${PROVISION_WORKSPACE_JOB}:created`].sort(),
    );

    opened = await openCore(env.config(), silentLogger, { supervise: true });
    const { db, boss } = opened;
    // The schema is pg-boss 12's, the old one is gone, and no job was lost or changed on the way.
    expect((await db.query(`select version from pgboss.version`)).rows[0].version).toBe(PGBOSS_12_SCHEMA_VERSION);
    expect((await db.query(`select 1 from pg_namespace where nspname = 'pgboss_v10'`)).rowCount).toBe(0);
    expect(await jobsOf(db, ['pgboss.job'])).toEqual(before.jobs);
    expect(await importPgBoss10Jobs(db, silentLogger)).toBeNull();
    // The core's queues carry today's settings; a queue only the old schema had is kept.
    const provision = await boss.getQueue(PROVISION_WORKSPACE_JOB);
    expect(provision).toMatchObject(QUEUE_DEFAULTS);
    expect(await boss.getQueue(PROBE)).toMatchObject({ retryLimit: 3, retryBackoff: true, policy: 'standard' });

    // A worker runs what was waiting: the queued jobs, the retry, and the job of the dead worker once
    // supervision expires it; the finished and failed ones stay as they were.
    const ran: number[] = [];
    const core = { ...opened.core, jobHandlers: { [PROBE]: async (_ctx: unknown, data: { n: number }) => void ran.push(data.n) } } as unknown as Core;
    const worker = await startWorker(core, boss, silentLogger, { concurrency: 2 });
    try {
      await expect.poll(() => [...ran].sort((a, b) => a - b), { timeout: 60_000, interval: 250 }).toEqual([1, 2, 3, 20, 40]);
      // And a job enqueued now, in a transaction, runs too.
      await db.transaction((tx) => opened!.core.queue.send(PROBE, { n: 50 }, { tx }));
      await expect.poll(() => ran.includes(50), { timeout: 10_000, interval: 100 }).toBe(true);
    } finally {
      await worker.stop(2000);
    }
    const after = new Map((await jobsOf(db, ['pgboss.job'])).map((j) => [j.data?.n ?? j.name, j]));
    for (const n of [1, 2, 3, 10, 11, 20, 40, 50]) expect(after.get(n)?.state).toBe('completed');
    expect(after.get(30)?.state).toBe('failed');
    expect(after.get(2)?.singleton_key).toBe('two');
    expect(after.get(10)?.output).toEqual({ done: 10 });
    expect(after.get(PROVISION_WORKSPACE_JOB)).toMatchObject({ state: 'created', singleton_key: 'tenant' });
  }, 120_000);
});
