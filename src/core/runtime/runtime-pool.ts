import type { EventBus } from '../../kernel/events.js';
import type { Logger } from '../../kernel/logger.js';
import { createListeners } from '../../lib/listeners.js';
import { createRuntimeClient, type RuntimeClient } from './runtime-client.js';
import { locateToolCall, type ToolCallOrigin } from './runtime-tool-calls.js';
import { createRuntimeHost, RuntimeBusyError, type HostRecords, type RuntimeOwner } from './host/runtime-host.js';
import { runtimeUnavailable, type RuntimeHandle } from './host/runtime-transport.js';

/**
 * The control plane's way to a user's runtime, wherever it runs: on a runner host (the placement says
 * which; `remote` reaches it over that runner's channel), in this process's own runtime host (serve's
 * local runner, host/runtime-host.ts), or in the `aws serve` of this machine when this process hosts
 * none (a separate `aws worker`, the CLI), which finds a running runtime through its row in
 * agent_runtimes and asks that serve to start one over the event bus.
 *
 * Services ask it for a client of the user's runtime (started if need be) and follow runtimes starting
 * and stopping; what a runtime is and how it is sandboxed, frozen and evicted is the host's business.
 */

const RUNTIME_WANTED_CHANNEL = 'runtime.wanted';
const RUNTIME_BUSY_CHANNEL = 'runtime.busy';
/**
 * A process is about to use a user's runtime it found by its row ({ userId }): the host marks it used
 * and thaws it if it is frozen. Until then the request waits in the runtime's socket, a few ms.
 */
export const RUNTIME_USED_CHANNEL = 'runtime.used';
/**
 * Stop a user's runtime ({ userId }): a process that hosts none (the CLI erasing a person) asks this
 * machine's serve, which stops it here or on its runner.
 */
const RUNTIME_STOP_CHANNEL = 'runtime.stop';
/** How long a process that hosts no runtime waits for this machine's serve to start one it asked for. */
const WANT_TIMEOUT_MS = 40_000;
/** ...asking again this often meanwhile (a start asked again joins the one under way). */
const WANT_AGAIN_MS = 2_000;

/**
 * What the person is told when their runtime is reached on another runner host than before: 'moved'
 * (a drain took their workspace and conversation along). A fresh start there (their runner was lost, with
 * their files on it) the turn finds itself: its runtime session is not there (turn-runner.ts).
 */
export interface RuntimeMove {
  workspace: 'moved';
}

/** Runtimes on runner hosts, as the control plane reaches them (runners/runner-fleet.ts). */
export interface RemoteRuntimes {
  /** `onMoved`: told once when a drain moved the user's files to this runner since their last turn. */
  acquire(runnerId: string, owner: RuntimeOwner, onStarting?: () => void, onMoved?: (m: RuntimeMove) => void): Promise<RuntimeHandle>;
  setRunning(userId: string, upstreamSessionId: string, running: boolean): void;
  stopUser(userId: string): Promise<void>;
  /** Follows runtimes on runners whose channel this process holds becoming ready (with where) or going (null). */
  onChange(listener: (owner: RuntimeOwner, handle: RuntimeHandle | null) => void): () => void;
}

/** What the local host writes down (HostRecords), and how the processes that do not host a runtime find it. */
export interface RuntimeRecords extends HostRecords {
  /** The user's runtime where another process of this machine hosts it and it runs (null: it does not run). */
  elsewhere(owner: RuntimeOwner): Promise<RuntimeHandle | null>;
}

type HostDeps = Parameters<typeof createRuntimeHost>[0];

/**
 * The session and message a tool call from the user's runtime on a runner came from, asked of that
 * runtime through its recorded tunnel (the runner fleet's RuntimeSelf; runtime-tool-calls.ts). Null when
 * it runs on no runner now, or the runtime cannot tell.
 */
export async function runnerToolCallOrigin(records: Pick<RuntimeRecords, 'elsewhere'>, owner: RuntimeOwner, call: { tool: string; input: Record<string, unknown> }): Promise<ToolCallOrigin | null> {
  const handle = await records.elsewhere(owner);
  return handle?.endpoint.tunnel ? locateToolCall(createRuntimeClient(handle), call) : null;
}

