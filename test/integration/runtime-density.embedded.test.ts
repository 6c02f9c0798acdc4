import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { createRuntimeClient } from '../../src/core/runtime/runtime-client.js';
import type { RuntimeHandle } from '../../src/core/runtime/host/runtime-transport.js';
import { openRuntimeCgroups } from '../../src/core/runtime/host/runtime-cgroups.js';
import type { RuntimePool } from '../../src/core/runtime/runtime-pool.js';
import { RuntimeBusyError, type RuntimeOwner } from '../../src/core/runtime/host/runtime-host.js';
import { createRuntimeRepo } from '../../src/core/runtime/runtime.repo.js';
import { readHostMemory, type HostMemory } from '../../src/lib/host-memory.js';
import { isProcessAlive } from '../../src/lib/process-state.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { testPool } from '../helpers/runtime-pool.js';
import { treeCpuMs } from '../helpers/process-tree.js';
import { DB_MODE } from '../helpers/test-env.js';

const healthy = async (h: RuntimeHandle) => (await createRuntimeClient(h).health()).healthy;
const GiB = 1024 ** 3;
const root = process.getuid?.() === 0;

/**
 * Many users on one host: idle runtimes frozen (cgroup freezer) and thawed on demand, memory pressure
 * stopping the least recently used idle runtimes, never a busy one, and the host's report. Real
 * bubblewrap and opencode; the host's memory is the test's to say (the pool reads it through `memory`).
 * Freezing needs a writable cgroup: root here and in CI.
 */
