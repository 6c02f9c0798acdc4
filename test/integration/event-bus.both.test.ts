import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventBus } from '../../src/db/event-bus.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

describe(`event bus (${DB_MODE})`, () => {
  let t: Awaited<ReturnType<typeof openTestCore>>;
  beforeAll(async () => {
    t = await openTestCore({ migrate: false });
  });
  afterAll(() => t?.close());

  it('delivers after commit, never after rollback, and stops after unsubscribe', async () => {
    const { bus, db } = t.opened.core;
    const got: unknown[] = [];
    const off = await bus.subscribe('test.events', (p) => got.push(p));

    await db.transaction(async (tx) => {
      await bus.publish('test.events', { n: 1 }, tx);
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual([]); // not before commit
    });
    await expect.poll(() => got, { timeout: 10_000 }).toEqual([{ n: 1 }]);

    await db
      .transaction(async (tx) => {
        await bus.publish('test.events', { n: 2 }, tx);
        throw new Error('roll back');
      })
      .catch(() => {});
    await bus.publish('test.events', { n: 3 });
    await expect.poll(() => got, { timeout: 10_000 }).toEqual([{ n: 1 }, { n: 3 }]);

    await off();
    await bus.publish('test.events', { n: 4 });
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual([{ n: 1 }, { n: 3 }]);
  });

  it.runIf(DB_MODE === 'postgres')('crosses processes: a second bus on its own connection hears the first', async () => {
    const { db, bus } = t.opened.core;
    const other = createEventBus(db, silentLogger);
    try {
      const got: unknown[] = [];
      await other.subscribe('test.cross', (p) => got.push(p));
      await bus.publish('test.cross', { hello: 'world' });
      await expect.poll(() => got, { timeout: 10_000 }).toEqual([{ hello: 'world' }]);
    } finally {
      await other.close();
    }
  });

  it.runIf(DB_MODE === 'postgres')('carries a payload over NOTIFY\'s 8000 bytes whole, in order with the small ones around it, to another process', async () => {
    const m = await openTestCore();
    const other = createEventBus(m.opened.core.db, silentLogger);
    try {
      const got: Array<{ n: number; text?: string }> = [];
      await other.subscribe('test.large', (p) => got.push(p as { n: number; text?: string }));
      // Characters of 1 to 4 bytes in UTF-8, so that the cuts fall inside some of them.
      const big = 'x'.repeat(50_000) + 'é✓😀'.repeat(5000);
      const { bus, db } = m.opened.core;
      // Sent one after another, as session events are: small, large, small; then a large one in a
      // transaction that commits and one in a transaction that rolls back.
      await bus.publish('test.large', { n: 1 });
      await bus.publish('test.large', { n: 2, text: big });
      await bus.publish('test.large', { n: 3 });
      await db.transaction(async (tx) => bus.publish('test.large', { n: 4, text: big }, tx));
      await db
        .transaction(async (tx) => {
          await bus.publish('test.large', { n: 5, text: big }, tx);
          throw new Error('roll back');
        })
        .catch(() => {});
      await bus.publish('test.large', { n: 6 });
      await expect.poll(() => got.length, { timeout: 10_000 }).toBe(5);
      expect(got.map((g) => g.n)).toEqual([1, 2, 3, 4, 6]);
      expect(got[1].text).toBe(big);
      expect(got[3].text).toBe(big);
    } finally {
      await other.close();
      await m.close();
    }
  });
});
