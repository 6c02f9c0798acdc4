import { hostname } from 'node:os';
import type { Config } from '../config/config.schema.js';
import type { Database } from '../db/database.js';
import type { EventBus } from '../kernel/events.js';
import type { Logger } from '../kernel/logger.js';
import type { createAgentEgress } from './egress/agent-egress.js';
import type { createRunnerFleet } from './runners/runner-fleet.js';
import type { createRunnersService } from './runners/runners.service.js';
import { probeSandbox } from './runtime/host/sandbox.js';
import type { RuntimePool } from './runtime/runtime-pool.js';
import type { SessionStreams } from './sessions/session-stream.js';
import type { createTurnRunner } from './sessions/turn-runner.js';
import type { createTerminalService } from './terminal/terminal.service.js';
import type { SpendingService } from './usage/spending.service.js';

type Made<F extends (...args: any) => any> = ReturnType<F>;

/** Model calls of a runtime that went away are aborted where their gateway runs (any serve): `{ tenantId, userId, before }`. */
export const MODEL_CALLS_CUT_CHANNEL = 'model-calls.cut';
/** How often a serve records the model calls that processes which died left in flight (those it could not see die at its start). */
const ORPHAN_HOLDS_EVERY_MS = 10 * 60_000;

/**
 * This process as the host of the users' runtimes (`aws serve`): what starts, in which order, and what
 * stops, in the order that loses nothing.
 */
export function createRuntimeLifecycle(deps: {
  config: Config;
  db: Pick<Database, 'mode'>;
  bus: EventBus;
  log: Logger;
  fleet: Pick<Made<typeof createRunnerFleet>, 'start' | 'stop'>;
  streams: Pick<SessionStreams, 'start' | 'stop'>;
  pool: Pick<RuntimePool, 'hosting' | 'status' | 'followStops' | 'host' | 'stop'>;
  runners: Pick<Made<typeof createRunnersService>, 'registerLocal' | 'localStopped'>;
  turns: Pick<Made<typeof createTurnRunner>, 'reconcile'>;
  egress: Pick<Made<typeof createAgentEgress>, 'modelCalls'>;
  spending: Pick<SpendingService, 'settleOrphans'>;
  terminals: Pick<Made<typeof createTerminalService>, 'stop'>;
  /** How many runtimes this host holds (its local runner's capacity). */
  capacity: number;
  serveId: string;
}) {
  const { config, db, bus, fleet, streams, pool, runners, turns, egress, spending, terminals } = deps;
  /** This serve's own local runner (registered when it starts hosting); null: it hosts none. */
  let localRunnerId: string | null = null;
  /** While this process serves the runtimes (startRuntime): its model-call cuts and sweep of left-behind calls. */
  let offCuts: (() => Promise<void>) | null = null;
  let orphanSweep: NodeJS.Timeout | null = null;

  return {
    /** This serve's own local runner, once it hosts; null before and when it hosts none. */
    localRunnerId: () => localRunnerId,

    /**
     * A stopping serve lets the turns its own runtimes are running end, for at most `graceMs` (the
     * session streams go on meanwhile): resolves once none runs, or the time is up. How many still ran.
     */
    async drainTurns(graceMs: number): Promise<number> {
      const deadline = Date.now() + graceMs;
      let busy = pool.hosting ? pool.status().busy : 0;
      while (busy > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        busy = pool.status().busy;
      }
      return busy;
    },
    /**
     * Makes this process the host of the users' runtimes (`aws serve`) and starts the session streams.
     * Fails closed: where no sandbox can start, the API serves but no agent runs (turns fail with the
     * reason and the fix; /readyz says so), unless the operator sets AGENTWS_RUNTIME_SANDBOX=off.
     */
    async startRuntime(): Promise<void> {
      const probe = config.runtime.sandbox ? probeSandbox() : { ok: true as const };
      if (!probe.ok) {
        deps.log.error({ problem: probe.problem, hint: probe.hint }, 'agents cannot run: no sandbox can be started on this host (AGENTWS_RUNTIME_SANDBOX=on)');
      } else if (!config.runtime.sandbox) {
        deps.log.warn('AGENTWS_RUNTIME_SANDBOX=off: agents run unsandboxed, with this service\'s files, secrets and network in their reach. For single-user trials only.');
      }
      await fleet.start();
      // Following the session streams first: what hosting finds (turns lost with a serve that died) is
      // told to this serve's stream clients too.
      await streams.start();
      // Other processes (`aws user erase`) ask the serve to stop a person's runtime, here or on its runner.
      await pool.followStops();
      // With the local runner off, this serve hosts no runtime: agents run on runner hosts only.
      if (config.runtime.localRunner) {
        await pool.host(probe.ok ? undefined : { problem: probe.problem!, hint: probe.hint });
        if (probe.ok) localRunnerId = await runners.registerLocal({ name: `local-${hostname()}`.toLowerCase().replace(/[^a-z0-9._-]/g, '-').slice(0, 63), capacity: deps.capacity, serveId: deps.serveId }).catch((err) => {
          deps.log.warn({ err: (err as Error).message }, 'could not register this serve as a runner: users are placed on it only while no runner host is registered');
          return null;
        });
      }
      // Turns a serve that died left in flight, with no runtime anywhere now: they end, with an error.
      await turns.reconcile().catch((err) => deps.log.error({ err: (err as Error).message }, 'could not end the turns a stopped serve left'));
      // The model calls of a runtime that went away, wherever it was declared lost: aborted here if they
      // pass this process's gateway.
      egress.modelCalls.resume();
      offCuts = await bus.subscribe(MODEL_CALLS_CUT_CHANNEL, (p) => {
        const c = p as { tenantId?: unknown; userId?: unknown; before?: unknown } | null;
        if (typeof c?.tenantId === 'string' && typeof c.userId === 'string') egress.modelCalls.cut({ tenantId: c.tenantId, userId: c.userId }, typeof c.before === 'number' ? c.before : Date.now());
      });
      // Model calls a process that died left in flight are recorded at their estimate: now (those of this
      // host's dead processes; on the embedded database every other process's), and now and then after.
      const settleOrphans = (o: { everyOther?: boolean } = {}) =>
        spending.settleOrphans(o).then(
          (n) => n && deps.log.warn({ calls: n }, 'model calls left in flight by a process that died were recorded at the gateway\'s estimate'),
          (err) => deps.log.error({ err: (err as Error).message }, 'could not record the model calls a stopped process left in flight'),
        );
      await settleOrphans({ everyOther: db.mode === 'embedded' });
      orphanSweep = setInterval(() => void settleOrphans(), ORPHAN_HOLDS_EVERY_MS);
      orphanSweep.unref();
    },
    /**
     * Stops the runtimes this process hosts and the session streams, in the order that loses nothing: the
     * model calls in flight are aborted and recorded, the runtimes stopped (turns they still ran are lost,
     * and that is published), then the streams end once those events reached them.
     */
    async stopRuntime(): Promise<void> {
      if (orphanSweep) clearInterval(orphanSweep);
      orphanSweep = null;
      await offCuts?.().catch(() => {});
      offCuts = null;
      const cut = await egress.modelCalls.stop();
      if (cut) deps.log.warn({ calls: cut }, 'model calls still running at shutdown were aborted and charged the gateway\'s estimate');
      await terminals.stop();
      await pool.stop();
      await fleet.stop();
      await streams.stop();
      if (localRunnerId) await runners.localStopped(localRunnerId).catch(() => {});
    },
  };
}
