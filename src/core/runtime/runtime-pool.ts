import { createHmac } from 'node:crypto';
import { availableParallelism, hostname } from 'node:os';
import { join } from 'node:path';
import { readHostMemory, type HostMemory } from '../../lib/host-memory.js';
import { processDescendants, processesAnonKb } from '../../lib/process-state.js';
import { AppError, UnavailableError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { Logger } from '../logger.js';
import { createRuntimeClient, runtimeUnavailable, type RuntimeClient, type RuntimeHandle } from './runtime-client.js';
import { locateToolCall, type ToolCallOrigin } from './runtime-tool-calls.js';
import { pressureVictims, roomForOneMore } from './runtime-capacity.js';
import { createStartGate } from './start-gate.js';
import { freezerUnavailable, openFreezer, type Freezer, type RuntimeGroup } from './runtime-freezer.js';
import type { LaunchedRuntime, RuntimeLauncher } from './runtime-launcher.js';

/**
 * One runtime per user (the unit of isolation: their sessions, their workspace, their process), run by
 * the `aws serve` that hosts the pool. A runtime starts on demand (the user's sign-in, dashboard, first
 * turn or stream), is frozen after `freezeAfterMs` without use (no CPU at all; thawed in milliseconds
 * by the next request, runtime-freezer.ts), stops after `idleMs`, restarts with back-off when it
 * crashes, and at most `max` run at once (by default what the host's memory holds, runtime-capacity.ts):
 * to start one more, the least recently used runtime with no turn running is stopped; when every
 * runtime is busy, the caller is told to wait (RuntimeBusyError) and its turn waits in the queue. When
 * the host runs short of memory, idle runtimes are stopped, least recently used first, never one with a
 * turn running.
 *
 * Other processes (a separate `aws worker`, the CLI) find a running runtime through its row in
 * agent_runtimes, and ask the host to start one over the event bus.
 */
export interface RuntimeOwner {
  tenantId: string;
  userId: string;
}

const NONE_RUNNING: ReadonlySet<string> = new Set();

const BUSY: Record<'capacity' | 'memory' | 'runners' | 'starting', { message: (max: number, ahead: number) => string; hint: string }> = {
  capacity: {
    message: (max) => `all ${max} agent runtimes of this host are busy`,
    hint: 'The turn waits in the queue and starts when a runtime frees up; an operator can raise AGENTWS_RUNTIME_MAX.',
  },
  memory: {
    message: () => 'the agent host is short of memory and every runtime on it is busy',
    hint: 'The turn waits in the queue and starts when a runtime frees up; an operator can add memory or lower AGENTWS_RUNTIME_MAX.',
  },
  runners: {
    message: () => 'no runner host has room for your agent now',
    hint: 'The turn waits in the queue and starts when a runner host has room; an operator can add one (`aws runner`) or check `npx aws runner list`.',
  },
  starting: {
    message: (_max, ahead) => `your agent is queued to start${ahead > 0 ? `, behind ${ahead} other start${ahead === 1 ? '' : 's'} on this host` : ''}`,
    hint: 'The turn waits in the queue; its runtime starts as soon as the ones before it have (a few seconds each).',
  },
};

/**
 * No runtime for the turn yet: every runtime is busy, the host is short of memory, or the runtime's start
 * is queued behind others (that start goes on). The turn waits: it is not an error of the turn, so it
 * does not use up attempts.
 */
export class RuntimeBusyError extends AppError {
  readonly status = 503;
  constructor(max: number, why: keyof typeof BUSY = 'capacity', ahead = 0) {
    super(BUSY[why].message(max, ahead), 'runtime_busy', { hint: BUSY[why].hint, details: { max, why, ...(why === 'starting' ? { ahead } : {}) } });
  }
}

/** A runtime's egress proxy listener (its only way out), as the pool holds it: where, and how to close it. */
export interface ProxyListener {
  readonly address: string;
  close(): Promise<void>;
}

/** The proxy identity of a runtime: who it belongs to and the gateway credential it was configured with. */
export interface RuntimeIdentity extends RuntimeOwner {
  credential: string;
}

export const workspaceDir = (dataDir: string, o: RuntimeOwner) => join(dataDir, 'workspaces', o.tenantId, o.userId);
/** The tenant's shared files on the host: mounted read-only at /srv/tenant in every sandbox of the tenant. */
export const tenantSharedDir = (dataDir: string, tenantId: string) => join(dataDir, 'tenants', tenantId, 'shared');

export const RUNTIME_WANTED_CHANNEL = 'runtime.wanted';
export const RUNTIME_BUSY_CHANNEL = 'runtime.busy';
/**
 * A process is about to use a user's runtime it found by its row ({ userId }): the host marks it used
 * and thaws it if it is frozen. Until then the request waits in the runtime's socket, a few ms.
 */
export const RUNTIME_USED_CHANNEL = 'runtime.used';
/** Recently used runtimes are not evicted to make room (their turn may be about to start). */
const RECENT_USE_MS = 15_000;
const SWEEP_MS = 5_000;
/** How often the host reports itself (runtime_hosts) when nothing changed; readers trust reports younger than 3 of these. */
const REPORT_MS = 30_000;
export const HOST_REPORT_FRESH_MS = 3 * REPORT_MS;
/** How often a runtime's memory is read (/proc/<pid>/status of each of its processes). */
const MEMORY_READ_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;
/**
 * How long a turn waits while its runtime's start is queued behind others before it goes back to the job
 * queue: with the start (at most 30 s to listen, 30 s to answer) and the turn's runtime calls, an attempt
 * stays within the turn job's expiry (turn-runner.ts TURN_EXPIRE_S).
 */
const QUEUED_WAIT_MS = 15_000;
const WANT_TIMEOUT_MS = 40_000;

/**
 * The credential a runtime's model calls carry to the gateway, derived from its API password: whoever can
 * reach the runtime's API already holds as much, and every process of the appliance can derive it
 * without it being stored. A restarted runtime has a new password, so a stopped runtime's credential is
 * dead (and its proxy listener, which the gateway is reached through, is closed).
 */
export function gatewayCredential(key: string, authorization: string): string {
  return `agws_${createHmac('sha256', key).update(`llm-gateway\0${authorization}`).digest('base64url')}`;
}

interface Entry {
  owner: RuntimeOwner;
  handle: RuntimeHandle | null;
  launched: LaunchedRuntime | null;
  starting: Promise<RuntimeHandle> | null;
  listener: ProxyListener | null;
  lastUsed: number;
  /** Runtime sessions with a turn running (from the runtime's own status events). */
  running: Set<string>;
  restarts: number;
  stopping: boolean;
  /** Something other than an early start asked for the runtime while it was starting (a turn waiting for it). */
  wanted: boolean;
  /** An early start prepared it (warmUp): once is enough. */
  prepared: boolean;
  /** It has a start place (start-gate.ts) and is starting, no longer queued for one. */
  launching: boolean;
  /** Its cgroup (null: no freezer on this host, or its processes could not be moved there). */
  group: RuntimeGroup | null;
  /** Private memory of its processes when last read (bytes), and when. */
  memoryBytes: number;
  memoryReadAt: number;
}

/** Runtimes on runner hosts, as the control plane reaches them (runners/runner-fleet.ts). */
export interface RemoteRuntimes {
  acquire(runnerId: string, owner: RuntimeOwner, onStarting?: () => void): Promise<RuntimeHandle>;
  setRunning(userId: string, upstreamSessionId: string, running: boolean): void;
  stopUser(userId: string): Promise<void>;
}

/** What the host holds now (runtime status, /metrics, runtime_hosts). */
export interface PoolStatus {
  capacity: number;
  resident: number;
  ready: number;
  frozen: number;
  starting: number;
  busy: number;
  runtimesMemoryBytes: number;
  memory: HostMemory;
  freezer: Freezer['kind'] | null;
  freezerUnavailable: string | null;
}

/**
 * Where a hosting pool writes down what it runs, for the processes that do not host it: on the control
 * plane its database (agent_runtimes, runtime_hosts: runtime-records.ts), on a runner host the channel to
 * the control plane (the runner has no database).
 */
export interface RuntimeRecords {
  /** A runtime started (before it is configured and handed out). */
  started(owner: RuntimeOwner, launched: { pid: number; endpoint: RuntimeHandle['endpoint'] }, sandboxed: boolean): Promise<void>;
  /**
   * A runtime exited, or (with `o`) was stopped: why, and whether it was idle (running nothing by its own
   * account, and unused for a few seconds: no turn was cut).
   */
  stopped(owner: RuntimeOwner, pid: number, o?: { why: string; idle: boolean }): Promise<void>;
  /** The user's runtime where another process hosts it and it runs (null: it does not run). */
  elsewhere(owner: RuntimeOwner): Promise<RuntimeHandle | null>;
  /** This process becomes the host: forget what hosts that are gone left behind. */
  hostStarting(hostname: string): Promise<void>;
  /** What the host holds now. */
  report(hostname: string, status: PoolStatus): Promise<void>;
  /** This process stops hosting. */
  hostStopped(hostname: string): Promise<void>;
}

export function createRuntimePool(deps: {
  records: RuntimeRecords;
  bus: EventBus;
  log: Logger;
  dataDir: string;
  max: number;
  idleMs: number;
  sandboxed: boolean;
  /** Key the gateway credential is derived with. */
  credentialKey: string;
  launcher: () => RuntimeLauncher;
  /** Opens the runtime's egress proxy listener (the runtime's only way out). */
  listen: (identity: RuntimeIdentity, at: { path: string } | { port: number }) => Promise<ProxyListener>;
  /** Writes the tenant's configuration into a (re)started runtime before anything else uses it. */
  configure: (owner: RuntimeOwner, handle: RuntimeHandle, pid: number) => Promise<void>;
  /** How recently used a runtime is spared from eviction (tests shorten it). */
  recentUseMs?: number;
  /** Idle time after which a runtime is frozen; 0: never (AGENTWS_RUNTIME_FREEZE_SECONDS). */
  freezeAfterMs: number;
  /** Runtime starts run at once (default: one per core, at most 4); the others wait their turn. */
  startsAtOnce?: number;
  /** How long a turn waits while its runtime's start is queued (tests shorten it). */
  queuedWaitMs?: number;
  /** The host's memory now (tests pass their own to simulate pressure). */
  memory?: () => HostMemory;
  /** The cgroup freezer (tests may pass null); by default the host's, opened when the pool starts hosting. */
  openFreezer?: () => Freezer | null;
  /**
   * Runner hosts (issue 26): where the user's runtime is placed. Null: here, or the local host of this
   * machine as before; otherwise the runner's id, and `remote` reaches it there.
   */
  placement?: (owner: RuntimeOwner) => Promise<string | null>;
  remote?: RemoteRuntimes;
}) {
  const { records, log } = deps;
  const entries = new Map<string, Entry>();
  /** Runtime sessions with a turn running, of users whose runtime is on a runner (from the events this process follows). */
  const remoteRunning = new Map<string, Set<string>>();
  const listeners = new Set<(owner: RuntimeOwner, handle: RuntimeHandle | null) => void>();
  let hosting = false;
  /** Why agents cannot run on this host (no sandbox possible): every acquire fails with it. */
  let refusal: { problem: string; hint?: string } | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  let unsubscribe: Array<() => Promise<void>> = [];
  let freezer: Freezer | null = null;
  const memory = deps.memory ?? readHostMemory;
  const host = hostname();
  let lastReport = { at: 0, key: '' };
  /** Per user: when this process last told the host it uses their runtime (RUNTIME_USED_CHANNEL). */
  const toldUsed = new Map<string, number>();
  const usedEveryMs = Math.min(5000, deps.freezeAfterMs > 0 ? deps.freezeAfterMs / 2 : 5000);
  const gate = createStartGate(deps.startsAtOnce ?? Math.max(1, Math.min(4, availableParallelism())));

  const dirsOf = (o: RuntimeOwner) => ({
    workspace: workspaceDir(deps.dataDir, o),
    root: join(deps.dataDir, 'runtimes', o.userId),
    tenant: tenantSharedDir(deps.dataDir, o.tenantId),
  });

  const notify = (owner: RuntimeOwner, handle: RuntimeHandle | null) => {
    for (const l of listeners) {
      try {
        l(owner, handle);
      } catch (err) {
        log.error({ err: (err as Error).message }, 'runtime listener failed');
      }
    }
  };

  /** Starts the runtime once a start place is free (turns first; see start-gate.ts). */
  async function launch(e: Entry): Promise<RuntimeHandle> {
    const release = await gate.enter(() => e.wanted);
    e.launching = true;
    try {
      if (e.stopping) throw runtimeUnavailable('the runtime was stopped');
      return await launchNow(e);
    } finally {
      e.launching = false;
      release();
    }
  }

  async function launchNow(e: Entry): Promise<RuntimeHandle> {
    const launcher = deps.launcher();
    const t0 = performance.now();
    let identity: RuntimeIdentity | null = null;
    const launched = await launcher.launch(dirsOf(e.owner), async (at) => {
      // The credential is only known once the password is: the listener takes the identity by reference.
      identity = { ...e.owner, credential: '' };
      e.listener = await deps.listen(identity, at);
      const m = /:(\d+)$/.exec(e.listener.address);
      return { port: m ? Number(m[1]) : undefined };
    });
    const handle: RuntimeHandle = { endpoint: launched.endpoint, directory: launched.directory };
    identity!.credential = gatewayCredential(deps.credentialKey, launched.endpoint.authorization);
    try {
      await records.started(e.owner, launched, deps.sandboxed);
      // Another process may find the row before this write: it checks the configuration itself before a turn.
      const t1 = performance.now();
      await deps.configure(e.owner, handle, launched.pid);
      log.info({ userId: e.owner.userId, startMs: Math.round(t1 - t0), configureMs: Math.round(performance.now() - t1) }, 'agent runtime configured');
    } catch (err) {
      await launched.stop();
      await e.listener?.close();
      e.listener = null;
      throw err;
    }
    e.launched = launched;
    e.handle = handle;
    e.group = groupFor(e.owner.userId, launched.pid);
    e.memoryReadAt = 0;
    void launched.exited.then((x) => onExit(e, launched, x));
    notify(e.owner, handle);
    return handle;
  }

  function onExit(e: Entry, launched: LaunchedRuntime, x: { code: number | null; signal: NodeJS.Signals | null; stderr: string }) {
    if (e.launched !== launched) return;
    e.launched = null;
    e.handle = null;
    e.running.clear();
    e.group?.remove();
    e.group = null;
    // A stop on purpose is recorded by stopEntry (with why, and whether it was idle); this is a crash.
    if (!e.stopping) void records.stopped(e.owner, launched.pid).catch(() => {});
    void e.listener?.close();
    e.listener = null;
    notify(e.owner, null);
    if (e.stopping || entries.get(e.owner.userId) !== e) return;
    log.error({ userId: e.owner.userId, code: x.code, signal: x.signal, stderr: x.stderr.trim().slice(-500) }, 'agent runtime exited; restarting');
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(e.restarts++, 6));
    e.starting = (async () => {
      await new Promise((r) => setTimeout(r, delay));
      if (e.stopping) throw runtimeUnavailable('the runtime was stopped');
      return launch(e);
    })();
    e.starting.then(
      () => {
        e.starting = null;
      },
      (err) => {
        e.starting = null;
        log.error({ userId: e.owner.userId, err: (err as Error).message }, 'agent runtime failed to restart');
        if (!e.stopping && entries.get(e.owner.userId) === e) {
          entries.delete(e.owner.userId);
        }
      },
    );
  }

  async function stopEntry(e: Entry, why: string): Promise<void> {
    e.stopping = true;
    entries.delete(e.owner.userId);
    const launched = e.launched;
    await e.starting?.catch(() => {});
    const l = e.launched ?? launched;
    if (l) {
      log.info({ userId: e.owner.userId, why }, 'stopping agent runtime');
      // A frozen process cannot act on its SIGTERM (nor, under cgroup v1, die of a SIGKILL) until thawed.
      const group = e.group;
      await group?.thaw();
      await l.stop();
      group?.remove();
      await records.stopped(e.owner, l.pid, { why, idle: e.running.size === 0 && Date.now() - e.lastUsed > 5000 }).catch(() => {});
    }
    await e.listener?.close().catch(() => {});
    e.listener = null;
    if (e.handle) {
      e.handle = null;
      notify(e.owner, null);
    }
  }

  /** The runtime's cgroup, its processes moved in (null: no freezer, or they could not be moved). */
  function groupFor(userId: string, pid: number): RuntimeGroup | null {
    if (!freezer) return null;
    try {
      const group = freezer.group(userId);
      if (group.adopt(pid)) return group;
      group.remove();
      log.warn({ userId }, 'could not move the runtime into its cgroup: it will not be frozen while idle');
    } catch (err) {
      log.warn({ userId, err: (err as Error).message }, 'could not create the runtime\'s cgroup: it will not be frozen while idle');
    }
    return null;
  }

  /** Lets a frozen runtime run again (before anything is asked of it). */
  async function thaw(e: Entry): Promise<void> {
    if (!e.group?.frozen) return;
    const t0 = performance.now();
    await e.group.thaw();
    log.debug({ userId: e.owner.userId, ms: Math.round((performance.now() - t0) * 10) / 10 }, 'agent runtime thawed');
  }

  function touch(userId: string): void {
    const e = entries.get(userId);
    if (!e) return;
    e.lastUsed = Date.now();
    void thaw(e);
  }

  /** Makes room for one more runtime (by count, and by the host's memory), or says why not. */
  async function makeRoom(): Promise<void> {
    const full = entries.size >= deps.max;
    const short = !full && !roomForOneMore(memory());
    if (!full && !short) return;
    const now = Date.now();
    const idle = [...entries.values()].filter((e) => e.handle && e.running.size === 0 && now - e.lastUsed > (deps.recentUseMs ?? RECENT_USE_MS)).sort((a, b) => a.lastUsed - b.lastUsed);
    if (!idle.length) throw new RuntimeBusyError(deps.max, full ? 'capacity' : 'memory');
    await stopEntry(idle[0], full ? 'making room for another user' : 'making room for another user: the host is short of memory');
  }

  /** In the host: the user's runtime, started if need be (`onStarting` is told when the caller waits for a start). */
  async function acquireHere(owner: RuntimeOwner, onStarting?: () => void, ahead = false): Promise<RuntimeHandle> {
    let e = entries.get(owner.userId);
    if (e) {
      e.lastUsed = Date.now();
      if (e.handle) {
        await thaw(e);
        return e.handle;
      }
      if (e.starting) {
        // A turn waits for this start: the preparation must not run beside it. Another early start does not.
        if (!ahead) e.wanted = true;
        onStarting?.();
        return waitStart(e, ahead);
      }
    }
    await makeRoom();
    e = entries.get(owner.userId);
    if (e?.handle) return e.handle;
    if (e?.starting) {
      if (!ahead) e.wanted = true;
      onStarting?.();
      return waitStart(e, ahead);
    }
    onStarting?.();
    const entry: Entry = { owner, handle: null, launched: null, starting: null, listener: null, lastUsed: Date.now(), running: new Set(), restarts: 0, stopping: false, wanted: !ahead, prepared: false, launching: false, group: null, memoryBytes: 0, memoryReadAt: 0 };
    entries.set(owner.userId, entry);
    const starting = launch(entry);
    entry.starting = starting;
    // The start goes on whoever stops waiting for it (a turn that goes back to the queue meanwhile).
    starting.then(
      () => {
        // Used as it is handed out: a start slower than the idle time must not leave it looking idle
        // since the request that started it (the sweep stopped such runtimes as they were handed out).
        entry.lastUsed = Date.now();
        if (entry.starting === starting) entry.starting = null;
      },
      (err) => {
        if (entry.starting === starting) entry.starting = null;
        if (entries.get(owner.userId) === entry) entries.delete(owner.userId);
        log.warn({ userId: owner.userId, err: (err as Error).message }, 'agent runtime failed to start');
      },
    );
    return waitStart(entry, ahead);
  }

  /**
   * Waits for a start. A turn waits at most QUEUED_WAIT_MS while the start is still queued for a start
   * place (RuntimeBusyError, why starting: the turn goes back to the queue, the start goes on), so that a busy
   * morning cannot hold a turn's job past its expiry; once launching, until the runtime answers.
   */
  async function waitStart(e: Entry, ahead: boolean): Promise<RuntimeHandle> {
    const starting = e.starting!;
    if (ahead) return starting;
    const deadline = Date.now() + (deps.queuedWaitMs ?? QUEUED_WAIT_MS);
    const settled = starting.then(
      () => true,
      () => true,
    );
    while (!e.launching) {
      const left = deadline - Date.now();
      // Ahead of it: the starts running now and the ones waiting before it (roughly: it is among the waiting).
      if (left <= 0) throw new RuntimeBusyError(deps.max, 'starting', gate.stats.running + Math.max(0, gate.stats.waiting - 1));
      if (await Promise.race([settled, new Promise<false>((r) => setTimeout(() => r(false), Math.min(left, 100)))])) break;
    }
    return starting;
  }

  /** The handle of the user's runtime where another process hosts it and it runs; null otherwise. */
  async function runningElsewhere(owner: RuntimeOwner): Promise<RuntimeHandle | null> {
    const handle = await records.elsewhere(owner);
    if (handle && !handle.endpoint.tunnel) tellUsed(owner.userId);
    return handle;
  }

  /** Tells the host this process is about to use the user's runtime (it may be frozen): at most every few seconds. */
  function tellUsed(userId: string): void {
    const now = Date.now();
    if (now - (toldUsed.get(userId) ?? 0) < usedEveryMs) return;
    toldUsed.set(userId, now);
    if (toldUsed.size > 10_000) toldUsed.clear();
    void deps.bus.publish(RUNTIME_USED_CHANNEL, { userId }).catch(() => {});
  }

  /** Elsewhere: the runtime's row, or the host asked to start it. */
  async function acquireRemote(owner: RuntimeOwner, onStarting?: () => void): Promise<RuntimeHandle> {
    const found = () => runningElsewhere(owner);
    const now = await found();
    if (now) return now;
    onStarting?.();
    let busy = false;
    const off = await deps.bus.subscribe(RUNTIME_BUSY_CHANNEL, (p) => {
      if ((p as RuntimeOwner)?.userId === owner.userId) busy = true;
    });
    try {
      await deps.bus.publish(RUNTIME_WANTED_CHANNEL, owner);
      const deadline = Date.now() + WANT_TIMEOUT_MS;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 150));
        if (busy) throw new RuntimeBusyError(deps.max);
        const h = await found();
        if (h) return h;
      }
      throw runtimeUnavailable('no `aws serve` started the runtime (is serve running on this host?)');
    } finally {
      await off().catch(() => {});
    }
  }

  function acquire(owner: RuntimeOwner, opts: { onStarting?: () => void } = {}): Promise<RuntimeHandle> {
    const local = () =>
      refusal
        ? Promise.reject(new UnavailableError(`agents cannot run on this host: ${refusal.problem}`, { code: 'sandbox_unavailable', hint: refusal.hint }))
        : (hosting ? acquireHere(owner, opts.onStarting) : acquireRemote(owner, opts.onStarting));
    if (!deps.placement || !deps.remote) return local();
    const remote = deps.remote;
    return deps.placement(owner).then((runnerId) => (runnerId ? remote.acquire(runnerId, owner, opts.onStarting) : local()));
  }

  async function runningHandle(owner: RuntimeOwner): Promise<RuntimeHandle | null> {
    const here = hosting ? entries.get(owner.userId) : undefined;
    if (here && here.owner.tenantId === owner.tenantId && here.handle) await thaw(here);
    if (here) return here.owner.tenantId === owner.tenantId ? here.handle : null;
    return runningElsewhere(owner);
  }

  /** Idle runtimes stopped, frozen; under memory pressure the least recently used idle ones stopped; the report written. */
  function sweep() {
    const now = Date.now();
    for (const e of [...entries.values()]) {
      if (!e.handle || e.running.size > 0 || e.stopping) continue;
      if (now - e.lastUsed > deps.idleMs) void stopEntry(e, 'idle');
      else if (e.group && !e.group.frozen && deps.freezeAfterMs > 0 && now - e.lastUsed > deps.freezeAfterMs) {
        void e.group.freeze().then(() => log.debug({ userId: e.owner.userId }, 'agent runtime frozen while idle'));
      }
    }
    const mem = memory();
    const victims = pressureVictims(
      mem,
      [...entries.values()].filter((e) => !e.stopping).map((e) => ({ e, lastUsed: e.lastUsed, idle: !!e.handle && !e.starting && e.running.size === 0, bytes: e.memoryBytes })),
    );
    for (const v of victims) {
      log.warn({ userId: v.e.owner.userId, availableMb: Math.round(mem.availableBytes / 2 ** 20) }, 'the host is short of memory: stopping the least recently used idle runtime');
      void stopEntry(v.e, 'memory pressure');
    }
    void report(mem).catch((err) => log.warn({ err: (err as Error).message }, 'could not record the runtime host\'s report'));
  }

  function status(mem: HostMemory = memory()): PoolStatus {
    const now = Date.now();
    let runtimesMemoryBytes = 0;
    for (const e of entries.values()) {
      // Read every MEMORY_READ_MS only: cheap (/proc/<pid>/status), but one read per process of each runtime.
      if (e.launched && now - e.memoryReadAt > MEMORY_READ_MS) {
        e.memoryBytes = processesAnonKb(e.group?.pids() ?? [e.launched.pid, ...processDescendants(e.launched.pid)]) * 1024;
        e.memoryReadAt = now;
      }
      runtimesMemoryBytes += e.launched ? e.memoryBytes : 0;
    }
    const all = [...entries.values()];
    return {
      capacity: deps.max,
      resident: all.length,
      ready: all.filter((e) => e.handle && !e.group?.frozen).length,
      frozen: all.filter((e) => e.handle && e.group?.frozen).length,
      starting: all.filter((e) => !e.handle).length,
      busy: all.filter((e) => e.running.size > 0).length,
      runtimesMemoryBytes,
      memory: mem,
      freezer: freezer?.kind ?? null,
      freezerUnavailable: freezer ? null : (deps.freezeAfterMs > 0 ? freezerUnavailable : 'turned off (AGENTWS_RUNTIME_FREEZE_SECONDS=0)'),
    };
  }

  /** Writes the host's report when something changed, or every REPORT_MS. */
  async function report(mem: HostMemory): Promise<void> {
    if (!hosting || refusal) return;
    const s = status(mem);
    const key = JSON.stringify([s.resident, s.frozen, s.starting, s.busy, Math.round(s.runtimesMemoryBytes / 2 ** 24), Math.round(s.memory.availableBytes / 2 ** 26)]);
    const now = Date.now();
    if (key === lastReport.key && now - lastReport.at < REPORT_MS) return;
    lastReport = { at: now, key };
    await records.report(host, s);
  }

  return {
    get hosting() {
      return hosting;
    },

    /**
     * Where the user's runtime answers; starts it when it is not running (telling `onStarting` first, so
     * the caller can say why it waits), thaws it when it is frozen. RuntimeBusyError when none is free.
     */
    acquire,

    /**
     * Starts the user's runtime ahead of their first prompt and, when this call started it and no turn
     * asked for it meanwhile, prepares its workspace too (warmUp): the runtime builds its services,
     * providers and tools lazily at its first prompt, ~2 s on two cores that then pass while the person
     * types (a prompt sent 5 s after the stream opened reaches the model in ~0.3 s instead of ~2.3 s).
     * A prompt sent at once is left to do it alone: the preparation beside it delayed its first event
     * by ~2 s (runtime-pool bench: 3.6-4.8 s against 2.0-2.3 s).
     */
    async prestart(owner: RuntimeOwner): Promise<void> {
      const fresh = hosting && !entries.has(owner.userId);
      if (refusal) return;
      const handle = hosting ? await acquireHere(owner, undefined, true) : await acquireRemote(owner);
      const e = entries.get(owner.userId);
      if (fresh && e && !e.wanted && !e.prepared) {
        e.prepared = true;
        // Preparing is seconds of CPU too: it takes a start place, after every start a turn waits for.
        const release = await gate.enter(() => false);
        try {
          if (!e.wanted && e.handle) await createRuntimeClient(handle).warmUp();
        } finally {
          release();
        }
      }
    },

    /** A client of the user's runtime (started if need be). */
    async client(owner: RuntimeOwner): Promise<RuntimeClient> {
      return createRuntimeClient(await acquire(owner));
    },

    /**
     * A client of the user's runtime if it runs (in this process or another on the host), null if it
     * does not: for stopping what runs there, which must never start a runtime to do so.
     */
    async runningClient(owner: RuntimeOwner): Promise<RuntimeClient | null> {
      const handle = await runningHandle(owner);
      return handle ? createRuntimeClient(handle) : null;
    },

    /** Where the user's runtime answers if it runs (here, elsewhere on the host, or on a runner); never starts one. */
    runningHandle,

    /**
     * The session and message of the user's runtime that a tool call reaching the service came from
     * (runtime-tool-calls.ts). Only for a runtime this process hosts (the one whose proxy listener the
     * call arrived on); null when it is not here or the runtime cannot tell.
     */
    async toolCallOrigin(owner: RuntimeOwner, call: { tool: string; input: Record<string, unknown> }): Promise<ToolCallOrigin | null> {
      const e = entries.get(owner.userId);
      if (e) return e.handle && e.owner.tenantId === owner.tenantId ? locateToolCall(createRuntimeClient(e.handle), call) : null;
      // On a runner: the call came through the runner's proxy listener of this user (the gateway checked its lease).
      const handle = deps.remote ? await runningElsewhere(owner) : null;
      return handle?.endpoint.tunnel ? locateToolCall(createRuntimeClient(handle), call) : null;
    },

    /** Why agents cannot run here, if they cannot. */
    get refusal() {
      return refusal;
    },

    /** Something happened in the runtime (an event, a call): it is not idle (and not frozen). */
    touch,

    /** The runtime reported a session running or idle (a running turn keeps its runtime from eviction). */
    setRunning(userId: string, upstreamSessionId: string, running: boolean): void {
      const e = entries.get(userId);
      if (!e) {
        // A runtime on a runner: the runner must know too (a running turn keeps its runtime there).
        if (!deps.remote) return;
        const set = remoteRunning.get(userId) ?? new Set<string>();
        if (running) set.add(upstreamSessionId);
        else set.delete(upstreamSessionId);
        if (set.size) remoteRunning.set(userId, set);
        else remoteRunning.delete(userId);
        deps.remote.setRunning(userId, upstreamSessionId, running);
        return;
      }
      e.lastUsed = Date.now();
      if (running) e.running.add(upstreamSessionId);
      else e.running.delete(upstreamSessionId);
    },

    /** The runtime sessions of the user with a turn running now (empty when this process hosts no runtime of theirs). */
    runningSessions(userId: string): ReadonlySet<string> {
      return entries.get(userId)?.running ?? remoteRunning.get(userId) ?? NONE_RUNNING;
    },

    /** A runtime on a runner whose channel this process holds is ready, or stopped (runner-fleet.ts). */
    remoteChanged(owner: RuntimeOwner, handle: RuntimeHandle | null): void {
      if (!handle) remoteRunning.delete(owner.userId);
      notify(owner, handle);
    },

    /** Called when a user's runtime is ready (with where) and when it stops or restarts (null). */
    onChange(listener: (owner: RuntimeOwner, handle: RuntimeHandle | null) => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },

    /** The runtimes this process hosts. */
    live() {
      return [...entries.values()].map((e) => ({
        ...e.owner,
        pid: e.launched?.pid ?? null,
        state: !e.handle ? ('starting' as const) : e.group?.frozen ? ('frozen' as const) : ('ready' as const),
        running: e.running.size,
        idleMs: Date.now() - e.lastUsed,
      }));
    },

    /** Capacity, what is resident and in which state, and the memory it holds (for this hosting process). */
    status,

    /**
     * Becomes the host (serve): forgets rows of runtimes no process runs any more, takes start requests.
     * With `refuse`, it hosts no runtime: every request for one fails with that reason (fail closed).
     */
    async host(refuse?: { problem: string; hint?: string }): Promise<void> {
      if (hosting) return;
      hosting = true;
      refusal = refuse ?? null;
      await records.hostStarting(host);
      if (!refuse && deps.freezeAfterMs > 0) freezer = (deps.openFreezer ?? (() => openFreezer(log)))();
      unsubscribe.push(
        await deps.bus.subscribe(RUNTIME_WANTED_CHANNEL, (p) => {
          const o = p as RuntimeOwner;
          if (!o?.userId || !o.tenantId) return;
          acquireHere(o).catch((err) => {
            if (err instanceof RuntimeBusyError) void deps.bus.publish(RUNTIME_BUSY_CHANNEL, o).catch(() => {});
            else log.error({ err: (err as Error).message, userId: o.userId }, 'could not start a runtime another process asked for');
          });
        }),
        await deps.bus.subscribe(RUNTIME_USED_CHANNEL, (p) => {
          const userId = (p as { userId?: unknown })?.userId;
          if (typeof userId === 'string') touch(userId);
        }),
      );
      const every = Math.max(250, Math.min(SWEEP_MS, deps.idleMs / 2, deps.freezeAfterMs > 0 ? deps.freezeAfterMs / 2 : SWEEP_MS));
      sweeper = setInterval(sweep, every);
      sweeper.unref();
      void report(memory()).catch(() => {});
    },

    /** Stops one user's runtime (their removal, or an operator's request). */
    async stopUser(userId: string): Promise<void> {
      const e = entries.get(userId);
      if (e) await stopEntry(e, 'stopped on request');
      else await deps.remote?.stopUser(userId);
    },

    /** Stops every runtime (shutdown). */
    async stop(): Promise<void> {
      if (sweeper) clearInterval(sweeper);
      sweeper = null;
      for (const off of unsubscribe) await off().catch(() => {});
      unsubscribe = [];
      await Promise.all([...entries.values()].map((e) => stopEntry(e, 'shutdown')));
      if (hosting) await records.hostStopped(host).catch(() => {});
      freezer?.close();
      freezer = null;
      hosting = false;
    },
  };
}

export type RuntimePool = ReturnType<typeof createRuntimePool>;
