import { silentLogger } from '../../src/kernel/logger.js';
import { createRuntimeLauncher } from '../../src/core/runtime/host/runtime-launcher.js';
import { createRuntimePool, type RuntimePool } from '../../src/core/runtime/runtime-pool.js';
import { createRuntimeRepo } from '../../src/core/runtime/runtime.repo.js';
import { createDbRuntimeRecords } from '../../src/core/runtime/runtime-records.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import type { TestApp } from './app.js';

type PoolDeps = Parameters<typeof createRuntimePool>[0];
/** What a test says of its pool: its size and timings, and the host's memory and swap if it tells them. */
export type TestPoolOptions = Pick<PoolDeps, 'max' | 'idleMs' | 'freezeAfterMs'> &
  Partial<Pick<PoolDeps, 'recentUseMs' | 'pageOutAfterMs' | 'startsAtOnce' | 'queuedWaitMs' | 'memory' | 'swap'>>;

/**
 * A runtime pool over the test app's database, the way serve builds its own: sandboxed (real bubblewrap
 * and opencode), each runtime's egress through the app's proxy and configured by its core. `hosting`
 * (the default) launches runtimes and hosts them (pool.host() already called); otherwise the pool is one
 * of a process that does not host runtimes (a worker): it finds them by their rows and asks the host
 * to start one, and never launches one itself.
 */
export async function testPool(t: TestApp, o: TestPoolOptions, { hosting = true }: { hosting?: boolean } = {}): Promise<RuntimePool> {
  const { core, db } = t.opened;
  const config = t.env.config();
  const pool = createRuntimePool({
    ...o,
    records: createDbRuntimeRecords({ db, repo: createRuntimeRepo(), box: createSecretBox([config.secrets.encryptionKey]), dataDir: config.dataDir }),
    bus: core.bus,
    log: silentLogger,
    dataDir: config.dataDir,
    sandboxed: true,
    credentialKey: config.secrets.encryptionKey,
    ...(hosting
      ? {
          launcher: () => createRuntimeLauncher({ dataDir: config.dataDir, sandbox: true, nice: 10, log: silentLogger }),
          listen: (identity, at) => core.egress.listen(identity, at),
          configure: (owner, handle, pid) => core.runtime.configureStarted(owner, handle, pid),
        }
      : {
          launcher: () => {
            throw new Error('a non-hosting pool never launches');
          },
          listen: async () => ({ address: 'none', close: async () => {} }),
          configure: async () => {},
        }),
  } satisfies PoolDeps);
  if (hosting) await pool.host();
  return pool;
}
