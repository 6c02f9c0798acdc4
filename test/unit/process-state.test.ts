import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isProcessAlive, processIdentity, processIdentityState, waitForProcessExit } from '../../src/lib/process-state.js';
import { makeZombie } from '../helpers/zombie.js';

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
    const zombie = await makeZombie();
    try {
      expect(() => process.kill(zombie.pid, 0)).not.toThrow(); // what a bare existence check would wrongly call alive
      expect(isProcessAlive(zombie.pid)).toBe(false);
      expect(await waitForProcessExit(zombie.pid, 100)).toBe(true);
    } finally {
      zombie.release();
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

  it('names this process so that another can tell later whether it still runs: alive, dead (pid gone or reused), or unknown elsewhere', async () => {
    const me = processIdentity('host-a');
    expect(me).toMatch(/^host-a\/[^/]+\/\d+\/\d+\/\d+$/);
    expect(processIdentityState(me, 'host-a')).toBe('alive');
    // Another machine's process (or a name of another shape): not this process's to judge.
    expect(processIdentityState(me, 'host-b')).toBe('unknown');
    expect(processIdentityState(null, 'host-a')).toBe('unknown');
    expect(processIdentityState('host-a:1234', 'host-a')).toBe('unknown');
    const [host, boot, ns, pid, ticks] = me.split('/');
    // Another boot or pid namespace (a container): its pids are not ours to check.
    expect(processIdentityState([host, 'another-boot', ns, pid, ticks].join('/'), 'host-a')).toBe('unknown');
    expect(processIdentityState([host, boot, '1', pid, ticks].join('/'), 'host-a')).toBe('unknown');
    // This pid, but started at another time: a reused pid is another process.
    expect(processIdentityState([host, boot, ns, pid, String(Number(ticks) + 1)].join('/'), 'host-a')).toBe('dead');
    // A process that ran and exited.
    const child = spawn('sleep', ['5']);
    const childName = [host, boot, ns, String(child.pid), '0'].join('/');
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(processIdentityState(childName, 'host-a')).toBe('dead');
  });
});
