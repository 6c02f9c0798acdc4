import { readdirSync, readFileSync } from 'node:fs';

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
