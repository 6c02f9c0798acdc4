import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isProcessAlive, waitForProcessExit } from '../../src/lib/process-state.js';

describe('process state', () => {
  it('tells a running process from one that exited', async () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    const child = spawn('sleep', ['5']);
    expect(isProcessAlive(child.pid!)).toBe(true);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(isProcessAlive(child.pid!)).toBe(false);
  });

  it('counts a zombie (exited, never reaped by its parent) as dead', async () => {
    // The shell starts a child in the background, prints its pid and becomes `sleep`, which never reaps
    // it. The child exits only once its parent is `sleep`: exiting earlier, the shell would reap it.
    const child = `sh -c 'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.01; done'`;
    const parent = spawn('sh', ['-c', `${child} & echo $!; exec sleep 30`]);
    const [line] = await once(parent.stdout!, 'data');
    const zombie = Number(String(line).trim());
    try {
      await expect.poll(() => /\) Z /.test(procStat(zombie)), { timeout: 20_000 }).toBe(true);
      expect(() => process.kill(zombie, 0)).not.toThrow(); // what a bare existence check would wrongly call alive
      expect(isProcessAlive(zombie)).toBe(false);
      expect(await waitForProcessExit(zombie, 100)).toBe(true);
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('waitForProcessExit gives up on a process that keeps running', async () => {
    const child = spawn('sleep', ['5']);
    try {
      expect(await waitForProcessExit(child.pid!, 120)).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

function procStat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return '';
  }
}
