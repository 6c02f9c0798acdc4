import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { openRuntimeCgroups, type CgroupUsage, type RuntimeCgroups } from '../../src/core/runtime/host/runtime-cgroups.js';
import type { DiskSpace } from '../../src/core/runtime/host/runtime-disk.js';
import type { HostMemory, SwapInfo } from '../../src/lib/host-memory.js';
import { createRuntimeHost, type HostRecords, type RuntimeOwner } from '../../src/core/runtime/host/runtime-host.js';
import type { LimitNotice } from '../../src/core/runtime/host/runtime-limits-fns.js';
import type { LaunchLimits, RuntimeLauncher } from '../../src/core/runtime/host/runtime-launcher.js';

/**
 * The runtime host's rules for the limits, over what the kernel would say (a fake group whose counters the
 * test moves) and a stand-in runtime (a `sleep` process): who is told what, which runtime is stopped and
 * why, what is measured when. The kernel's side is test/unit/runtime-cgroups.test.ts and, for real,
 * test/security/limits-agent.test.ts.
 */
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const owner: RuntimeOwner = { tenantId: 't1', userId: 'u1' };

interface FakeGroup {
  usage: CgroupUsage;
  frozen: boolean;
  froze: number;
  killed: number;
  /** Page-outs asked, and whether the group was frozen at each. */
  pagedOut: boolean[];
}

