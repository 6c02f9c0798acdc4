import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createTestEnv, type TestEnv } from './test-env.js';

/** A test installation with the core opened in this process (migrated unless told otherwise). */
export async function openTestCore(options: { migrate?: boolean; supervise?: boolean } = {}): Promise<{ env: TestEnv; opened: OpenedCore; close(): Promise<void> }> {
  const migrate = options.migrate !== false;
  // A copy of the migrated template when it would be migrated here anyway; migrator.up() then finds nothing to do.
  const env = await createTestEnv({ migrated: migrate });
  const opened = await openCore(env.config(), silentLogger, { supervise: options.supervise }).catch((err) => {
    env.keep();
    throw err;
  });
  if (migrate) await opened.core.migrator.up();
  return {
    env,
    opened,
    async close() {
      await opened.close();
      await env.cleanup();
    },
  };
}
