import type { Database } from '../../db/database.js';
import { waitForProcessExit } from '../../lib/process-state.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { Logger } from '../logger.js';
import { createManagedRuntime, isManagedRuntime, type ManagedRuntime, type RuntimeEndpoint } from './opencode-process.js';
import type { RuntimeRepo } from './runtime.repo.js';

const ORPHAN_EXIT_WAIT_MS = 5000;

/**
 * The runtime's lifecycle in the process that owns it (`aws serve`). Managed mode: starts opencode as a
 * child, publishes where it listens (password sealed) so `aws worker` and the CLI can reach it, and
 * re-applies the recorded configuration after every (re)start. External mode: only re-applies.
 */
export function createRuntimeHost(deps: { mode: 'managed' | 'external'; nice?: number; dataDir: string; db: Database; box: SecretBox; repo: RuntimeRepo; log: Logger }) {
  let managed: ManagedRuntime | null = null;
  let stopRestartListener: (() => void) | null = null;

  const publish = (ep: RuntimeEndpoint, pid: number | undefined) =>
    deps.repo.publishEndpoint(deps.db, {
      url: ep.url,
      passwordSealed: deps.box.seal(Buffer.from(ep.authorization.slice(6), 'base64').toString().slice('opencode:'.length)),
      pid: pid ?? null,
    });

  /**
   * A serve that was killed outright (SIGKILL, OOM) leaves its runtime child running. The next start
   * stops it, recognised by the pid it recorded and the HOME only our managed runtime has. (Under
   * systemd the unit's control group already takes care of it.)
   */
  async function reapOrphan(): Promise<void> {
    const pid = (await deps.repo.endpoint(deps.db))?.pid;
    // Not ours (gone, or the pid now belongs to another process): nothing to stop.
    if (!pid || pid === process.pid || !isManagedRuntime(pid, deps.dataDir)) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return; // gone already
    }
    // Two runtimes on one HOME would share its SQLite database: start the new one only once the old is dead.
    if (await waitForProcessExit(pid, ORPHAN_EXIT_WAIT_MS)) deps.log.warn({ runtimePid: pid }, 'stopped the agent runtime a previous serve left running');
    else deps.log.error({ runtimePid: pid }, `the agent runtime a previous serve left running did not exit within ${ORPHAN_EXIT_WAIT_MS / 1000} s of SIGKILL; starting a new one anyway`);
  }

  return {
    /** The managed runtime when this process hosts it; null elsewhere. */
    get managed(): ManagedRuntime | null {
      return managed;
    },

    /** Starts (managed) or checks (external) the runtime; `configure` pushes the applied configuration. */
    async start(configure: () => Promise<void>): Promise<void> {
      if (deps.mode === 'external') {
        await configure();
        return;
      }
      if (managed) return;
      managed = createManagedRuntime({ dataDir: deps.dataDir, log: deps.log, nice: deps.nice });
      const rt = managed;
      await reapOrphan().catch(() => {});
      const ready = async (ep: RuntimeEndpoint) => {
        await publish(ep, rt.pid);
        await configure();
      };
      stopRestartListener = rt.onRestart((ep) => {
        ready(ep).catch((err) => deps.log.error({ err: (err as Error).message }, 'could not configure the restarted runtime'));
      });
      await ready(await rt.start());
    },

    /**
     * Stops the managed runtime and forgets its record, so that no other process (a CLI, a worker)
     * trusts an endpoint where nothing of ours listens any more (the port may be reused by anyone).
     */
    async stop(): Promise<void> {
      stopRestartListener?.();
      const pid = managed?.pid;
      await managed?.stop();
      managed = null;
      if (pid) await deps.repo.clearEndpoint(deps.db, pid).catch((err) => deps.log.warn({ err: (err as Error).message }, 'could not clear the runtime endpoint record'));
    },
  };
}

export type RuntimeHost = ReturnType<typeof createRuntimeHost>;
