import { createHmac } from 'node:crypto';
import { availableParallelism, hostname } from 'node:os';
import { join } from 'node:path';
import { workspaceDir } from '../../../lib/data-paths.js';
import { readHostMemory, type HostMemory } from '../../../lib/host-memory.js';
import { createListeners } from '../../../lib/listeners.js';
import { processDescendants, processesAnonKb } from '../../../lib/process-state.js';
import { AppError, UnavailableError } from '../../../kernel/errors.js';
import type { Logger } from '../../../kernel/logger.js';
import { pressureVictims, roomForOneMore } from './runtime-capacity.js';
import { freezerUnavailable, openFreezer, type Freezer, type RuntimeGroup } from './runtime-freezer.js';
import type { LaunchedRuntime, RuntimeLauncher } from './runtime-launcher.js';
import { runtimeUnavailable, type RuntimeHandle } from './runtime-transport.js';
import { createStartGate } from './start-gate.js';

/**
 * The runtimes this machine hosts: one per user (the unit of isolation: their sessions, their workspace,
 * their process), in `aws serve` (its local runner) or in `aws runner`. A runtime starts on demand, is
 * frozen after `freezeAfterMs` without use (no CPU at all; thawed in milliseconds by the next request,
 * runtime-freezer.ts), stops after `idleMs`, restarts with back-off when it crashes, and at most `max` run
 * at once (by default what the host's memory holds, runtime-capacity.ts): to start one more, the least
 * recently used runtime with no turn running is stopped; when every runtime is busy, the caller is told to
 * wait (RuntimeBusyError) and its turn waits in the queue. When the host runs short of memory, idle
 * runtimes are stopped, least recently used first, never one with a turn running.
 *
 * This is the part of the pool that runs next to the agents. It decides nothing about tenants (the
 * control plane's runtime-pool.ts decides where a user's runtime runs and reaches the others), and knows
 * the rest of the appliance only through its deps: where it writes down what it runs (HostRecords), how a
 * runtime's egress proxy listens and how a started runtime is configured.
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

/** The session and message of a runtime a tool call came from (found by runtime-tool-calls.ts). */
export interface ToolCallOrigin {
  /** The runtime's session id (`ses_…`). */
  upstreamSessionId: string;
  /** The runtime's id of the assistant message making the call. */
  messageId: string;
  /** `exact`: the tool part with these arguments was found; `session`: the only busy session's latest message. */
  match: 'exact' | 'session';
}

/**
 * What the gateway host may ask of the one runtime a request came from (bound to it by where the request
 * arrived: its proxy listener here, its runner's channel for a runner's runtime): which of its sessions run
 * a turn now (the runtime's own status events), and which session and message a tool call came from.
 */
export interface RuntimeSelf {
  runningSessions(): ReadonlySet<string>;
  toolCallOrigin(call: { tool: string; input: Record<string, unknown> }): Promise<ToolCallOrigin | null>;
}

/** A runtime's identity with its self-view, as the control plane's gateway host receives it. */
export interface AgentIdentity extends RuntimeIdentity {
  self: RuntimeSelf;
}

/** The self-view of a runtime the gateway cannot ask (it is not running where the request came from). */
export const UNKNOWN_SELF: RuntimeSelf = { runningSessions: () => NONE_RUNNING, toolCallOrigin: async () => null };

/** The tenant's shared files on the host: mounted read-only at /srv/tenant in every sandbox of the tenant. */
export const tenantSharedDir = (dataDir: string, tenantId: string) => join(dataDir, 'tenants', tenantId, 'shared');

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
 * Where a runtime host writes down what it runs, for the processes that do not host it: on the control
 * plane its database (agent_runtimes, runtime_hosts: runtime-records.ts), on a runner host the channel to
 * the control plane (the runner has no database).
 */
