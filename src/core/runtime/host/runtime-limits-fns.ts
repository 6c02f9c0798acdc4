import { formatSize } from '../../../lib/size.js';
import { hostReserveBytes } from './runtime-capacity.js';

/**
 * What bounds one runtime, and the rules the host applies to it: pure, so every rule is tested on any
 * size of host (test/unit/runtime-limits-fns.test.ts). runtime-cgroups.ts writes the limits into the
 * kernel; runtime-host.ts watches what the kernel reports and applies the rules.
 */

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

/**
 * The default memory limit of one runtime (AGENTWS_RUNTIME_MEMORY_MAX=auto): a quarter of what the
 * runtimes may take together (the host's memory less its reserve), between 1 and 4 GiB. opencode holds
 * ~400 MiB after a turn (docs/developing/performance.md); an `npm install` of a large project or a test run with
 * workers adds 0.5-2 GiB; the scratch space in /tmp counts too. A quarter means one person can never take
 * more than a quarter of what everyone's agents share: 4 GiB on this 24 GB VM, 1.75 GiB on an 8 GiB host.
 */
export function runtimeMemoryDefault(totalBytes: number): number {
  const share = runtimesMemoryTotal(totalBytes) / 4;
  return Math.floor(Math.min(4 * GiB, Math.max(GiB, share)) / MiB) * MiB;
}

/** What all runtimes of a host may take together: its memory less the reserve kept for the service, PostgreSQL and the OS. */
export function runtimesMemoryTotal(totalBytes: number): number {
  return Math.max(GiB, Math.floor(totalBytes - hostReserveBytes(totalBytes)));
}

/**
 * The default process limit of one runtime (AGENTWS_RUNTIME_PIDS_MAX), counted as the kernel counts
 * them: tasks, threads included. An idle runtime is ~12 (bwrap, socat, opencode's threads); `make -j`,
 * a test runner's workers or a headless browser take tens to a few hundred; a fork bomb takes all there
 * are (the host's pid_max is 32768 on this VM).
 */
const RUNTIME_PIDS_DEFAULT = 1024;

/** What all runtimes may take together: half the pids the host has, so the service and PostgreSQL can always fork. */
export function runtimesPidsTotal(pidMax: number, threadsMax: number): number {
  return Math.max(RUNTIME_PIDS_DEFAULT, Math.floor(Math.min(pidMax, threadsMax) / 2));
}

/**
 * inotify instances the host's user must be allowed for `capacity` runtimes. The kernel counts them per
 * user on the host (fs.inotify.max_user_instances, 128 by default), whatever the sandbox's user
 * namespace: every runtime's opencode holds one (it watches the workspace's .git), and the agent's own
 * tools (a dev server, a test watcher) want some: four a runtime, and the host's own 128 besides.
 */
export function inotifyInstancesWanted(capacity: number): number {
  return 128 + 4 * capacity;
}

/**
 * The free space below which the data directory's filesystem is short: 5 % of it, between 1 and 20 GiB
 * (at most half of a small one). The database (embedded) and everyone's workspaces live there: under it the
 * host freezes every awake runtime at once, measures them, and stops the ones past their quota.
 */
export function diskFloorBytes(fsTotalBytes: number): number {
  return Math.min(fsTotalBytes / 2, Math.max(GiB, Math.min(20 * GiB, fsTotalBytes * 0.05)));
}

/** Free inodes below which the filesystem is short (a million empty files fill inodes, not bytes). */
export function inodeFloor(fsTotalInodes: number): number {
  return Math.min(fsTotalInodes / 2, Math.max(10_000, fsTotalInodes * 0.02));
}

/** A person's quota: their tenant's setting (MiB) where it has one, else the operator's default (bytes; null: none). */
export function effectiveQuotaBytes(tenantQuotaMb: unknown, defaultBytes: number | null): number | null {
  return typeof tenantQuotaMb === 'number' && Number.isInteger(tenantQuotaMb) && tenantQuotaMb > 0 ? tenantQuotaMb * MiB : defaultBytes;
}

/**
 * When a runtime's files are measured again (du over its workspace, home and run directory; a few hundred
 * milliseconds for 100,000 files, off the event loop): every 30 s while it is awake (a frozen one writes
 * nothing), sooner when the filesystem lost more than a tenth of the quota (at most 256 MiB) since its
 * last measure (someone is writing), never more often than 20 times the last measure took (a huge
 * workspace costs at most 5 % of a core to watch).
 */
export function scanDue(o: { now: number; lastAt: number; lastMs: number; freeAtLast: number; freeNow: number; quotaBytes: number }): boolean {
  const since = o.now - o.lastAt;
  if (since < Math.max(1000, 20 * o.lastMs)) return false;
  if (since >= 30_000) return true;
  return o.freeAtLast - o.freeNow >= Math.min(256 * MiB, o.quotaBytes / 10);
}

/**
 * Whether a workspace grew since its last measure (by more than what the runtime's own bookkeeping writes
 * when it is only read: its session database). The first measure of a runtime has nothing to compare.
 */
export const growing = (before: number | null, now: number | null): boolean => before !== null && now !== null && now > before + 4 * MiB;

/** Whether a measured workspace is past its quota. */
export const overQuota = (usedBytes: number | null, quotaBytes: number | null): boolean => usedBytes !== null && quotaBytes !== null && usedBytes >= quotaBytes;