describe.runIf(DB_MODE === 'embedded' && root)('runtime density: freezing idle runtimes, memory pressure, capacity', () => {
  let t: TestApp;
  let a: RuntimeOwner;
  let b: RuntimeOwner;
  let c: RuntimeOwner;
  let pool: RuntimePool;
  /** What the pool is told of the host's memory; null: the real figures. */
  let told: HostMemory | null = null;
  const rows = async () => (await t.opened.db.query<{ userId: string; pid: number }>(`select user_id as "userId", pid from agent_runtimes`)).rows;
  const stateOf = (o: RuntimeOwner) => pool.live().find((r) => r.userId === o.userId)?.state ?? 'stopped';
  const pidOf = (o: RuntimeOwner) => pool.live().find((r) => r.userId === o.userId)!.pid!;

  beforeAll(async () => {
    t = await startTestApp();
    const one = await seedTenant(t, 'dense-one', [{ handle: 'bea', roles: ['member'] }]);
    const two = await seedTenant(t, 'dense-two');
    a = { tenantId: one.tenantId, userId: one.ids.owner };
    b = { tenantId: one.tenantId, userId: one.ids.bea };
    c = { tenantId: two.tenantId, userId: two.ids.owner };
    pool = await testPool(t, { max: 3, idleMs: 10 * 60_000, freezeAfterMs: 800, recentUseMs: 300, memory: () => told ?? readHostMemory() });
  }, 60_000);

  afterAll(async () => {
    await pool?.stop();
    await t?.close();
  });

  it('freezes a runtime idle for the freeze time: its processes get no CPU at all, and it keeps its memory', async () => {
    expect(openRuntimeCgroups(silentLogger, { want: { freezer: true }, total: { memoryBytes: null, pids: null } }).mechanisms().freezer, 'a cgroup freezer is writable here (root)').toMatch(/^cgroup[12]$/);
    const h = await pool.acquire(a);
    expect(await healthy(h)).toBe(true);
    await expect.poll(() => stateOf(a), { timeout: 10_000, interval: 100 }).toBe('frozen');
    const pid = pidOf(a);
    const before = treeCpuMs(pid);
    await new Promise((r) => setTimeout(r, 2000));
    expect(treeCpuMs(pid) - before).toBe(0);
    expect(isProcessAlive(pid)).toBe(true);
    const s = pool.status();
    expect(s).toMatchObject({ capacity: 3, resident: 1, frozen: 1, ready: 0, starting: 0, busy: 0, freezer: expect.stringMatching(/^cgroup/) });
    // Its memory is still held (read from its processes): a frozen runtime is resident, not stopped.
    expect(s.runtimesMemoryBytes).toBeGreaterThan(50 * 1024 ** 2);
  }, 60_000);

  it('thaws a frozen runtime for the next request, which it answers as before', async () => {
    const pid = pidOf(a);
    const h = await pool.acquire(a);
    expect(stateOf(a)).toBe('ready');
    expect(await healthy(h)).toBe(true);
    expect(pidOf(a)).toBe(pid);
    // And freezes again once idle.
    await expect.poll(() => stateOf(a), { timeout: 10_000, interval: 100 }).toBe('frozen');
  }, 60_000);

  it('a process that finds the runtime by its row (a worker) has the host thaw it before its request is answered', async () => {
    expect(stateOf(a)).toBe('frozen');
    const remote = await testPool(t, { max: 3, idleMs: 60_000, freezeAfterMs: 800 }, { hosting: false });
    const h = await remote.acquire(a);
    expect(await healthy(h)).toBe(true);
    expect(stateOf(a)).toBe('ready');
  }, 60_000);

  it('never freezes a runtime with a turn running', async () => {
    await pool.acquire(a);
    pool.setRunning(a.userId, 'ses_turn', true);
    await new Promise((r) => setTimeout(r, 2500));
    expect(stateOf(a)).toBe('ready');
    pool.setRunning(a.userId, 'ses_turn', false);
    await expect.poll(() => stateOf(a), { timeout: 10_000, interval: 100 }).toBe('frozen');
  }, 60_000);

  it('under memory pressure stops the least recently used idle runtimes, never one with a turn running', async () => {
    // Side by side (starts are the slow part); c is used again below, after b.
    await Promise.all([pool.acquire(b), pool.acquire(c)]);
    // a: a turn running (and the least recently used of all); b: idle, used before c; c: idle.
    pool.setRunning(a.userId, 'ses_long', true);
    await new Promise((r) => setTimeout(r, 400));
    await pool.acquire(c);
    const [pa, pb, pc] = [pidOf(a), pidOf(b), pidOf(c)];
    const total = 16 * GiB;
    // The floor is 0.8 GiB; 0.6 GiB available: one runtime's worth short (b's, measured, or the budget).
    told = { totalBytes: total, availableBytes: 0.6 * GiB };
    await expect.poll(() => isProcessAlive(pb), { timeout: 10_000, interval: 100 }).toBe(false);
    told = { totalBytes: total, availableBytes: 4 * GiB };
    await new Promise((r) => setTimeout(r, 1000));
    expect(isProcessAlive(pa)).toBe(true);
    expect(isProcessAlive(pc)).toBe(true);
    expect((await rows()).map((r) => r.userId).sort()).toEqual([a.userId, c.userId].sort());

    // Out of memory with every runtime busy: a new one is refused (the turn waits), and says why.
    pool.setRunning(c.userId, 'ses_c', true);
    told = { totalBytes: total, availableBytes: 0.5 * GiB };
    const refused = await pool.acquire(b).catch((e) => e);
    expect(refused).toBeInstanceOf(RuntimeBusyError);
    expect(refused.details).toMatchObject({ why: 'memory' });
    expect(isProcessAlive(pa) && isProcessAlive(pc)).toBe(true);
    told = null;
    pool.setRunning(a.userId, 'ses_long', false);
    pool.setRunning(c.userId, 'ses_c', false);
  }, 90_000);

  it('reports the host (capacity, resident, frozen, memory) for the processes that do not host it, and cleans up its cgroups', async () => {
    await expect
      .poll(async () => (await createRuntimeRepo().liveHosts(t.opened.db, 60_000)).find((h) => h.hostPid === process.pid), { timeout: 40_000, interval: 250 })
      .toMatchObject({ capacity: 3, resident: 2, frozen: 2, busy: 0, freezer: expect.stringMatching(/^cgroup/), memoryTotalBytes: expect.any(Number) });
    const [host] = await createRuntimeRepo().liveHosts(t.opened.db, 60_000);
    expect(host.runtimesMemoryBytes).toBeGreaterThan(0);
    // Stopping a frozen runtime works (it is thawed to take its signal), and its cgroup goes with it.
    const pid = pidOf(c);
    await pool.stopUser(c.userId);
    expect(isProcessAlive(pid)).toBe(false);
    await pool.stop();
    expect(await rows()).toEqual([]);
    expect((await createRuntimeRepo().liveHosts(t.opened.db, 60_000)).filter((h) => h.hostPid === process.pid)).toEqual([]);
    expect(existsSync(`/sys/fs/cgroup/unified/agentws-runtimes-${process.pid}`) || existsSync(`/sys/fs/cgroup/freezer/agentws-runtimes-${process.pid}`)).toBe(false);
  }, 90_000);

  it('starts runtimes a few at a time: a turn whose start is queued behind others goes back to the queue, and its runtime starts anyway', async () => {
    const one = await testPool(t, { max: 3, idleMs: 10 * 60_000, freezeAfterMs: 0, startsAtOnce: 1, queuedWaitMs: 300 });
    try {
      // a's early start (the dashboard opened) takes the only start place; b's turn waits behind it.
      const early = one.prestart(a);
      await new Promise((r) => setTimeout(r, 50));
      const refused = await one.acquire(b).catch((e) => e);
      expect(refused).toBeInstanceOf(RuntimeBusyError);
      expect(refused.details).toMatchObject({ why: 'starting', ahead: 1 });
      expect(refused.message).toMatch(/queued to start, behind 1 other start on this host/);
      expect(one.live().find((r) => r.userId === b.userId)?.state).toBe('starting');
      await early;
      // b's start went on without its caller: the turn's next attempt finds it up.
      await expect.poll(() => one.live().find((r) => r.userId === b.userId)?.state, { timeout: 30_000, interval: 100 }).toBe('ready');
      expect(await healthy(await one.acquire(b))).toBe(true);
    } finally {
      await one.stop();
    }
  }, 90_000);
});