function world(
  o: {
    cgroups?: 'fake' | 'none';
    quota?: number | null;
    measure?: () => number;
    space?: () => DiskSpace;
    freezeAfterMs?: number;
    pageOutAfterMs?: number;
    swap?: () => SwapInfo;
    memory?: () => HostMemory;
    inotifyLimitFile?: string;
    /** How long each fake page-out takes. */
    pageOutMs?: number;
  } = {},
) {
  const dataDir = mkdtempSync(join(tmpdir(), 'aws-host-'));
  const groups = new Map<string, FakeGroup>();
  const cgroups: RuntimeCgroups = {
    mechanisms: () => ({ freezer: 'cgroup2', memory: 'cgroup1', pids: 'cgroup1', cpu: 'cgroup1', unavailable: {} }),
    group(name, limits) {
      const g: FakeGroup = { usage: { memoryBytes: 300 * MiB, memoryMaxBytes: limits.memoryMaxBytes, oomKills: 0, pids: 12, pidsMax: limits.pidsMax, pidsRefused: 0, swapBytes: 0 }, frozen: false, froze: 0, killed: 0, pagedOut: [] };
      groups.set(name, g);
      return {
        procs: [`/fake/${name}/cgroup.procs`],
        canFreeze: true,
        get frozen() {
          return g.frozen;
        },
        pids: () => [],
        freeze: async () => {
          g.frozen = true;
          g.froze++;
        },
        thaw: async () => {
          g.frozen = false;
        },
        usage: () => ({ ...g.usage }),
        pageOut: async () => {
          g.pagedOut.push(g.frozen);
          if (o.pageOutMs) await new Promise((r) => setTimeout(r, o.pageOutMs));
          const beforeBytes = g.usage.memoryBytes!;
          g.usage = { ...g.usage, memoryBytes: 20 * MiB, swapBytes: beforeBytes - 20 * MiB };
          return { beforeBytes, afterBytes: 20 * MiB, ms: 1 };
        },
        kill: () => void g.killed++,
        remove: () => {},
      };
    },
    close: () => {},
  };
  const launches: LaunchLimits[] = [];
  const procs: ChildProcess[] = [];
  const launcher = {
    prepare: () => ({}),
    async launch(_dirs: unknown, proxy: (at: { path: string }) => Promise<unknown>, limits: LaunchLimits | null) {
      await proxy({ path: '/nonexistent/proxy.sock' });
      launches.push(limits!);
      const p = spawn('sleep', ['600'], { stdio: 'ignore' });
      procs.push(p);
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((res) => p.once('exit', (code, signal) => res({ code, signal, stderr: '' })));
      return {
        endpoint: { socketPath: '/nonexistent', authorization: 'Basic x' },
        directory: '/workspace',
        pid: p.pid!,
        exited,
        async stop() {
          p.kill('SIGKILL');
          await exited;
        },
      };
    },
  } as unknown as RuntimeLauncher;
  const stopped: Array<{ pid: number; why?: string; idle?: boolean }> = [];
  const notices: LimitNotice[] = [];
  const records: HostRecords = {
    started: async () => {},
    stopped: async (_o, pid, x) => void stopped.push({ pid, why: x?.why, idle: x?.idle }),
    hostStarting: async () => {},
    report: async () => {},
    hostStopped: async () => {},
    limit: async (_o, n) => void notices.push(n),
  };
  let measured = 0;
  const host = createRuntimeHost({
    records,
    log: silentLogger,
    dataDir,
    max: 4,
    idleMs: 600_000,
    freezeAfterMs: o.freezeAfterMs ?? 0,
    pageOutAfterMs: o.pageOutAfterMs ?? 0,
    ...(o.swap ? { swap: o.swap } : {}),
    ...(o.memory ? { memory: o.memory, recentUseMs: 0 } : {}),
    // Not this host's sysctl: a file of the test's, or none.
    inotifyLimitFile: o.inotifyLimitFile ?? null,
    sweepMs: 100,
    diskWatchMs: 100,
    sandboxed: true,
    credentialKey: 'k',
    launcher: () => launcher,
    listen: async () => ({ address: 'none', close: async () => {} }),
    configure: async () => {},
    openCgroups: () => (o.cgroups === 'none' ? openRuntimeCgroups(silentLogger, { want: { memory: true, pids: true, cpu: true }, total: { memoryBytes: null, pids: null }, host: { mountinfo: '', selfCgroup: '', pid: 1 } }) : cgroups),
    limits: { memoryMaxBytes: 1.5 * GiB, pidsMax: 300, tmpBytes: 64 * MiB },
    quotaOf: () => (o.quota === undefined ? 100 * MiB : o.quota),
    measureDisk: async () => {
      measured++;
      return o.measure ? o.measure() : 10 * MiB;
    },
    diskSpace: () => (o.space ? o.space() : { totalBytes: 100 * GiB, freeBytes: 80 * GiB, totalInodes: 1e7, freeInodes: 9e6 }),
  });
  cleanups.push(async () => {
    await host.stop();
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  return { host, groups, launches, stopped, notices, group: () => groups.get(owner.userId)!, measured: () => measured };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});
const poll = (f: () => unknown) => expect.poll(f, { interval: 20 });

describe('runtime host: the limits of each runtime', () => {
  it('starts a runtime in its group with its limits, the quota as its largest file; status says what holds and what it uses', async () => {
    const w = world();
    await w.host.start();
    await w.host.acquire(owner);
    expect(w.launches).toEqual([{ procs: ['/fake/u1/cgroup.procs'], fileSizeBytes: 100 * MiB }]);
    const s = w.host.status();
    expect(s.limits).toMatchObject({ memory: 'cgroup1', memoryMaxBytes: 1.5 * GiB, processes: 'cgroup1', processesMax: 300, cpu: 'cgroup1', tmpBytes: 64 * MiB, disk: 'measured' });
    expect(s.limits.unavailable.disk).toMatch(/not enforced by the kernel/);
    await poll(() => w.host.status().usage[0]).toMatchObject({ userId: 'u1', running: true, memoryBytes: 300 * MiB, pids: 12, pidsMax: 300, diskBytes: 10 * MiB, diskQuotaBytes: 100 * MiB });
  });

  it('a process ended at the memory limit: the person is told once, the runtime goes on', async () => {
    const w = world();
    await w.host.start();
    await w.host.acquire(owner);
    w.group().usage.oomKills = 1;
    await poll(() => w.notices).toEqual([{ kind: 'memory', limitBytes: 1.5 * GiB, ended: 'process' }]);
    await new Promise((r) => setTimeout(r, 300));
    expect(w.notices).toHaveLength(1);
    expect(w.stopped).toEqual([]);
  });

  it('the runtime itself ended at the memory limit: its turn is lost with why, the person told, and it restarts', async () => {
    const w = world();
    await w.host.start();
    const first = w.host.live()[0]?.pid ?? (await w.host.acquire(owner), w.host.live()[0].pid!);
    w.group().usage.oomKills = 1;
    process.kill(first, 'SIGKILL');
    await poll(() => w.stopped).toEqual([{ pid: first, why: expect.stringMatching(/passed its memory limit of 1\.5 GiB and the kernel ended it/), idle: false }]);
    expect(w.notices).toContainEqual({ kind: 'memory', limitBytes: 1.5 * GiB, ended: 'runtime' });
    // Restarted with back-off, a new group.
    await poll(() => w.launches.length).toBe(2);
  });

  it('forks refused at the process limit: told at the first sweep, stopped (never as idle) at the second in a row', async () => {
    const w = world();
    await w.host.start();
    await w.host.acquire(owner);
    w.group().usage.pidsRefused = 5;
    await poll(() => w.notices).toEqual([{ kind: 'processes', limit: 300, stopped: false }]);
    // A build that hit it once and let go is not stopped.
    await new Promise((r) => setTimeout(r, 300));
    expect(w.stopped).toEqual([]);
    // Unused for over 5 s, running nothing by its own account (a fork bomb's runtime says nothing): a
    // stop then counts as idle, and a turn it cut would be ended silently. A limit's stop never is.
    await new Promise((r) => setTimeout(r, 5200));
    w.group().usage.pidsRefused = 9;
    await poll(() => w.notices.length).toBe(2);
    w.group().usage.pidsRefused = 20;
    await poll(() => w.stopped).toEqual([{ pid: expect.any(Number), why: expect.stringMatching(/kept its whole process limit of 300 busy/), idle: false }]);
    expect(w.notices.at(-1)).toEqual({ kind: 'processes', limit: 300, stopped: true });
    expect(w.group().killed).toBeGreaterThan(0);
  });

  it('past the quota and growing: stopped (never as idle), the person told; one started past it runs on until it writes more', async () => {
    let bytes = 150 * MiB;
    let free = 80 * GiB;
    const w = world({ measure: () => bytes, space: () => ({ totalBytes: 100 * GiB, freeBytes: free, totalInodes: 1e7, freeInodes: 9e6 }) });
    await w.host.start();
    await w.host.acquire(owner);
    // Past it from the start (a quota lowered, or started to read a transcript): runs on.
    await poll(() => w.measured()).toBe(1);
    await new Promise((r) => setTimeout(r, 1500));
    expect(w.stopped).toEqual([]);
    // Measures are 30 s apart unless the disk loses a tenth of the quota since the last: it writes 40 MiB.
    bytes = 190 * MiB;
    free -= 40 * MiB;
    await poll(() => w.stopped).toEqual([{ pid: expect.any(Number), why: expect.stringMatching(/its workspace passed its quota \(190 MiB of 100 MiB\)/), idle: false }]);
    expect(w.notices).toEqual([{ kind: 'disk', usedBytes: 190 * MiB, quotaBytes: 100 * MiB, stopped: true }]);
    expect(w.measured()).toBe(2);
    // Status keeps their figures after the stop: their files stay.
    expect(w.host.status().usage[0]).toMatchObject({ running: false, diskBytes: 190 * MiB, diskQuotaBytes: 100 * MiB });
  });

  it('a data disk short of space: every awake runtime frozen at once, measured, the one past its quota and growing stopped, the others thawed', async () => {
    let free = 80 * GiB;
    const sizes = new Map<string, number>([['u1', 20 * MiB], ['u2', 20 * MiB]]);
    const seen: string[] = [];
    const w = world({
      space: () => ({ totalBytes: 100 * GiB, freeBytes: free, totalInodes: 1e7, freeInodes: 9e6 }),
      measure: () => {
        // Measured one after another; which runtime is asked is told by the order of the groups' freezes.
        const who = seen.length % 2 === 0 ? 'u1' : 'u2';
        seen.push(who);
        return sizes.get(who)!;
      },
    });
    await w.host.start();
    await w.host.acquire(owner);
    await w.host.acquire({ tenantId: 't1', userId: 'u2' });
    await poll(() => seen.length).toBeGreaterThanOrEqual(2);
    // u1 writes fast: the disk runs short before any regular measure.
    sizes.set('u1', 2 * GiB);
    free = 1 * GiB;
    await poll(() => w.groups.get('u1')!.froze + w.groups.get('u2')!.froze).toBe(2);
    await poll(() => w.stopped.map((s) => s.why)).toEqual([expect.stringMatching(/workspace passed its quota \(2 GiB of 100 MiB\)/)]);
    expect(w.notices).toContainEqual({ kind: 'disk', usedBytes: 2 * GiB, quotaBytes: 100 * MiB, stopped: true });
    expect(w.groups.get('u2')!.frozen).toBe(false);
    expect(w.host.live().map((l) => l.userId)).toEqual(['u2']);
  });

  it('no cgroup can be written here (an unprivileged service, the container image): runtimes still run, and status says why each limit is missing', async () => {
    const w = world({ cgroups: 'none' });
    await w.host.start();
    await w.host.acquire(owner);
    expect(w.launches).toEqual([{ procs: [], fileSizeBytes: 100 * MiB }]);
    const s = w.host.status();
    expect(s.limits).toMatchObject({ memory: null, processes: null, cpu: null, disk: 'measured' });
    expect(s.limits.unavailable).toMatchObject({ memory: expect.stringMatching(/no cgroup memory controller is mounted/), processes: expect.stringMatching(/no cgroup pids controller/), cpu: expect.stringMatching(/no cgroup cpu controller/) });
    expect(s.resident).toBe(1);
  });
});

describe('runtime host: idle runtimes paged out to swap', () => {
  const zram = (): SwapInfo => ({ totalBytes: 8 * GiB, freeBytes: 8 * GiB, zram: { storedBytes: 300 * MiB, usedBytes: 100 * MiB } });
  const other: RuntimeOwner = { tenantId: 't1', userId: 'u2' };

  it('frozen a while, a runtime is paged out (frozen as it is); its next use thaws it; status counts it and its share of the compressed pool', async () => {
    const w = world({ freezeAfterMs: 100, pageOutAfterMs: 200, swap: zram });
    await w.host.start();
    await w.host.acquire(owner);
    await poll(() => w.host.live()[0].state).toBe('paged-out');
    expect(w.group().pagedOut).toEqual([true]);
    const s = w.host.status();
    expect(s).toMatchObject({ frozen: 1, pagedOut: 1 });
    expect(s.limits).toMatchObject({ paging: 'cgroup1', pageOutAfterMs: 200, swap: { totalBytes: 8 * GiB, compressedStoredBytes: 300 * MiB, compressedUsedBytes: 100 * MiB } });
    expect(s.limits.unavailable.paging).toBeUndefined();
    // The fake group keeps no RSS (no pids): what it holds is its 280 MiB in swap at the pool's 1:3.
    await poll(() => Math.round(w.host.status().runtimesMemoryBytes / MiB)).toBe(Math.round(280 / 3));
    await w.host.acquire(owner);
    expect(w.host.live()[0].state).toBe('ready');
    expect(w.group().frozen).toBe(false);
    expect(w.host.status().pagedOut).toBe(0);
  });

  it('a person back while their page-out waits behind others: it is called off, and they do not wait for the others', async () => {
    const w = world({ freezeAfterMs: 100, pageOutAfterMs: 200, swap: zram, pageOutMs: 3000 });
    await w.host.start();
    await w.host.acquire(owner);
    await w.host.acquire(other);
    // Both reach their page-out at the same sweep: one runs (3 s here), the other waits behind it.
    await poll(() => w.groups.get('u1')!.pagedOut.length + w.groups.get('u2')!.pagedOut.length).toBe(1);
    const queued = w.groups.get('u1')!.pagedOut.length ? other : owner;
    const t0 = performance.now();
    await w.host.acquire(queued);
    // Not after the page-out ahead of it (and its own): well before the one running ends, on a loaded host too.
    expect(performance.now() - t0).toBeLessThan(1500);
    expect(w.host.live().find((l) => l.userId === queued.userId)?.state).toBe('ready');
    // Its turn runs (nothing pages it out again meanwhile); the page-out it was queued for never ran.
    w.host.setRunning(queued.userId, 'ses_1', true);
    await new Promise((r) => setTimeout(r, 1200));
    expect(w.groups.get(queued.userId)!.pagedOut).toEqual([]);
  });

  it('a runtime with a turn running is never paged out', async () => {
    const w = world({ freezeAfterMs: 100, pageOutAfterMs: 100, swap: zram });
    await w.host.start();
    await w.host.acquire(owner);
    w.host.setRunning(owner.userId, 'ses_1', true);
    await new Promise((r) => setTimeout(r, 600));
    expect(w.group().pagedOut).toEqual([]);
    expect(w.host.live()[0].state).toBe('ready');
  });

  it('without swap it stays frozen and resident, and status says why and how to turn it on', async () => {
    const w = world({ freezeAfterMs: 100, pageOutAfterMs: 100, swap: () => ({ totalBytes: 0, freeBytes: 0, zram: null }) });
    await w.host.start();
    await w.host.acquire(owner);
    await poll(() => w.host.live()[0].state).toBe('frozen');
    await new Promise((r) => setTimeout(r, 400));
    expect(w.group().pagedOut).toEqual([]);
    const l = w.host.limits();
    expect(l.paging).toBeNull();
    expect(l.unavailable.paging).toMatch(/no swap on this host.*install\.sh --systemd --zram/);
  });

  it('turned off, it says so', async () => {
    const w = world({ freezeAfterMs: 100, pageOutAfterMs: 0, swap: zram });
    await w.host.start();
    expect(w.host.limits().unavailable.paging).toBe('turned off (AGENTWS_RUNTIME_PAGEOUT_SECONDS=0)');
  });

  it('under memory pressure, idle runtimes are paged out (least recently used first) before any is stopped; a busy one is left alone', async () => {
    let available = 20 * GiB;
    const w = world({ freezeAfterMs: 60_000, pageOutAfterMs: 60_000, swap: zram, memory: () => ({ totalBytes: 24 * GiB, availableBytes: available }) });
    await w.host.start();
    await w.host.acquire(owner);
    await w.host.acquire(other);
    w.host.setRunning(other.userId, 'ses_1', true);
    await new Promise((r) => setTimeout(r, 50));
    // 200 MiB under the floor (half the 2.4 GiB reserve): paging u1 out (300 MiB, 20 left) covers it.
    available = 1.2 * GiB - 200 * MiB;
    await poll(() => w.groups.get('u1')!.pagedOut).toEqual([true]);
    // What paging out gave back (the kernel's figure, here the test's).
    available = 20 * GiB;
    await new Promise((r) => setTimeout(r, 400));
    expect(w.stopped).toEqual([]);
    available = 1.2 * GiB - 200 * MiB;
    expect(w.groups.get('u2')!.pagedOut).toEqual([]);
    // Still short with nothing more to page out: the idle (paged-out) one is stopped, never the busy one.
    await poll(() => w.stopped.length).toBe(1);
    expect(w.host.live().map((l) => l.userId)).toEqual(['u2']);
  });
});

describe('runtime host: the host\'s inotify budget', () => {
  it('raises fs.inotify.max_user_instances to what its runtimes want (each opencode holds one, their tools want some), never lowers it', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'aws-inotify-')), 'max_user_instances');
    writeFileSync(file, '128\n');
    const w = world({ inotifyLimitFile: file });
    await w.host.start();
    // 4 runtimes: 128 for the host's own, 4 for each.
    expect(readFileSync(file, 'utf8')).toBe('144');
    expect(w.host.limits().unavailable.inotify).toBeUndefined();
    writeFileSync(file, '8192');
    const again = world({ inotifyLimitFile: file });
    await again.host.start();
    expect(readFileSync(file, 'utf8')).toBe('8192');
  });
});