/**
 * The process limit's verdict at a sweep: `told` when forks were refused since the last sweep (the person
 * hears of it once), `stop` when they were refused at two sweeps in a row: a fork bomb keeps every pid
 * taken, while a build that hit the limit once has failed and let go.
 */
export function pidsVerdict(o: { refusedBefore: number; refusedNow: number; hitLastSweep: boolean }): 'ok' | 'told' | 'stop' {
  if (o.refusedNow <= o.refusedBefore) return 'ok';
  return o.hitLastSweep ? 'stop' : 'told';
}

/** What the host reports when a runtime meets one of its limits. */
export type LimitNotice =
  /** The OOM killer ended a process of the runtime (`runtime`: the runtime itself, which restarts). */
  | { kind: 'memory'; limitBytes: number | null; ended: 'process' | 'runtime' }
  /** Forks were refused at the process limit (`stopped`: the runtime was stopped for it). */
  | { kind: 'processes'; limit: number | null; stopped: boolean }
  /** The workspace passed its quota: the runtime was stopped. */
  | { kind: 'disk'; usedBytes: number; quotaBytes: number; stopped: boolean };

/** A notice as the control plane receives it from a runner: checked field by field, or null. */
export function parseLimitNotice(body: unknown): LimitNotice | null {
  const b = body as Record<string, unknown> | null;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
  if (!b || typeof b !== 'object') return null;
  if (b.kind === 'memory' && (b.ended === 'process' || b.ended === 'runtime')) return { kind: 'memory', limitBytes: n(b.limitBytes), ended: b.ended };
  if (b.kind === 'processes') return { kind: 'processes', limit: n(b.limit), stopped: b.stopped === true };
  if (b.kind === 'disk' && n(b.usedBytes) !== null && n(b.quotaBytes) !== null) return { kind: 'disk', usedBytes: n(b.usedBytes)!, quotaBytes: n(b.quotaBytes)!, stopped: b.stopped === true };
  return null;
}

/** What the person reads on their session's stream (`runtime.limit`). */
export function limitMessage(n: LimitNotice): string {
  switch (n.kind) {
    case 'memory':
      return n.ended === 'runtime'
        ? `Your agent's runtime passed its memory limit${n.limitBytes ? ` of ${formatSize(n.limitBytes)}` : ''} and was ended by the kernel; it restarts for your next prompt.`
        : `A process your agent ran passed the memory limit${n.limitBytes ? ` of ${formatSize(n.limitBytes)}` : ''} of your agent and was ended by the kernel (the tool reports it as killed); the agent goes on.`;
    case 'processes':
      return n.stopped
        ? `Your agent kept every process it may have${n.limit ? ` (${n.limit})` : ''} busy and could start no more: its runtime was stopped. It restarts for your next prompt.`
        : `Your agent reached its limit of ${n.limit ?? 'its'} processes: starting more failed.`;
    case 'disk':
      return `Your workspace uses ${formatSize(n.usedBytes)}, past its quota of ${formatSize(n.quotaBytes)}${n.stopped ? ': your agent was stopped' : ''}. Delete files (build outputs, dependencies, caches) or ask an admin to raise the quota.`;
  }
}

/** Why a runtime was stopped or ended for a limit (what the turn lost with it says). */
export function limitStopWhy(n: LimitNotice): string {
  switch (n.kind) {
    case 'memory':
      return `it passed its memory limit${n.limitBytes ? ` of ${formatSize(n.limitBytes)}` : ''} and the kernel ended it`;
    case 'processes':
      return `it kept its whole process limit${n.limit ? ` of ${n.limit}` : ''} busy (a fork bomb?)`;
    case 'disk':
      return `its workspace passed its quota (${formatSize(n.usedBytes)} of ${formatSize(n.quotaBytes)})`;
  }
}

/**
 * A person's figures as their host last reported them, read at `nowMs`: memory and processes count only
 * while the runtime runs there and the host still reports (a row whose host went silent says nothing of
 * now, `freshMs` after its last report); disk stands either way (the files stay).
 */
export function usageAsOf<T extends { running: boolean; updatedAt: Date; memoryBytes: number | null; pids: number | null }>(u: T, nowMs: number, freshMs: number): T {
  const running = u.running && nowMs - u.updatedAt.getTime() < freshMs;
  return { ...u, running, memoryBytes: running ? u.memoryBytes : null, pids: running ? u.pids : null };
}

/** From this fraction of a limit on, a runtime is "near" it (status, the dashboard). */
const NEAR_LIMIT = 0.8;

/** Which limits a person's runtime is near or past (a disk quota also when their runtime is stopped: the files stay). */
export function nearLimits(u: { running: boolean; memoryBytes: number | null; memoryMaxBytes: number | null; pids: number | null; pidsMax: number | null; diskBytes: number | null; diskQuotaBytes: number | null }): Array<'memory' | 'processes' | 'disk'> {
  const near = (used: number | null, max: number | null) => used !== null && max !== null && max > 0 && used >= NEAR_LIMIT * max;
  const out: Array<'memory' | 'processes' | 'disk'> = [];
  if (u.running && near(u.memoryBytes, u.memoryMaxBytes)) out.push('memory');
  if (u.running && near(u.pids, u.pidsMax)) out.push('processes');
  if (near(u.diskBytes, u.diskQuotaBytes)) out.push('disk');
  return out;
}