export interface HostRecords {
  /** A runtime started (before it is configured and handed out). */
  started(owner: RuntimeOwner, launched: { pid: number; endpoint: RuntimeHandle['endpoint'] }, sandboxed: boolean): Promise<void>;
  /**
   * A runtime exited, or (with `o`) was stopped: why, and whether it was idle (running nothing by its own
   * account, and unused for a few seconds: no turn was cut).
   */
  stopped(owner: RuntimeOwner, pid: number, o?: { why: string; idle: boolean }): Promise<void>;
  /** This process becomes the host: forget what hosts that are gone left behind. */
  hostStarting(hostname: string): Promise<void>;
  /** What the host holds now. */
  report(hostname: string, status: PoolStatus): Promise<void>;
  /** This process stops hosting. */
  hostStopped(hostname: string): Promise<void>;
}

export function createRuntimeHost(deps: {
  records: HostRecords;
  log: Logger;
  dataDir: string;
  max: number;
  idleMs: number;
  sandboxed: boolean;
  /** Key the gateway credential is derived with. */
  credentialKey: string;
  launcher: () => RuntimeLauncher;
  /** Opens the runtime's egress proxy listener (the runtime's only way out), for this runtime's identity and self-view. */
  listen: (identity: AgentIdentity, at: { path: string } | { port: number }) => Promise<ProxyListener>;
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
  /** Prepares a runtime an early start brought up (runtime-client's warmUp): it runs while the person types. */
  prepare?: (handle: RuntimeHandle) => Promise<void>;
  /** Finds a tool call in the runtime (runtime-tool-calls.ts); without it a runtime cannot tell a call's origin. */
  locate?: (handle: RuntimeHandle, call: { tool: string; input: Record<string, unknown> }) => Promise<ToolCallOrigin | null>;
}) {
  const { records, log } = deps;
  const entries = new Map<string, Entry>();
  const changes = createListeners<[owner: RuntimeOwner, handle: RuntimeHandle | null]>((err) => log.error({ err: err.message }, 'runtime listener failed'));
  const notify = changes.notify;
  let hosting = false;
  /** Why agents cannot run on this host (no sandbox possible): every acquire fails with it. */
  let refusal: { problem: string; hint?: string } | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  let freezer: Freezer | null = null;
  const memory = deps.memory ?? readHostMemory;
  const host = hostname();
  let lastReport = { at: 0, key: '' };
  const gate = createStartGate(deps.startsAtOnce ?? Math.max(1, Math.min(4, availableParallelism())));

  const dirsOf = (o: RuntimeOwner) => ({
    workspace: workspaceDir(deps.dataDir, o),
    root: join(deps.dataDir, 'runtimes', o.userId),
    tenant: tenantSharedDir(deps.dataDir, o.tenantId),
  });

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

  /** What this entry's runtime tells its own gateway requests (it is asked while the entry is this host's). */
  function selfOf(e: Entry): RuntimeSelf {
    return {
      runningSessions: () => e.running,
      async toolCallOrigin(call) {
        if (entries.get(e.owner.userId) !== e || !deps.locate) return null;
        const handle = await runningHandle(e.owner);
        return handle ? deps.locate(handle, call) : null;
      },
    };
  }

  async function runningHandle(owner: RuntimeOwner): Promise<RuntimeHandle | null> {
    const e = entries.get(owner.userId);
    if (!e || e.owner.tenantId !== owner.tenantId) return null;
    if (e.handle) await thaw(e);
    return e.handle;
  }

  async function launchNow(e: Entry): Promise<RuntimeHandle> {
    const launcher = deps.launcher();
    const t0 = performance.now();
    let identity: AgentIdentity | null = null;
    const launched = await launcher.launch(dirsOf(e.owner), async (at) => {
      // The credential is only known once the password is: the listener takes the identity by reference.
      identity = { ...e.owner, credential: '', self: selfOf(e) };
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

  function refused(): Error | null {
    return refusal ? new UnavailableError(`agents cannot run on this host: ${refusal.problem}`, { code: 'sandbox_unavailable', hint: refusal.hint }) : null;
  }

  return {
    get hosting() {
      return hosting;
    },

    /** Why agents cannot run here, if they cannot. */
    get refusal() {
      return refusal;
    },

    /**
     * Where the user's runtime answers; starts it when it is not running (telling `onStarting` first, so
     * the caller can say why it waits), thaws it when it is frozen. RuntimeBusyError when none is free.
     */
    acquire(owner: RuntimeOwner, onStarting?: () => void): Promise<RuntimeHandle> {
      const no = refused();
      return no ? Promise.reject(no) : acquireHere(owner, onStarting);
    },

    /**
     * Starts the user's runtime ahead of their first prompt and, when this call started it and no turn
     * asked for it meanwhile, prepares its workspace too (deps.prepare): the runtime builds its services,
     * providers and tools lazily at its first prompt, ~2 s on two cores that then pass while the person
     * types (a prompt sent 5 s after the stream opened reaches the model in ~0.3 s instead of ~2.3 s).
     * A prompt sent at once is left to do it alone: the preparation beside it delayed its first event
     * by ~2 s (runtime-pool bench: 3.6-4.8 s against 2.0-2.3 s).
     */
    async prestart(owner: RuntimeOwner): Promise<void> {
      if (refusal) return;
      const fresh = !entries.has(owner.userId);
      const handle = await acquireHere(owner, undefined, true);
      const e = entries.get(owner.userId);
      if (fresh && e && !e.wanted && !e.prepared) {
        e.prepared = true;
        // Preparing is seconds of CPU too: it takes a start place, after every start a turn waits for.
        const release = await gate.enter(() => false);
        try {
          if (!e.wanted && e.handle) await deps.prepare?.(handle);
        } finally {
          release();
        }
      }
    },

    /** Whether this host holds a runtime of the user (running, starting or frozen). */
    holds(userId: string): boolean {
      return entries.has(userId);
    },

    /** Where the user's runtime answers if it runs here (thawed first); null if it does not. Never starts one. */
    running: runningHandle,

    /** Something happened in the runtime (an event, a call): it is not idle (and not frozen). */
    touch,

    /** The runtime reported a session running or idle (a running turn keeps its runtime from eviction); false: not here. */
    setRunning(userId: string, upstreamSessionId: string, running: boolean): boolean {
      const e = entries.get(userId);
      if (!e) return false;
      e.lastUsed = Date.now();
      if (running) e.running.add(upstreamSessionId);
      else e.running.delete(upstreamSessionId);
      return true;
    },

    /** Called when a user's runtime here is ready (with where) and when it stops or restarts (null). */
    onChange: changes.add,

    /** The runtimes this host holds. */
    live() {
      return [...entries.values()].map((e) => ({
        ...e.owner,
        pid: e.launched?.pid ?? null,
        state: !e.handle ? ('starting' as const) : e.group?.frozen ? ('frozen' as const) : ('ready' as const),
        running: e.running.size,
        idleMs: Date.now() - e.lastUsed,
      }));
    },

    /** Capacity, what is resident and in which state, and the memory it holds. */
    status,

    /**
     * Starts hosting: forgets records of runtimes no host runs any more, sweeps idle runtimes. With
     * `refuse`, it hosts no runtime: every request for one fails with that reason (fail closed).
     */
    async start(refuse?: { problem: string; hint?: string }): Promise<void> {
      if (hosting) return;
      hosting = true;
      refusal = refuse ?? null;
      await records.hostStarting(host);
      if (!refuse && deps.freezeAfterMs > 0) freezer = (deps.openFreezer ?? (() => openFreezer(log)))();
      const every = Math.max(250, Math.min(SWEEP_MS, deps.idleMs / 2, deps.freezeAfterMs > 0 ? deps.freezeAfterMs / 2 : SWEEP_MS));
      sweeper = setInterval(sweep, every);
      sweeper.unref();
      void report(memory()).catch(() => {});
    },

    /** Stops one user's runtime (their removal, an operator's request, a move); false: none here. */
    async stopUser(userId: string): Promise<boolean> {
      const e = entries.get(userId);
      if (!e) return false;
      await stopEntry(e, 'stopped on request');
      return true;
    },

    /** Stops every runtime (shutdown). */
    async stop(): Promise<void> {
      if (sweeper) clearInterval(sweeper);
      sweeper = null;
      await Promise.all([...entries.values()].map((e) => stopEntry(e, 'shutdown')));
      if (hosting) await records.hostStopped(host).catch(() => {});
      freezer?.close();
      freezer = null;
      hosting = false;
    },
  };
}

export type RuntimeHost = ReturnType<typeof createRuntimeHost>;