export function createRuntimePool(
  deps: Omit<HostDeps, 'records' | 'prepare'> & {
    records: RuntimeRecords;
    bus: EventBus;
    log: Logger;
    /**
     * Runner hosts: where the user's runtime is placed. Null: here, or the local host of this
     * machine as before; otherwise the runner's id, and `remote` reaches it there.
     */
    placement?: (owner: RuntimeOwner) => Promise<string | null>;
    remote?: RemoteRuntimes;
  },
) {
  const { records } = deps;
  const host = createRuntimeHost({
    ...deps,
    prepare: (handle) => createRuntimeClient(handle).warmUp(),
    locate: (handle, call) => locateToolCall(createRuntimeClient(handle), call),
  });
  const changes = createListeners<[owner: RuntimeOwner, handle: RuntimeHandle | null]>((err) => deps.log.error({ err: err.message }, 'runtime listener failed'));
  const notify = changes.notify;
  let unsubscribe: Array<() => Promise<void>> = [];
  let followingStops = false;
  /** Per user: when this process last told the host it uses their runtime (RUNTIME_USED_CHANNEL). */
  const toldUsed = new Map<string, number>();
  const usedEveryMs = Math.min(5000, deps.freezeAfterMs > 0 ? deps.freezeAfterMs / 2 : 5000);

  host.onChange(notify);
  // Runtimes on runners whose channel this process holds: followed the same way (session streams).
  deps.remote?.onChange(notify);

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

  /** Elsewhere on this machine: the runtime's row, or its serve asked to start it. */
  async function acquireElsewhere(owner: RuntimeOwner, onStarting?: () => void): Promise<RuntimeHandle> {
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
      let askedAt = Date.now();
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 150));
        if (busy) throw new RuntimeBusyError(deps.max);
        const h = await found();
        if (h) return h;
        // Asked again now and then: a serve that was (re)starting when it was first asked had not begun
        // to listen, and a turn taken in those seconds would otherwise wait out the whole timeout.
        if (Date.now() - askedAt >= WANT_AGAIN_MS) {
          askedAt = Date.now();
          await deps.bus.publish(RUNTIME_WANTED_CHANNEL, owner).catch(() => {});
        }
      }
      throw runtimeUnavailable('no `aws serve` started the runtime (is serve running on this host?)');
    } finally {
      await off().catch(() => {});
    }
  }

  /** The runner the user's runtime is placed on; null: this machine (no runner hosts, or this serve's local runner). */
  const placed = (owner: RuntimeOwner): Promise<string | null> => (deps.placement && deps.remote ? deps.placement(owner) : Promise.resolve(null));

  async function acquire(owner: RuntimeOwner, opts: { onStarting?: () => void; onMoved?: (m: RuntimeMove) => void } = {}): Promise<RuntimeHandle> {
    const runnerId = await placed(owner);
    if (runnerId) return deps.remote!.acquire(runnerId, owner, opts.onStarting, opts.onMoved);
    return host.hosting ? host.acquire(owner, opts.onStarting) : acquireElsewhere(owner, opts.onStarting);
  }

  async function stopUser(userId: string): Promise<void> {
    if (!(await host.stopUser(userId))) await deps.remote?.stopUser(userId);
  }

  async function runningHandle(owner: RuntimeOwner): Promise<RuntimeHandle | null> {
    if (host.hosting && host.holds(owner.userId)) return host.running(owner);
    return runningElsewhere(owner);
  }

  return {
    get hosting() {
      return host.hosting;
    },

    /**
     * Where the user's runtime answers; starts it when it is not running (telling `onStarting` first, so
     * the caller can say why it waits), thaws it when it is frozen. RuntimeBusyError when none is free.
     */
    acquire,

    /**
     * Starts the user's runtime ahead of their first prompt, where it is placed (on this machine the host
     * also prepares it while the person types: runtime-host.ts prestart).
     */
    async prestart(owner: RuntimeOwner): Promise<void> {
      if (host.refusal) return;
      const runnerId = await placed(owner);
      if (runnerId) await deps.remote!.acquire(runnerId, owner);
      else if (host.hosting) await host.prestart(owner);
      else await acquireElsewhere(owner);
    },

    /** A client of the user's runtime (started if need be). */
    async client(owner: RuntimeOwner): Promise<RuntimeClient> {
      return createRuntimeClient(await acquire(owner));
    },

    /**
     * A client of the user's runtime if it runs (in this process, elsewhere on the machine or on a runner),
     * null if it does not: for stopping what runs there, which must never start a runtime to do so.
     */
    async runningClient(owner: RuntimeOwner): Promise<RuntimeClient | null> {
      const handle = await runningHandle(owner);
      return handle ? createRuntimeClient(handle) : null;
    },

    /** Where the user's runtime answers if it runs (here, elsewhere on the host, or on a runner); never starts one. */
    runningHandle,

    /** Why agents cannot run in this process's host, if they cannot. */
    get refusal() {
      return host.refusal;
    },

    /** Something happened in the runtime (an event, a call): it is not idle (and not frozen). */
    touch: (userId: string) => host.touch(userId),

    /**
     * Someone uses the runtime through a connection of its own (a terminal): not idle, not frozen, also
     * when another serve on this machine hosts it (told over the bus, at most every few seconds). On a
     * runner the runner sees the terminal's messages itself.
     */
    keepAwake(userId: string): void {
      if (host.hosting && host.holds(userId)) host.touch(userId);
      else tellUsed(userId);
    },

    /** The runtime reported a session running or idle (a running turn keeps its runtime from eviction). */
    setRunning(userId: string, upstreamSessionId: string, running: boolean): void {
      if (host.setRunning(userId, upstreamSessionId, running) || !deps.remote) return;
      // A runtime on a runner: the runner must know too (a running turn keeps its runtime there).
      deps.remote.setRunning(userId, upstreamSessionId, running);
    },

    /** Called when a user's runtime is ready (with where) and when it stops or restarts (null). */
    onChange: changes.add,

    /** The runtimes this process hosts. */
    live: () => host.live(),

    /** Capacity, what is resident and in which state, and the memory it holds (for this hosting process). */
    status: () => host.status(),

    /** Which limits hold the runtimes this process hosts, and why not the others. */
    limits: () => host.limits(),

    /**
     * Becomes this machine's runtime host (serve): forgets rows of runtimes no process runs any more, takes
     * other processes' start requests. With `refuse`, it hosts no runtime: every request for one fails
     * with that reason (fail closed).
     */
    async host(refuse?: { problem: string; hint?: string }): Promise<void> {
      if (host.hosting) return;
      await host.start(refuse);
      unsubscribe.push(
        await deps.bus.subscribe(RUNTIME_WANTED_CHANNEL, (p) => {
          const o = p as RuntimeOwner;
          if (!o?.userId || !o.tenantId) return;
          host.acquire(o).catch((err) => {
            if (err instanceof RuntimeBusyError) void deps.bus.publish(RUNTIME_BUSY_CHANNEL, o).catch(() => {});
            else deps.log.error({ err: (err as Error).message, userId: o.userId }, 'could not start a runtime another process asked for');
          });
        }),
        await deps.bus.subscribe(RUNTIME_USED_CHANNEL, (p) => {
          const userId = (p as { userId?: unknown })?.userId;
          if (typeof userId === 'string') host.touch(userId);
        }),
      );
    },

    /** Stops one user's runtime (their removal, or an operator's request), wherever it runs. */
    stopUser,

    /**
     * Takes other processes' requests to stop a user's runtime (RUNTIME_STOP_CHANNEL): a serve does, also
     * one hosting no runtime itself (its runners' runtimes are reached through it). Once per process.
     */
    async followStops(): Promise<void> {
      if (followingStops) return;
      followingStops = true;
      unsubscribe.push(
        await deps.bus.subscribe(RUNTIME_STOP_CHANNEL, (p) => {
          const userId = (p as { userId?: unknown })?.userId;
          if (typeof userId === 'string') void stopUser(userId).catch((err) => deps.log.error({ err: (err as Error).message, userId }, 'could not stop a runtime another process asked to stop'));
        }),
      );
    },

    /**
     * Stops the user's runtime wherever it runs, also from a process that hosts none (asking this
     * machine's serve over the bus): true once it no longer runs, false if it still did after `waitMs`.
     */
    async stopAnywhere(owner: RuntimeOwner, waitMs = 15_000): Promise<boolean> {
      await stopUser(owner.userId);
      if (!(await runningHandle(owner))) return true;
      await deps.bus.publish(RUNTIME_STOP_CHANNEL, { userId: owner.userId });
      const deadline = Date.now() + waitMs;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 150));
        if (!(await runningHandle(owner))) return true;
      }
      return false;
    },

    /** Stops every runtime this process hosts (shutdown). */
    async stop(): Promise<void> {
      for (const off of unsubscribe) await off().catch(() => {});
      unsubscribe = [];
      followingStops = false;
      await host.stop();
    },
  };
}

export type RuntimePool = ReturnType<typeof createRuntimePool>;
