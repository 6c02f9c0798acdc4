import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntimeClient } from '../../src/core/runtime/runtime-client.js';
import type { RuntimeHandle } from '../../src/core/runtime/host/runtime-transport.js';
import type { RuntimePool } from '../../src/core/runtime/runtime-pool.js';
import { RuntimeBusyError, type RuntimeOwner } from '../../src/core/runtime/host/runtime-host.js';
import { isProcessAlive } from '../../src/lib/process-state.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { testPool } from '../helpers/runtime-pool.js';
import { DB_MODE } from '../helpers/test-env.js';

/** Resolves when `pred` holds (polled), or fails after `ms`. */
async function until(pred: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const healthy = async (h: RuntimeHandle) => (await createRuntimeClient(h).health()).healthy;

// The pool does not depend on the database mode beyond its rows: run it once, on the embedded default.
describe.runIf(DB_MODE === 'embedded')('runtime pool: one sandboxed runtime per user (real bubblewrap, real opencode)', () => {
  let t: TestApp;
  let a: RuntimeOwner;
  let b: RuntimeOwner;
  let c: RuntimeOwner;
  let pool: RuntimePool;
  const rows = async () => (await t.opened.db.query<{ userId: string; pid: number; sandboxed: boolean; socketPath: string }>(`select user_id as "userId", pid, sandboxed, socket_path as "socketPath" from agent_runtimes`)).rows;

  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_MAX: '2' } });
    const one = await seedTenant(t, 'pool-one', [{ handle: 'bea', roles: ['member'] }]);
    const two = await seedTenant(t, 'pool-two');
    a = { tenantId: one.tenantId, userId: one.ids.owner };
    b = { tenantId: one.tenantId, userId: one.ids.bea };
    c = { tenantId: two.tenantId, userId: two.ids.owner };
    // Freezing has its own suite (runtime-density): here runtimes stay awake as they did.
    pool = await testPool(t, { max: 2, idleMs: 4000, recentUseMs: 500, freezeAfterMs: 0 });
  }, 60_000);

  afterAll(async () => {
    await pool?.stop();
    await t?.close();
  });

  it('starts a runtime per user on demand, each on its own socket, recorded for the other processes', async () => {
    const [ha, hb] = await Promise.all([pool.acquire(a), pool.acquire(b)]);
    expect(ha.endpoint.socketPath).not.toBe(hb.endpoint.socketPath);
    expect(ha.directory).toBe('/workspace');
    expect(await healthy(ha)).toBe(true);
    expect(await healthy(hb)).toBe(true);
    // The same user gets the same runtime again.
    expect((await pool.acquire(a)).endpoint.socketPath).toBe(ha.endpoint.socketPath);
    const recorded = await rows();
    expect(recorded.map((r) => r.userId).sort()).toEqual([a.userId, b.userId].sort());
    expect(recorded.every((r) => r.sandboxed && isProcessAlive(r.pid))).toBe(true);
    // Each password opens one runtime only.
    const crossed = createRuntimeClient({ endpoint: { socketPath: ha.endpoint.socketPath, authorization: hb.endpoint.authorization }, directory: '/workspace' });
    await expect(crossed.health()).rejects.toThrow(/refused our credentials/);
  }, 90_000);

  it('at the limit, evicts the least recently used idle runtime; with every runtime busy, says so', async () => {
    const before = await rows();
    const pidOfA = before.find((r) => r.userId === a.userId)!.pid;
    pool.setRunning(b.userId, 'ses_busy', true);
    await new Promise((r) => setTimeout(r, 600));
    await pool.acquire(c);
    // a was idle and least recently used: stopped to make room; b runs a turn: kept.
    await until(() => !isProcessAlive(pidOfA));
    expect((await rows()).map((r) => r.userId).sort()).toEqual([b.userId, c.userId].sort());
    pool.setRunning(c.userId, 'ses_busy2', true);
    await expect(pool.acquire(a)).rejects.toBeInstanceOf(RuntimeBusyError);
    pool.setRunning(b.userId, 'ses_busy', false);
    pool.setRunning(c.userId, 'ses_busy2', false);
  }, 90_000);

  it('restarts a runtime that dies, and tells its listeners where it is now', async () => {
    const seen: Array<RuntimeHandle | null> = [];
    const off = pool.onChange((o, h) => o.userId === c.userId && seen.push(h));
    const pid = (await rows()).find((r) => r.userId === c.userId)!.pid;
    process.kill(pid, 'SIGKILL');
    await until(() => seen.some((h) => h !== null), 60_000);
    off();
    expect(seen[0]).toBeNull();
    const now = (await rows()).find((r) => r.userId === c.userId)!;
    expect(now.pid).not.toBe(pid);
    expect(await healthy(seen.find((h) => h)!)).toBe(true);
  }, 90_000);

  it('a process that does not host the pool finds a running runtime by its row, and has the host start one', async () => {
    const remote = await testPool(t, { max: 2, idleMs: 60_000, freezeAfterMs: 0 }, { hosting: false });
    const hb = await remote.acquire(b);
    expect(hb.endpoint.socketPath).toBe((await pool.acquire(b)).endpoint.socketPath);
    expect(await healthy(hb)).toBe(true);
  }, 90_000);

  it('prepares a runtime it starts ahead of a first prompt, unless a turn asks for the runtime meanwhile', async () => {
    // The preparation is a file search and the provider list (RuntimeClient.warmUp); the runtime logs each search.
    const searches = (o: RuntimeOwner) => {
      const dir = join(t.env.config().dataDir, 'runtimes', o.userId, 'home', '.local', 'share', 'opencode', 'log');
      const text = existsSync(dir) ? readdirSync(dir).map((f) => readFileSync(join(dir, f), 'utf8')).join('\n') : '';
      return (text.match(/message="find file"/g) ?? []).length;
    };
    // Neither a row nor an entry in the host: a runtime being stopped (row gone, entry not yet) is not
    // fresh, and a prestart of it would not prepare it.
    const notRunning = async () => {
      let found: RuntimeOwner | undefined;
      await until(async () => {
        const running = new Set([...(await rows()).map((r) => r.userId), ...pool.live().map((l) => l.userId)]);
        found = [a, b, c].find((o) => !running.has(o.userId));
        return !!found;
      });
      return found!;
    };
    // Idle long enough for the pool to make room (recentUseMs).
    await new Promise((r) => setTimeout(r, 600));
    const first = await notRunning();
    const before = searches(first);
    // Asked twice while it starts (the dashboard opens, then a session is created): still prepared, once.
    await Promise.all([pool.prestart(first), pool.prestart(first)]);
    // The runtime writes its log on its own time: on a loaded CI machine that took longer than 10 s.
    await expect.poll(() => searches(first), { timeout: 30_000 }).toBe(before + 1);

    // A turn asks for the runtime while it starts: the turn builds what it needs, nothing beside it.
    await new Promise((r) => setTimeout(r, 600));
    const second = await notRunning();
    const already = searches(second);
    await Promise.all([pool.prestart(second), pool.acquire(second)]);
    await new Promise((r) => setTimeout(r, 1000));
    expect(searches(second)).toBe(already);
  }, 90_000);

  it('stops runtimes idle for longer than the idle time, and every runtime on stop', async () => {
    // At least one runs (the one before may have run long enough for every runtime to be idle-stopped).
    await pool.acquire(a);
    const pids = (await rows()).map((r) => r.pid);
    expect(pids.length).toBeGreaterThan(0);
    await until(async () => (await rows()).length === 0, 30_000);
    expect(pids.every((p) => !isProcessAlive(p))).toBe(true);
    const h = await pool.acquire(a);
    const pid = (await rows())[0].pid;
    await pool.stop();
    expect(isProcessAlive(pid)).toBe(false);
    expect(await rows()).toEqual([]);
    // The sandbox is gone with its socket bridge: nothing answers there any more.
    await expect(healthy(h)).rejects.toThrow();
  }, 90_000);
});
