import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolInsideTransactionError } from '../../src/db/database.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

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
});
