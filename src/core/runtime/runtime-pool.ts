import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from '../../db/database.js';
import { isProcessAlive } from '../../lib/process-state.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { ProxyListener } from '../egress/egress-proxy.js';
import { AppError, UnavailableError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { Logger } from '../logger.js';
import { createRuntimeClient, runtimeUnavailable, type RuntimeClient, type RuntimeHandle } from './runtime-client.js';
import { locateToolCall, type ToolCallOrigin } from './runtime-tool-calls.js';
import type { LaunchedRuntime, RuntimeLauncher } from './runtime-launcher.js';
import type { RuntimeRepo, RuntimeRow } from './runtime.repo.js';
import { SANDBOX_PATHS } from './sandbox.js';

/**
 * One runtime per user (the unit of isolation: their sessions, their workspace, their process), run by
 * the `aws serve` that hosts the pool. A runtime starts on demand (the user's first turn or stream),
 * stops after `idleMs` without use, restarts with back-off when it crashes, and at most `max` run at
 * once: to start one more, the least recently used runtime with no turn running is stopped; when every
 * runtime is busy, the caller is told to wait (RuntimeBusyError) and its turn waits in the queue.
 *
 * Other processes (a separate `aws worker`, the CLI) find a running runtime through its row in
 * agent_runtimes, and ask the host to start one over the event bus.
 */
export interface RuntimeOwner {
  tenantId: string;
  userId: string;
}

const NONE_RUNNING: ReadonlySet<string> = new Set();

/** Every runtime is busy: the turn waits (it is not an error of the turn, so it does not use up attempts). */
export class RuntimeBusyError extends AppError {
  readonly status = 503;
  constructor(max: number) {
    super(`all ${max} agent runtimes of this host are busy`, 'runtime_busy', {
      hint: 'The turn waits in the queue and starts when a runtime frees up; an operator can raise AGENTWS_RUNTIME_MAX.',
      details: { max },
    });
  }
}

/** The proxy identity of a runtime: who it belongs to and the gateway credential it was configured with. */
export interface RuntimeIdentity extends RuntimeOwner {
  credential: string;
}

/** Where a recorded runtime answers (for processes that did not start it). */
export function handleOfRow(row: RuntimeRow, box: SecretBox, dataDir: string): RuntimeHandle {
  const authorization = box.open(row.passwordSealed);
  return row.sandboxed
    ? { endpoint: { socketPath: row.socketPath, authorization }, directory: SANDBOX_PATHS.workspace }
    : { endpoint: { url: row.socketPath, authorization }, directory: workspaceDir(dataDir, row) };
}

const workspaceDir = (dataDir: string, o: RuntimeOwner) => join(dataDir, 'workspaces', o.tenantId, o.userId);
/** The tenant's shared files on the host: mounted read-only at /srv/tenant in every sandbox of the tenant. */
export const tenantSharedDir = (dataDir: string, tenantId: string) => join(dataDir, 'tenants', tenantId, 'shared');

export const RUNTIME_WANTED_CHANNEL = 'runtime.wanted';
export const RUNTIME_BUSY_CHANNEL = 'runtime.busy';
/** Recently used runtimes are not evicted to make room (their turn may be about to start). */
const RECENT_USE_MS = 15_000;
const SWEEP_MS = 15_000;
const MAX_BACKOFF_MS = 30_000;
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
  /** Someone else asked for the runtime while it was starting (a turn waiting for it). */
  wanted: boolean;
}

