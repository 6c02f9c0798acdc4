import type { PgBoss } from 'pg-boss';
import type { Config } from '../config/config.schema.js';
import { createCore, type Core } from '../core/create-core.js';
import type { Logger } from '../kernel/logger.js';
import type { Clock } from '../lib/clock.js';
import type { Database } from '../db/database.js';
import { createEventBus } from '../db/event-bus.js';
import { openDatabase } from '../db/open-database.js';
import { createBoss, createJobQueue, ensureQueues } from '../jobs/boss.js';
import { importPgBoss10Jobs, setAsidePgBoss10 } from '../jobs/boss-upgrade.js';

export interface OpenedCore {
  core: Core;
  db: Database;
  boss: PgBoss;
  /** Closes everything this opened, in reverse order. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Opens the infrastructure the config names (database, event bus, job queue) and builds the core on it.
 * Shared by every command, `aws serve`, `aws worker` and the tests, so all of them run the same wiring.
 */
export async function openCore(config: Config, log: Logger, options: { supervise?: boolean; clock?: Clock } = {}): Promise<OpenedCore> {
  const db = await openDatabase(config);
  const bus = createEventBus(db, log);
  const boss = createBoss(db, log, { supervise: options.supervise ?? false });
  let closing: Promise<void> | null = null;
  let core: Core | undefined;
  const close = () =>
    (closing ??= (async () => {
      await core?.embeddings.settle();
      await boss.stop({ graceful: false, close: true }).catch(() => {});
      await bus.close();
      await db.close();
    })());
  try {
    // A job queue written by pg-boss 10 moves aside first: pg-boss 12 cannot migrate it (boss-upgrade.ts).
    const upgrading = await setAsidePgBoss10(db, log);
    // Started before any service transaction: in embedded mode an open transaction blocks every other
    // connection, and pg-boss's start-up runs on its own pool.
    await boss.start();
    core = createCore({ db, bus, queue: createJobQueue(boss, bus), log, config, clock: options.clock });
    await ensureQueues(boss, Object.keys(core.jobHandlers));
    if (upgrading) await importPgBoss10Jobs(db, log);
  } catch (err) {
    await close();
    throw err;
  }
  return { core: core!, db, boss, close };
}
