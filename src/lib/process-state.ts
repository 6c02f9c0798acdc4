import { readFileSync } from 'node:fs';

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
  try {
    // /proc/<pid>/stat is "pid (comm) state ..."; comm may hold spaces and parentheses, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    // No /proc (not Linux), or it exited between the two checks: trust kill(pid, 0) where /proc is absent.
    return process.platform !== 'linux';
  }
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
