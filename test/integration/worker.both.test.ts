import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Core } from '../../src/core/create-core.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker } from '../../src/jobs/worker.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`worker (${DB_MODE})`, () => {
  let t: Awaited<ReturnType<typeof openTestCore>>;
  beforeAll(async () => {
    t = await openTestCore();
  });
  afterAll(() => t?.close());

  it('starts enqueued jobs at once, up to its concurrency, woken by the enqueue and not by its 10 s poll', async () => {
    const name = 'test-gate';
    await t.opened.boss.createQueue(name);
    const started: number[] = [];
    const done: number[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    // Every job waits until the gate opens: three can only all start if three pollers were woken.
    const core = {
      ...t.opened.core,
      jobHandlers: {
        [name]: async (_ctx: unknown, data: { i: number }) => {
          started.push(data.i);
          if (data.i < 3) await gate;
          done.push(data.i);
        },
      },
    } as unknown as Core;
    const worker = await startWorker(core, t.opened.boss, silentLogger, { concurrency: 3 });
    try {
      // Let the pollers' first fetch find nothing, so that they sleep on their backstop poll.
      await sleep(1000);
      for (let i = 0; i < 3; i++) await t.opened.core.queue.send(name, { i });
      await expect.poll(() => started.length, { timeout: 10_000, interval: 50 }).toBe(3);
      // With every poller busy, a fourth job waits for one to finish, then runs at once.
      await t.opened.core.queue.send(name, { i: 3 });
      await sleep(300);
      expect(started).toHaveLength(3);
      open();
      await expect.poll(() => done.sort(), { timeout: 10_000, interval: 50 }).toEqual([0, 1, 2, 3]);
    } finally {
      open();
      await worker.stop(2000);
    }
  }, 20_000);
});
