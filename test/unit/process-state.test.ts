import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isProcessAlive, waitForProcessExit } from '../../src/lib/process-state.js';
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
});
