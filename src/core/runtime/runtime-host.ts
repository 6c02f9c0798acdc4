import type { Database } from '../../db/database.js';
import { isProcessAlive, processHome, waitForProcessExit } from '../../lib/process-state.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { Logger } from '../logger.js';
import { createManagedRuntime, managedRuntimeHome, type ManagedRuntime, type RuntimeEndpoint } from './opencode-process.js';
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
    const { rows } = await deps.db.query<{ pid: number | null }>(`select pid from runtime_endpoint where id = 1`);
    const pid = rows[0]?.pid;
    if (!pid || pid === process.pid || !isProcessAlive(pid)) return;
    if (processHome(pid) !== managedRuntimeHome(deps.dataDir)) return; // another process now has that pid
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

    async stop(): Promise<void> {
      stopRestartListener?.();
      await managed?.stop();
      managed = null;
    },
  };
}

export type RuntimeHost = ReturnType<typeof createRuntimeHost>;
