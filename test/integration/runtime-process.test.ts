import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createManagedRuntime, OPENCODE_VERSION, type ManagedRuntime } from '../../src/core/runtime/opencode-process.js';
import { silentLogger } from '../../src/core/logger.js';
import { DB_MODE } from '../helpers/test-env.js';

// The runtime does not depend on the database mode: run once.
describe.runIf(DB_MODE === 'postgres')('managed opencode runtime (real binary)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aws-rt-'));
  let runtime: ManagedRuntime | undefined;
  afterAll(async () => {
    await runtime?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts on loopback with its own home and password, restarts when killed, and stops', async () => {
    runtime = createManagedRuntime({ dataDir, log: silentLogger });
    const first = await runtime.start();
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const health = await fetch(`${first.url}/global/health`, { headers: { authorization: first.authorization } });
    expect(await health.json()).toEqual({ healthy: true, version: OPENCODE_VERSION });
    expect((await fetch(`${first.url}/session`)).status).toBe(401);

    const restarted = new Promise<string>((resolve) => runtime!.onRestart((e) => resolve(e.url)));
    process.kill(runtime.pid!, 'SIGKILL');
    const url = await restarted;
    const again = await fetch(`${url}/global/health`, { headers: { authorization: first.authorization } });
    expect(again.ok).toBe(true);

    const pid = runtime.pid!;
    await runtime.stop();
    expect(() => process.kill(pid, 0)).toThrow();
    expect(runtime.endpoint).toBeNull();
  }, 90_000);
});
