import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isProcessAlive, processDescendants } from '../../../lib/process-state.js';
import type { Logger } from '../../../kernel/logger.js';

/**
 * Freezes idle runtimes with the kernel's cgroup freezer, and thaws them when they are wanted. A frozen
 * runtime keeps its memory and every open connection but is never scheduled: its CPU is exactly zero,
 * where an idle opencode still wakes for its own timers (~0.4-1.2 % of a core each, issue 24). Thawing
 * takes a few milliseconds, against seconds for a restart.
 *
 * Each runtime gets a cgroup of its own under the service's cgroup: its sandbox's processes are moved
 * there once it answers, and whatever the agent starts afterwards is born there. cgroup v2 (the
 * unified hierarchy, `cgroup.freeze`) is used where it is mounted and writable; else cgroup v1's freezer
 * controller (`freezer.state`). Where neither can be written (an unprivileged service user without a
 * delegated cgroup), there is no freezer: runtimes simply stay awake, and status says why.
 *
 * The agent cannot reach any of this: the cgroup files are on the host, and the sandbox has its own
 * cgroup namespace and no capabilities.
 */
export interface RuntimeGroup {
  /** Whether every process of the group is frozen now. */
  readonly frozen: boolean;
  /** Moves a process and all its descendants into the group; false if the kernel refused. */
  adopt(pid: number): boolean;
  /** The pids in the group. */
  pids(): number[];
  /** Stops the group's processes from being scheduled; resolves once they are all frozen (or after 1 s). */
  freeze(): Promise<void>;
  /** Lets them run again; resolves once the kernel reports the group thawed. */
  thaw(): Promise<void>;
  /** Removes the group once its processes are gone (best effort). */
  remove(): void;
}

export interface Freezer {
  readonly kind: 'cgroup2' | 'cgroup1';
  /** A new group for one runtime, named for its user. */
  group(name: string): RuntimeGroup;
  /** Removes the service's own parent group (shutdown, once every runtime stopped). */
  close(): void;
}

/** Why there is no freezer, when openFreezer returns null (for status). */
export let freezerUnavailable: string | null = null;

const PARENT_PREFIX = 'agentws-runtimes-';

/** Mount point and the service's own path in one hierarchy, from /proc/self/mountinfo and /proc/self/cgroup. */
function hierarchy(v2: boolean): string | null {
  let mounts: string;
  let own: string;
  try {
    mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    own = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  // mountinfo: "... <mount point> <options> - <fstype> <source> <super options>"
  const mount = mounts
    .split('\n')
    .map((l) => l.split(' - '))
    .find(([, tail]) => (v2 ? tail?.startsWith('cgroup2 ') : tail?.startsWith('cgroup ') && tail.split(' ')[2]?.split(',').includes('freezer')));
  if (!mount) return null;
  const point = mount[0].split(' ')[4];
  // /proc/self/cgroup: "0::/path" (v2) or "<n>:<controllers>:/path" (v1).
  const line = own.split('\n').find((l) => (v2 ? l.startsWith('0::') : l.split(':')[1]?.split(',').includes('freezer')));
  if (!line) return null;
  const path = line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
  return join(point, path);
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}

const read = (file: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

/**
 * The freezer of this host for this process, or null (freezerUnavailable says why). Also removes the
 * empty parent groups left by service processes that died.
 */
export function openFreezer(log: Logger): Freezer | null {
  for (const kind of ['cgroup2', 'cgroup1'] as const) {
    const base = hierarchy(kind === 'cgroup2');
    if (!base) continue;
    const parent = join(base, `${PARENT_PREFIX}${process.pid}`);
    try {
      mkdirSync(parent, { recursive: true });
      // A v2 group without cgroup.freeze (kernel < 5.2) cannot freeze.
      if (kind === 'cgroup2' && !existsSync(join(parent, 'cgroup.freeze'))) {
        rmdirSync(parent);
        continue;
      }
    } catch (err) {
      freezerUnavailable = `cannot create a cgroup under ${base} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
      continue;
    }
    for (const name of safeList(base)) {
      const pid = Number(name.slice(PARENT_PREFIX.length));
      if (name.startsWith(PARENT_PREFIX) && pid !== process.pid && !isProcessAlive(pid)) removeTree(join(base, name));
    }
    freezerUnavailable = null;
    log.debug({ kind, parent }, 'runtimes are frozen while idle');
    return createFreezer(kind, parent);
  }
  freezerUnavailable ??= 'no cgroup freezer is mounted (cgroup v2 or the v1 freezer controller)';
  log.warn({ why: freezerUnavailable }, 'idle runtimes cannot be frozen: they stay awake while idle');
  return null;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** rmdir of a cgroup and its empty children (a cgroup directory is removed with rmdir, not unlinking its files). */
function removeTree(dir: string): void {
  for (const name of safeList(dir)) {
    const child = join(dir, name);
    if (existsSync(join(child, 'cgroup.procs'))) removeTree(child);
  }
  try {
    rmdirSync(dir);
  } catch {
    // still populated (a process not yet reaped): left for the next start to remove
  }
}

function createFreezer(kind: 'cgroup2' | 'cgroup1', parent: string): Freezer {
  const v2 = kind === 'cgroup2';
  return {
    kind,
    group(name: string): RuntimeGroup {
      const dir = join(parent, name.replace(/[^A-Za-z0-9_.-]/g, '_'));
      // A group left by an earlier runtime of this user in this process is reused (it is empty).
      mkdirSync(dir, { recursive: true });
      if (v2) writeFileSync(join(dir, 'cgroup.freeze'), '0');
      else writeFileSync(join(dir, 'freezer.state'), 'THAWED');
      let frozen = false;
      const isFrozen = () => (v2 ? /^frozen 1$/m.test(read(join(dir, 'cgroup.events'))) : read(join(dir, 'freezer.state')).trim() === 'FROZEN');
      const pids = () =>
        read(join(dir, 'cgroup.procs'))
          .split('\n')
          .filter(Boolean)
          .map(Number);
      return {
        get frozen() {
          return frozen;
        },
        adopt(pid: number): boolean {
          // Twice: a process forked while its parent moved is born in the old group.
          for (let pass = 0; pass < 2; pass++) {
            const inside = new Set(pids());
            for (const p of [pid, ...processDescendants(pid)]) {
              if (inside.has(p)) continue;
              try {
                writeFileSync(join(dir, 'cgroup.procs'), String(p));
              } catch (err) {
                // ESRCH: it exited meanwhile; anything else: we may not move it.
                if ((err as NodeJS.ErrnoException).code !== 'ESRCH') return false;
              }
            }
          }
          return true;
        },
        pids,
        async freeze() {
          frozen = true;
          writeFileSync(join(dir, v2 ? 'cgroup.freeze' : 'freezer.state'), v2 ? '1' : 'FROZEN');
          await until(isFrozen, 1000);
        },
        async thaw() {
          if (!frozen) return;
          frozen = false;
          writeFileSync(join(dir, v2 ? 'cgroup.freeze' : 'freezer.state'), v2 ? '0' : 'THAWED');
          await until(() => !isFrozen(), 1000);
        },
        remove() {
          removeTree(dir);
        },
      };
    },
    close() {
      removeTree(parent);
    },
  };
}
