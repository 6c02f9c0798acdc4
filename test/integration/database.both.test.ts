import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolInsideTransactionError } from '../../src/db/database.js';
import { openDatabase } from '../../src/db/open-database.js';
import { acquireEmbedded, embeddedPaths } from '../../src/db/embedded-host.js';
import { openTestCore } from '../helpers/core.js';
import { createTestEnv, DB_MODE } from '../helpers/test-env.js';
import { makeZombie } from '../helpers/zombie.js';

describe(`database (${DB_MODE})`, () => {
  let t: Awaited<ReturnType<typeof openTestCore>>;
  beforeAll(async () => {
    t = await openTestCore({ migrate: false });
  });
  afterAll(() => t?.close());

  it('fails at once, instead of deadlocking, when code inside a transaction queries the pool', async () => {
    const { db } = t.opened;
    const started = Date.now();
    await expect(db.transaction(async () => db.query('select 1'))).rejects.toBeInstanceOf(PoolInsideTransactionError);
    await expect(db.transaction(async () => db.transaction(async () => 1))).rejects.toBeInstanceOf(PoolInsideTransactionError);
    expect(Date.now() - started).toBeLessThan(2000);
    // The pool is usable afterwards and concurrent transactions from separate callers still work.
    const results = await Promise.all([1, 2, 3].map((n) => db.transaction(async (tx) => (await tx.query<{ n: number }>('select $1::int as n', [n])).rows[0].n)));
    expect(results).toEqual([1, 2, 3]);
    expect((await db.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
  });

  it('gives every query its own result while other connections run transactions', async () => {
    // Embedded: all connections share one session; queries that waited behind a transaction used to run
    // from the backlog message by message and bind each other's statements (wrong rows, or errors).
    const { db } = t.opened;
    for (let round = 0; round < 10; round++) {
      const results = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const v = round * 100 + i;
          if (i % 5 === 0) return db.transaction(async (tx) => (await tx.query<{ v: number }>('select $1::int as v', [v])).rows[0]?.v);
          const r = await db.query<{ v: number }>(i % 2 ? 'select $1::int as v' : 'select $1::int + 0 as v, 1 as w', [v]);
          return r.rows[0]?.v;
        }),
      );
      expect(results).toEqual(Array.from({ length: 20 }, (_, i) => round * 100 + i));
    }
  });
});

describe.runIf(DB_MODE === 'embedded')('embedded database lock', () => {
  it('a second open in the same process shares its host (one PGlite on the files), which stops with the last close', async () => {
    const env = await createTestEnv();
    try {
      const paths = embeddedPaths(env.dataDir);
      const first = await openDatabase(env.config());
      const socket = statSync(paths.socket).ino;
      await first.query('create table shared_probe (v int)');
      // As an in-process admin command beside a running app: it must not open the files a second time
      // (which also replaced the socket and took the lock from its own process).
      const second = await openDatabase(env.config());
      expect(statSync(paths.socket).ino).toBe(socket);
      await second.query('insert into shared_probe values (7)');
      await first.close();
      expect((await second.query<{ v: number }>('select v from shared_probe')).rows).toEqual([{ v: 7 }]);
      expect(readFileSync(paths.lock, 'utf8')).toBe(String(process.pid));
      await second.close();
      expect(existsSync(paths.socket)).toBe(false);
      expect(existsSync(paths.lock)).toBe(false);
      // And it opens again afterwards, with what was written.
      const again = await openDatabase(env.config());
      try {
        expect((await again.query<{ v: number }>('select v from shared_probe')).rows).toEqual([{ v: 7 }]);
      } finally {
        await again.close();
      }
    } finally {
      await env.cleanup();
    }
  });

  it('takes over the lock of a host that died, whether its pid is gone or left a zombie nobody reaps', async () => {
    const env = await createTestEnv();
    const zombie = await makeZombie();
    const exited = spawn('true');
    await once(exited, 'exit');
    try {
      for (const dead of [exited.pid!, zombie.pid]) {
        const { lock } = embeddedPaths(env.dataDir);
        mkdirSync(dirname(lock), { recursive: true });
        writeFileSync(lock, String(dead));
        // A host that is alive would make this wait for its socket (60 s) and then fail.
        const handle = await acquireEmbedded(env.dataDir);
        try {
          expect(handle.hosted).toBe(true);
          expect(readFileSync(lock, 'utf8')).toBe(String(process.pid));
        } finally {
          await handle.release();
        }
      }
    } finally {
      zombie.release();
      await env.cleanup();
    }
  });
});
