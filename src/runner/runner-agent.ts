import { mkdirSync } from 'node:fs';
import http2 from 'node:http2';
import type { Logger } from '../kernel/logger.js';
import { RUNNER_PATHS, type RunnerInfo } from '../core/runtime/host/runner-protocol.js';
import { createRuntimeLauncher } from '../core/runtime/host/runtime-launcher.js';
import { createRuntimeHost, type HostRecords } from '../core/runtime/host/runtime-host.js';
import { randomSecret } from '../lib/secrets.js';
import { createControlClient } from './control-client.js';
import { createRunnerChannel } from './runner-channel.js';
import { createRunnerEgress } from './runner-egress.js';
import { createRunnerOrders } from './runner-orders.js';
import { createRunnerState, fenceOf, notify } from './runner-state.js';

/**
 * A runner host (`aws runner`): hosts the sandboxed runtimes of the users the control plane places on
 * it, exactly as `aws serve` hosts them on one machine (the same runtime host, sandbox, freezer and egress
 * proxy), and holds no secret of the appliance: no database, no encryption key, no provider key. It
 * dials the control plane (runner-protocol.ts) and then answers it over that one connection; what its
 * runtimes need from the control plane (model calls and memory tools through the gateway host, egress
 * rules, the tenant's shared files) it asks for with its runner token, naming the user and the lease.
 */
export interface RunnerOptions {
  controlUrl: string;
  token: string;
  info: RunnerInfo;
  dataDir: string;
  sandbox: boolean;
  nice: number;
  idleMs: number;
  freezeAfterMs: number;
  /** Time frozen after which a runtime is paged out to swap; 0 or absent: never. */
  pageOutAfterMs?: number;
  /** What bounds each runtime (memory, processes: null = off) and its /tmp's size; the quota comes with each start. */
  limits?: { memoryMaxBytes: number | null; pidsMax: number | null; tmpBytes: number };
  log: Logger;
}

export function createRunnerAgent(o: RunnerOptions) {
  const { log } = o;
  const state = createRunnerState();
  const control = createControlClient({ controlUrl: o.controlUrl, token: o.token, info: o.info, fenceOf: (userId) => fenceOf(state, userId) });
  const proxy = createRunnerEgress(control, log);
  let fenceTimer: NodeJS.Timeout | null = null;

  // The host records nothing here: the control plane's database is written by the control plane, when
  // this runner tells it a runtime started (configure below) or stopped.
  const records: HostRecords = {
    started: async () => {},
    stopped: async (owner, pid, o) => {
      notify(state, { type: 'stopped', tenantId: owner.tenantId, userId: owner.userId, fence: fenceOf(state, owner.userId), pid });
      // Why, and whether it was idle: a stop of an idle runtime loses no turn (turn-runner.ts runtimeLost).
      await control.call('POST', RUNNER_PATHS.stopped, { pid, why: o?.why ?? null, idle: o?.idle ?? false }, owner).catch((err) => log.warn({ err: (err as Error).message }, 'could not tell the control plane a runtime stopped'));
    },
    hostStarting: async () => {},
    report: async (_host, s) => {
      state.lastStatus = s;
    },
    hostStopped: async () => {},
    // A limit met: the control plane tells the person (on the stream of a turn they have running).
    limit: async (owner, notice) => {
      await control.call('POST', RUNNER_PATHS.limit, notice, owner).catch((err) => log.warn({ err: (err as Error).message }, 'could not tell the control plane of a runtime\'s limit'));
    },
  };

  const runtimes = createRuntimeHost({
    records,
    log: log.child({ part: 'runtime' }),
    dataDir: o.dataDir,
    max: o.info.capacity,
    idleMs: o.idleMs,
    freezeAfterMs: o.freezeAfterMs,
    pageOutAfterMs: o.pageOutAfterMs,
    sandboxed: o.sandbox,
    // Gateway credentials are the control plane's to derive and check: nothing here depends on this key.
    credentialKey: randomSecret(32),
    launcher: () => createRuntimeLauncher({ dataDir: o.dataDir, sandbox: o.sandbox, nice: o.nice, tmpBytes: o.limits?.tmpBytes, log: log.child({ part: 'runtime' }) }),
    limits: o.limits,
    quotaOf: (owner) => state.quotas.get(owner.userId) ?? null,
    listen: (identity, at) => proxy.listen(identity, at),
    // The control plane records the runtime and writes its configuration (through this channel) before
    // the runtime is handed out.
    configure: async (owner, handle, pid) => {
      state.configuring.set(owner.userId, handle);
      try {
        await control.call('POST', RUNNER_PATHS.started, { pid, authorization: handle.endpoint.authorization, directory: handle.directory }, owner);
      } finally {
        state.configuring.delete(owner.userId);
      }
    },
  });
  runtimes.onChange((owner, handle) => {
    if (!handle) return;
    const pid = runtimes.live().find((l) => l.userId === owner.userId)?.pid ?? 0;
    notify(state, { type: 'ready', tenantId: owner.tenantId, userId: owner.userId, fence: fenceOf(state, owner.userId), pid, authorization: handle.endpoint.authorization, directory: handle.directory });
  });

  const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } }, (req, res) => void route(req, res));
  server.on('sessionError', (err) => log.warn({ err: err.message }, 'runner channel session failed'));
  const channel = createRunnerChannel({ control, token: o.token, info: o.info, server, log });
  const route = createRunnerOrders({ dataDir: o.dataDir, state, runtimes, log, channel: () => channel.socket });

  return {
    runtimes,
    get connected() {
      return channel.socket !== null;
    },
    get status() {
      return state.lastStatus;
    },

    /** Hosts runtimes and keeps the channel to the control plane up (reconnecting with back-off). */
    async start(): Promise<void> {
      mkdirSync(o.dataDir, { recursive: true, mode: 0o700 });
      await runtimes.start();
      // Self-fence: a runner cut off from the control plane for longer than its lease stops its runtimes,
      // before the control plane declares it lost (RUNNER_HEARTBEAT_TIMEOUT_MS) and places its users
      // elsewhere: with shared storage, two runtimes must never write one user's files at once.
      fenceTimer = setInterval(() => {
        if (Date.now() - state.lastSync < state.leaseMs || !runtimes.live().length) return;
        log.error({ silentMs: Date.now() - state.lastSync }, 'no word from the control plane: stopping every runtime here (their users may be placed elsewhere)');
        state.leases.clear();
        for (const l of runtimes.live()) void runtimes.stopUser(l.userId);
      }, 1000);
      fenceTimer.unref();
      channel.start();
    },

    async stop(): Promise<void> {
      if (fenceTimer) clearInterval(fenceTimer);
      for (const w of state.watchers) w.end();
      channel.close();
      server.close();
      await runtimes.stop();
      control.destroy();
      await channel.ended();
    },
  };
}

export type RunnerAgent = ReturnType<typeof createRunnerAgent>;
