import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { processStatFields } from '../../src/lib/process-state.js';
import { waitUntil } from './poll.js';

/**
 * Makes a zombie: a process that has exited but that its parent never reaps, as an orphan stays under a
 * PID 1 that does not reap (containers without an init). Resolves with its pid once it is a zombie;
 * `release()` kills the parent.
 */
export async function makeZombie(): Promise<{ pid: number; release(): void }> {
  // The shell starts a child in the background, prints its pid and becomes `sleep`, which never reaps
  // it. The child exits only once its parent is `sleep`: exiting earlier, the shell would reap it.
  const child = `sh -c 'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.01; done'`;
  const parent = spawn('sh', ['-c', `${child} & echo $!; exec sleep 60`]);
  const release = () => void parent.kill('SIGKILL');
  try {
    const [line] = await once(parent.stdout!, 'data');
    const pid = Number(String(line).trim());
    await waitUntil(`process ${pid} to become a zombie`, () => processStatFields(pid)?.[0] === 'Z', { timeoutMs: 20_000, intervalMs: 10 });
    return { pid, release };
  } catch (err) {
    release();
    throw err;
  }
}
