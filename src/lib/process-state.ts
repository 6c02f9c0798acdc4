import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * The fields of /proc/<pid>/stat after the command name: [0] is the state (R, S, Z...), [1] the parent
 * pid, [11]/[12] user/system CPU ticks, [16] the niceness (fields 3, 4, 14/15 and 19 of proc(5)).
 * Null when there is no such process (or no /proc). The name may hold spaces and parentheses, so the
 * fields are read after its last ')'.
 */
export function processStatFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).trim().split(' ');
  } catch {
    return null;
  }
}

/** The HOME a process was started with (from /proc/<pid>/environ), or null when it cannot be read. */
export function processHome(pid: number): string | null {
  try {
    const home = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((v) => v.startsWith('HOME='));
    return home === undefined ? null : home.slice('HOME='.length);
  } catch {
    return null;
  }
}

/**
 * Whether a process is still running. A zombie counts as dead: it has exited and only waits for its
 * parent to collect its status. That matters for processes orphaned by a parent that was killed
 * outright: they are re-parented to PID 1, and in containers PID 1 is often not an init that reaps
 * them (Docker without --init), so a dead orphan can stay a zombie, and `kill(pid, 0)` still succeeds.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const fields = processStatFields(pid);
  // No stat: without /proc (not Linux) trust kill(pid, 0); on Linux it exited between the two checks.
  if (!fields) return process.platform !== 'linux';
  return fields[0] !== 'Z' && fields[0] !== 'X';
}

/** Resolves true once the process has exited (or is a zombie), false if it still runs after timeoutMs. */
export async function waitForProcessExit(pid: number, timeoutMs: number, pollMs = 25): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  return true;
}

const readOr = (file: string, or: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return or;
  }
};

/**
 * A process's live descendants, through /proc/<pid>/task/<tid>/children: no scan of all of /proc, and
 * every thread's list, since a child belongs to the thread that forked it.
 */
export function processDescendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      for (const c of readOr(`/proc/${p}/task/${t}/children`, '').trim().split(/\s+/).filter(Boolean).map(Number)) {
        out.push(c);
        walk(c);
      }
    }
  };
  walk(pid);
  return out;
}

/**
 * The private resident memory of processes (anonymous pages: heaps, stacks; not the binary or libraries,
 * which are shared and reclaimable), in KiB, from /proc/<pid>/status (cheap to read, unlike smaps);
 * processes gone meanwhile count 0.
 */
export function processesAnonKb(pids: number[]): number {
  let kb = 0;
  for (const pid of pids) kb += Number(/^RssAnon:\s+(\d+)/m.exec(readOr(`/proc/${pid}/status`, ''))?.[1] ?? 0);
  return kb;
}

/** This machine's boot: a pid names one process only within one boot of one machine. */
function bootId(): string {
  return readOr('/proc/sys/kernel/random/boot_id', '').trim() || 'unknown-boot';
}

/** This process's pid namespace (containers have their own): a pid names a process only within it. */
function pidNamespace(): string {
  try {
    return /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? 'unknown-ns';
  } catch {
    return 'unknown-ns';
  }
}

/** When a process started, in clock ticks since boot (/proc/<pid>/stat field 22): with its pid, one process. */
const startTicks = (pid: number): string | null => processStatFields(pid)?.[19] ?? null;

/**
 * A name for this very process that stays unique after it ends: `<hostname>/<boot id>/<pid namespace>/
 * <pid>/<start ticks>`. What a job attempt or a model call in flight is recorded under, so that another
 * process can tell later whether the one that made it still runs (processIdentityState).
 */
export function processIdentity(hostname: string): string {
  return `${hostname}/${bootId()}/${pidNamespace()}/${process.pid}/${startTicks(process.pid) ?? '0'}`;
}

/**
 * Whether the process a processIdentity names still runs, as far as this process can see: 'dead' when it
 * is of this machine, boot and pid namespace and its pid is gone or names another process now (one that
 * started at another time: pids are reused); 'alive' when it still runs; 'unknown' when this process
 * cannot see it (another machine, boot or container: its pids are not ours to check), or for a name of
 * another shape.
 */
export function processIdentityState(identity: string | null | undefined, hostname: string): 'alive' | 'dead' | 'unknown' {
  const m = /^(.*)\/([^/]+)\/([^/]+)\/(\d+)\/(\d+)$/.exec(identity ?? '');
  if (!m || m[1] !== hostname || m[2] !== bootId() || m[3] !== pidNamespace()) return 'unknown';
  const pid = Number(m[4]);
  if (!isProcessAlive(pid)) return 'dead';
  const ticks = startTicks(pid);
  return ticks === null || ticks === m[5] ? 'alive' : 'dead';
}