export function createRuntimePool(deps: {
  db: Database;
  repo: RuntimeRepo;
  box: SecretBox;
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
}) {
  const { db, repo, box, log } = deps;
  const entries = new Map<string, Entry>();
  const listeners = new Set<(owner: RuntimeOwner, handle: RuntimeHandle | null) => void>();
  let hosting = false;
  /** Why agents cannot run on this host (no sandbox possible): every acquire fails with it. */
  let refusal: { problem: string; hint?: string } | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  let unsubscribe: Array<() => Promise<void>> = [];

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

  async function launch(e: Entry): Promise<RuntimeHandle> {
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
      await repo.recordRuntime(db, {
        userId: e.owner.userId,
        tenantId: e.owner.tenantId,
        hostPid: process.pid,
        pid: launched.pid,
        socketPath: launched.endpoint.socketPath ?? launched.endpoint.url!,
        passwordSealed: box.seal(launched.endpoint.authorization),
        sandboxed: deps.sandboxed,
      });
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
    void launched.exited.then((x) => onExit(e, launched, x));
    notify(e.owner, handle);
    return handle;
  }

  function onExit(e: Entry, launched: LaunchedRuntime, x: { code: number | null; signal: NodeJS.Signals | null; stderr: string }) {
    if (e.launched !== launched) return;
    e.launched = null;
    e.handle = null;
    e.running.clear();
    void repo.forgetRuntime(db, e.owner.userId, launched.pid).catch(() => {});
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
      await l.stop();
      await repo.forgetRuntime(db, e.owner.userId, l.pid).catch(() => {});
    }
    await e.listener?.close().catch(() => {});
    e.listener = null;
    if (e.handle) {
      e.handle = null;
      notify(e.owner, null);
    }
  }

  /** Makes room for one more runtime, or says why not. */
  async function makeRoom(): Promise<void> {
    if (entries.size < deps.max) return;
    const now = Date.now();
    const idle = [...entries.values()].filter((e) => e.handle && e.running.size === 0 && now - e.lastUsed > (deps.recentUseMs ?? RECENT_USE_MS)).sort((a, b) => a.lastUsed - b.lastUsed);
    if (!idle.length) throw new RuntimeBusyError(deps.max);
    await stopEntry(idle[0], 'making room for another user');
  }

  /** In the host: the user's runtime, started if need be. */
  async function acquireHere(owner: RuntimeOwner): Promise<RuntimeHandle> {
    let e = entries.get(owner.userId);
    if (e) {
      e.lastUsed = Date.now();
      if (e.handle) return e.handle;
      if (e.starting) {
        e.wanted = true;
        return e.starting;
      }
    }
    await makeRoom();
    e = entries.get(owner.userId);
    if (e?.handle) return e.handle;
    if (e?.starting) {
      e.wanted = true;
      return e.starting;
    }
    const entry: Entry = { owner, handle: null, launched: null, starting: null, listener: null, lastUsed: Date.now(), running: new Set(), restarts: 0, stopping: false, wanted: false };
    entries.set(owner.userId, entry);
    entry.starting = launch(entry);
    try {
      const handle = await entry.starting;
      // Used as it is handed out: a start slower than the idle time must not leave it looking idle
      // since the request that started it (the sweep stopped such runtimes as they were handed out).
      entry.lastUsed = Date.now();
      return handle;
    } catch (err) {
      if (entries.get(owner.userId) === entry) entries.delete(owner.userId);
      throw err;
    } finally {
      entry.starting = null;
    }
  }

  /** The handle of the user's runtime where another process hosts it and it runs; null otherwise. */
  async function runningElsewhere(owner: RuntimeOwner): Promise<RuntimeHandle | null> {
    const row = await repo.runtimeOf(db, owner.userId);
    if (!row || !isProcessAlive(row.hostPid) || !isProcessAlive(row.pid) || row.tenantId !== owner.tenantId) return null;
    if (row.sandboxed && !existsSync(row.socketPath)) return null;
    return handleOfRow(row, box, deps.dataDir);
  }

  /** Elsewhere: the runtime's row, or the host asked to start it. */
  async function acquireRemote(owner: RuntimeOwner): Promise<RuntimeHandle> {
    const found = () => runningElsewhere(owner);
    const now = await found();
    if (now) return now;
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

  function acquire(owner: RuntimeOwner): Promise<RuntimeHandle> {
    if (refusal) {
      return Promise.reject(new UnavailableError(`agents cannot run on this host: ${refusal.problem}`, { code: 'sandbox_unavailable', hint: refusal.hint }));
    }
    return hosting ? acquireHere(owner) : acquireRemote(owner);
  }

  function sweep() {
    const now = Date.now();
    for (const e of entries.values()) {
      if (e.handle && e.running.size === 0 && now - e.lastUsed > deps.idleMs) void stopEntry(e, 'idle');
    }
  }

  return {
    get hosting() {
      return hosting;
    },

    /** Where the user's runtime answers; starts it when it is not running. RuntimeBusyError when none is free. */
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
      const handle = await acquire(owner);
      const e = entries.get(owner.userId);
      if (fresh && e && !e.wanted) await createRuntimeClient(handle).warmUp();
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
      const here = hosting ? entries.get(owner.userId) : undefined;
      const handle = here ? (here.owner.tenantId === owner.tenantId ? here.handle : null) : await runningElsewhere(owner);
      return handle ? createRuntimeClient(handle) : null;
    },

    /**
     * The session and message of the user's runtime that a tool call reaching the service came from
     * (runtime-tool-calls.ts). Only for a runtime this process hosts (the one whose proxy listener the
     * call arrived on); null when it is not here or the runtime cannot tell.
     */
    async toolCallOrigin(owner: RuntimeOwner, call: { tool: string; input: Record<string, unknown> }): Promise<ToolCallOrigin | null> {
      const e = entries.get(owner.userId);
      if (!e?.handle || e.owner.tenantId !== owner.tenantId) return null;
      return locateToolCall(createRuntimeClient(e.handle), call);
    },

    /** Why agents cannot run here, if they cannot. */
    get refusal() {
      return refusal;
    },

    /** Something happened in the runtime (an event, a call): it is not idle. */
    touch(userId: string): void {
      const e = entries.get(userId);
      if (e) e.lastUsed = Date.now();
    },

    /** The runtime reported a session running or idle (a running turn keeps its runtime from eviction). */
    setRunning(userId: string, upstreamSessionId: string, running: boolean): void {
      const e = entries.get(userId);
      if (!e) return;
      e.lastUsed = Date.now();
      if (running) e.running.add(upstreamSessionId);
      else e.running.delete(upstreamSessionId);
    },

    /** The runtime sessions of the user with a turn running now (empty when this process hosts no runtime of theirs). */
    runningSessions(userId: string): ReadonlySet<string> {
      return entries.get(userId)?.running ?? NONE_RUNNING;
    },

    /** Called when a user's runtime is ready (with where) and when it stops or restarts (null). */
    onChange(listener: (owner: RuntimeOwner, handle: RuntimeHandle | null) => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },

    /** The runtimes this process hosts. */
    live() {
      return [...entries.values()].map((e) => ({ ...e.owner, pid: e.launched?.pid ?? null, state: e.handle ? 'ready' : 'starting', running: e.running.size, idleMs: Date.now() - e.lastUsed }));
    },

    /**
     * Becomes the host (serve): forgets rows of runtimes no process runs any more, takes start requests.
     * With `refuse`, it hosts no runtime: every request for one fails with that reason (fail closed).
     */
    async host(refuse?: { problem: string; hint?: string }): Promise<void> {
      if (hosting) return;
      hosting = true;
      refusal = refuse ?? null;
      const rows = await repo.allRuntimes(db);
      const dead = [...new Set(rows.filter((r) => r.hostPid === process.pid || !isProcessAlive(r.hostPid)).map((r) => r.hostPid))];
      if (dead.length) await repo.forgetRuntimesOfHost(db, dead);
      unsubscribe.push(
        await deps.bus.subscribe(RUNTIME_WANTED_CHANNEL, (p) => {
          const o = p as RuntimeOwner;
          if (!o?.userId || !o.tenantId) return;
          acquireHere(o).catch((err) => {
            if (err instanceof RuntimeBusyError) void deps.bus.publish(RUNTIME_BUSY_CHANNEL, o).catch(() => {});
            else log.error({ err: (err as Error).message, userId: o.userId }, 'could not start a runtime another process asked for');
          });
        }),
      );
      sweeper = setInterval(sweep, Math.min(SWEEP_MS, deps.idleMs));
      sweeper.unref();
    },

    /** Stops one user's runtime (their removal, or an operator's request). */
    async stopUser(userId: string): Promise<void> {
      const e = entries.get(userId);
      if (e) await stopEntry(e, 'stopped on request');
    },

    /** Stops every runtime (shutdown). */
    async stop(): Promise<void> {
      if (sweeper) clearInterval(sweeper);
      sweeper = null;
      for (const off of unsubscribe) await off().catch(() => {});
      unsubscribe = [];
      await Promise.all([...entries.values()].map((e) => stopEntry(e, 'shutdown')));
      hosting = false;
    },
  };
}

export type RuntimePool = ReturnType<typeof createRuntimePool>;
