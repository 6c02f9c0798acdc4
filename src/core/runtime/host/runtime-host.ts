import { createHmac } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { join } from 'node:path';
import { workspaceDir } from '../../../lib/data-paths.js';
import { readHostMemory, readSwap, swapHeldBytes, type HostMemory, type SwapInfo } from '../../../lib/host-memory.js';
import { createListeners } from '../../../lib/listeners.js';
import { processDescendants, processesAnonKb } from '../../../lib/process-state.js';
import { AppError, UnavailableError } from '../../../kernel/errors.js';
import type { Logger } from '../../../kernel/logger.js';
import { relief, roomForOneMore } from './runtime-capacity.js';
import { openRuntimeCgroups, type CgroupKind, type CgroupMechanisms, type CgroupUsage, type RuntimeCgroup, type RuntimeCgroups } from './runtime-cgroups.js';
import { diskSpace, measureDisk, type DiskSpace } from './runtime-disk.js';
import { diskFloorBytes, growing, inodeFloor, inotifyInstancesWanted, limitStopWhy, overQuota, pidsVerdict, runtimesMemoryTotal, runtimesPidsTotal, scanDue, type LimitNotice } from './runtime-limits-fns.js';
import type { LaunchedRuntime, RuntimeLauncher } from './runtime-launcher.js';
import { runtimeUnavailable, type RuntimeHandle } from './runtime-transport.js';
import { createStartGate } from './start-gate.js';

/**
 * The runtimes this machine hosts: one per user (the unit of isolation: their sessions, their workspace,
 * their process), in `aws serve` (its local runner) or in `aws runner`. A runtime starts on demand, is
 * frozen after `freezeAfterMs` without use (no CPU at all; thawed in milliseconds by the next request,
 * runtime-cgroups.ts), paged out to swap after `pageOutAfterMs` more (it then holds a fraction of its
 * memory: compressed, with zram; its next turn brings back what it touches), stops after `idleMs`,
 * restarts with back-off when it crashes, and at most `max` run at once (by default what the host's
 * memory holds, runtime-capacity.ts): to start one more, the least recently used runtime with no turn
 * running is stopped; when every runtime is busy, the caller is told to wait (RuntimeBusyError) and its
 * turn waits in the queue. When the host runs short of memory, idle
 * runtimes are paged out, least recently used first, and stopped only when that is not enough, never one
 * with a turn running (runtime-capacity.ts relief).
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

const readInt = (file: string, dflt: number): number => {
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    return Number.isFinite(n) && n > 0 ? n : dflt;
  } catch {
    return dflt;
  }
};

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
/** How often the OOM counters of runtimes with a turn running are read (one small file each). */
const LIMIT_WATCH_MS = 1_000;
/** How often the data directory's free space is read (statfs: cheap) and due workspaces are measured. */
const DISK_WATCH_MS = 2_000;
/**
 * A person whose runtime no longer runs here is reported this long after their last change (their stop
 * included), then no more: their row keeps what it last said, and a host they moved to reports them.
 */
const USAGE_KEEP_MS = 120_000;
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
  /** Its cgroups, which its processes are born in (null: none can be written on this host). */
  group: RuntimeCgroup | null;
  /** The group's counters as last seen: OOM kills and refused forks already told of. */
  oomSeen: number;
  pidsRefusedSeen: number;
  /** Forks were refused at the last sweep (a second sweep in a row stops the runtime: pidsVerdict). */
  pidsHit: boolean;
  /** The person's workspace quota as last given (bytes; null: none). */
  quotaBytes: number | null;
  /** Its files' last measure: bytes (null: never measured), when, how long it took, the filesystem's free bytes then. */
  disk: { bytes: number | null; at: number; ms: number; freeAt: number };
  /** What it holds of the host's memory when last read (bytes: its processes' private memory, and its share of a compressed swap), and when. */
  memoryBytes: number;
  memoryReadAt: number;
  /** Its memory was pushed out to swap since it was frozen (until it is thawed). */
  pagedOut: boolean;
  /** A page-out asked for (queued behind others, or running): settled by settlePageOut before a thaw or a stop. */
  paging: Promise<void> | null;
  /** That page-out's progress: a queued one is called off when the runtime is wanted, a running one waited for. */
  pageOutAsk: { started: boolean; cancelled: boolean } | null;
  /** The last page-out failed: not tried again until the runtime has been used. */
  pageOutFailed: boolean;
}

/** Which limits hold the runtimes of this host, and why one does not (for status, /readyz and the report). */
export interface LimitsStatus {
  memory: CgroupKind | null;
  /** Each runtime's memory limit (bytes), when one is set. */
  memoryMaxBytes: number | null;
  processes: CgroupKind | null;
  processesMax: number | null;
  /** Equal CPU weights per runtime, and the runtimes' parent below the service. */
  cpu: CgroupKind | null;
  /** The sandbox's /tmp: a tmpfs of this size, in the runtime's memory (bytes). */
  tmpBytes: number | null;
  /** The workspace quota: measured by the host (the kernel enforces none; see docs/admin/limits.md), or off. */
  disk: 'measured' | null;
  /** How idle runtimes are paged out to swap (cgroup2 `memory.reclaim`, cgroup1 `memory.force_empty`); null: they stay resident (see unavailable.paging). */
  paging: CgroupKind | null;
  /** Frozen this long (ms), an idle runtime is paged out (AGENTWS_RUNTIME_PAGEOUT_SECONDS), when paging holds. */
  pageOutAfterMs: number | null;
  /** The host's swap (bytes), and what its compressed pool takes of the memory; null: not read. */
  swap: { totalBytes: number; freeBytes: number; compressedStoredBytes: number | null; compressedUsedBytes: number | null } | null;
  /** Why a limit is missing here: `memory`, `processes`, `cpu`, `disk`; and why idle runtimes are not paged out: `paging`. */
  unavailable: Record<string, string>;
}

/** One person's runtime (or, for disk, workspace) against its limits, as the host last read them. */
export interface RuntimeUsage {
  tenantId: string;
  userId: string;
  /** Whether their runtime runs here now (memory and processes are only read while it does). */
  running: boolean;
  memoryBytes: number | null;
  memoryMaxBytes: number | null;
  pids: number | null;
  pidsMax: number | null;
  diskBytes: number | null;
  diskQuotaBytes: number | null;
  diskMeasuredAt: number | null;
  /** Processes the kernel ended at the memory limit, and forks refused at the process limit, since the runtime started. */
  oomKills: number;
  pidsRefused: number;
}

/** What the host holds now (runtime status, /metrics, runtime_hosts). */
export interface PoolStatus {
  capacity: number;
  resident: number;
  ready: number;
  /** Frozen, paged-out ones included. */
  frozen: number;
  /** Of the frozen, those whose memory is in swap. */
  pagedOut: number;
  starting: number;
  busy: number;
  runtimesMemoryBytes: number;
  memory: HostMemory;
  freezer: CgroupKind | null;
  freezerUnavailable: string | null;
  limits: LimitsStatus;
  /** The data directory's filesystem (workspaces, homes, the embedded database), when it could be read. */
  disk: DiskSpace | null;
  usage: RuntimeUsage[];
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
  /** A runtime met one of its limits (the person is told on the stream of any turn they have running). */
  limit?(owner: RuntimeOwner, notice: LimitNotice): Promise<void>;
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
  /** Time frozen after which a runtime is paged out to swap; 0 or absent: never (AGENTWS_RUNTIME_PAGEOUT_SECONDS). */
  pageOutAfterMs?: number;
  /** The host's swap now (tests pass their own to simulate a host without). */
  swap?: () => SwapInfo;
  /** Runtime starts run at once (default: one per core, at most 4); the others wait their turn. */
  startsAtOnce?: number;
  /** How long a turn waits while its runtime's start is queued (tests shorten it). */
  queuedWaitMs?: number;
  /** The host's memory now (tests pass their own to simulate pressure). */
  memory?: () => HostMemory;
  /** The runtimes' cgroups (tests may pass their own, or null); by default the host's, opened when the pool starts hosting. */
  openCgroups?: () => RuntimeCgroups | null;
  /**
   * What bounds each runtime (AGENTWS_RUNTIME_MEMORY_MAX, _PIDS_MAX; null: that limit off) and the size of
   * its /tmp (AGENTWS_RUNTIME_TMP_SIZE, which the launcher applies; here for status).
   */
  limits?: { memoryMaxBytes: number | null; pidsMax: number | null; tmpBytes?: number | null };
  /** A person's workspace quota (bytes; null: none), asked at each start and acquire. Without it there is no quota. */
  quotaOf?: (owner: RuntimeOwner) => Promise<number | null> | number | null;
  /** Measures a person's files (bytes), and reads the data directory's filesystem (tests pass their own). */
  measureDisk?: (paths: readonly string[]) => Promise<number | null>;
  diskSpace?: (dir: string) => DiskSpace | null;
  /** How often the disk is watched, and the host swept (tests shorten them). */
  diskWatchMs?: number;
  sweepMs?: number;
  /** Prepares a runtime an early start brought up (runtime-client's warmUp): it runs while the person types. */
  prepare?: (handle: RuntimeHandle) => Promise<void>;
  /** The host's fs.inotify.max_user_instances (tests give a file of their own; null: leave it). */
  inotifyLimitFile?: string | null;
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
  let diskWatcher: NodeJS.Timeout | null = null;
  let limitWatcher: NodeJS.Timeout | null = null;
  let cgroups: RuntimeCgroups | null = null;
  /** Why cgroups are not there at all (when openCgroups gave none). */
  let cgroupsMissing: string | null = null;
  /** The host's inotify budget falls short of the capacity and could not be raised: why (status). */
  let inotifyShort: string | null = null;
  /** Each person's latest figures (kept a while after their runtime stopped: their files stay). */
  const usage = new Map<string, RuntimeUsage & { changedAt: number }>();
  /** The data directory's filesystem when last read. */
  let space: DiskSpace | null = null;
  /** Free bytes when the host last froze and measured everyone for a short disk (not again until it drops further). */
  let shortHandledAt: number | null = null;
  let diskBusy = false;
  const measure = deps.measureDisk ?? ((paths: readonly string[]) => measureDisk(paths));
  const readSpace = deps.diskSpace ?? diskSpace;
  /** Where people's files are (their own filesystem, when the operator gave them one), else the data directory. */
  const spaceDir = () => (existsSync(join(deps.dataDir, 'workspaces')) ? join(deps.dataDir, 'workspaces') : deps.dataDir);
  const memory = deps.memory ?? readHostMemory;
  const swapNow = deps.swap ?? readSwap;
  /** Page-outs run one after another: each is a burst of the kernel's time (~0.5 s per 100 MB) on one core. */
  let pageOuts: Promise<void> = Promise.resolve();
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
    e.quotaBytes = (await deps.quotaOf?.(e.owner)) ?? null;
    // Made before the runtime: its first process joins it before it runs anything (limitsPrefix).
    const group = newGroup(e.owner);
    let launched: LaunchedRuntime;
    try {
      launched = await launcher.launch(
        dirsOf(e.owner),
        async (at) => {
          // The credential is only known once the password is: the listener takes the identity by reference.
          identity = { ...e.owner, credential: '', self: selfOf(e) };
          e.listener = await deps.listen(identity, at);
          const m = /:(\d+)$/.exec(e.listener.address);
          return { port: m ? Number(m[1]) : undefined };
        },
        // No single file larger than the whole quota: the kernel refuses that write (EFBIG) at once, where
        // the measured quota would see it seconds later.
        { procs: group?.procs ?? [], fileSizeBytes: e.quotaBytes },
      );
    } catch (err) {
      group?.kill();
      group?.remove();
      throw err;
    }
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
      group?.kill();
      group?.remove();
      await e.listener?.close();
      e.listener = null;
      throw err;
    }
    e.launched = launched;
    e.handle = handle;
    e.group = group;
    // Counters of a group this user had before in this process are not news.
    const seen = group?.usage();
    e.oomSeen = seen?.oomKills ?? 0;
    e.pidsRefusedSeen = seen?.pidsRefused ?? 0;
    e.pidsHit = false;
    e.memoryReadAt = 0;
    void launched.exited.then((x) => onExit(e, launched, x));
    notify(e.owner, handle);
    // What its files take, before its first turn writes anything (a quota lowered since its last run).
    if (e.quotaBytes !== null) void measureEntry(e).catch(() => {});
    return handle;
  }

  /** The runtime's cgroups with its limits set; null where the host has none. Fails the start when they cannot be made. */
  function newGroup(owner: RuntimeOwner): RuntimeCgroup | null {
    if (!cgroups) return null;
    try {
      return cgroups.group(owner.userId, { memoryMaxBytes: deps.limits?.memoryMaxBytes ?? null, pidsMax: deps.limits?.pidsMax ?? null });
    } catch (err) {
      throw new UnavailableError(`the agent's runtime cannot be given its limits: ${(err as Error).message}`, {
        code: 'runtime_unavailable',
        hint: 'A runtime never runs outside its limits. The service\'s cgroup must stay writable (root, or systemd Delegate=yes); `aws runtime status` shows which limits hold here.',
      });
    }
  }

  /** A limit met: the person is told (through the records), the report written at once. */
  function tell(e: Entry, notice: LimitNotice): void {
    log.warn({ userId: e.owner.userId, notice }, 'an agent runtime met one of its limits');
    // Written now, not at the next sweep: the control plane refuses turns by what the report says.
    lastReport.key = '';
    void report(memory()).catch(() => {});
    void records.limit?.(e.owner, notice).catch((err) => log.warn({ err: (err as Error).message }, 'could not tell of a runtime\'s limit'));
  }

  /**
   * Measures the runtime's files; past the quota and still growing, the runtime is stopped and the person
   * told. A runtime started past it (a quota lowered, or to read a transcript: turns are refused by the
   * control plane meanwhile) runs on until it writes more.
   */
  async function measureEntry(e: Entry, now: DiskSpace | null = space ?? readSpace(spaceDir())): Promise<void> {
    const before = e.disk.bytes;
    const d = dirsOf(e.owner);
    // The quota as it is now (an admin may have changed it since the runtime started).
    if (deps.quotaOf) e.quotaBytes = (await deps.quotaOf(e.owner)) ?? null;
    const t0 = Date.now();
    const bytes = await measure([d.workspace, join(d.root, 'home'), join(d.root, 'run')]);
    e.disk = { bytes, at: Date.now(), ms: Date.now() - t0, freeAt: now?.freeBytes ?? 0 };
    record(e);
    if (!overQuota(bytes, e.quotaBytes) || !growing(before, bytes) || !e.handle || e.stopping || entries.get(e.owner.userId) !== e) return;
    const notice: LimitNotice = { kind: 'disk', usedBytes: bytes!, quotaBytes: e.quotaBytes!, stopped: true };
    tell(e, notice);
    await stopEntry(e, limitStopWhy(notice), { limit: true });
  }

  /** The person's figures, as status and the report give them. */
  function record(e: Entry, u: CgroupUsage | null = null): void {
    const prev = usage.get(e.owner.userId);
    const running = !!e.launched;
    usage.set(e.owner.userId, {
      tenantId: e.owner.tenantId,
      userId: e.owner.userId,
      running,
      memoryBytes: running ? (u?.memoryBytes ?? prev?.memoryBytes ?? null) : null,
      memoryMaxBytes: u?.memoryMaxBytes ?? prev?.memoryMaxBytes ?? (e.group ? (deps.limits?.memoryMaxBytes ?? null) : null),
      pids: running ? (u?.pids ?? prev?.pids ?? null) : null,
      pidsMax: u?.pidsMax ?? prev?.pidsMax ?? null,
      diskBytes: e.disk.bytes ?? prev?.diskBytes ?? null,
      diskQuotaBytes: e.quotaBytes,
      diskMeasuredAt: e.disk.bytes !== null ? e.disk.at : (prev?.diskMeasuredAt ?? null),
      oomKills: u ? u.oomKills : (prev?.oomKills ?? 0),
      pidsRefused: u ? u.pidsRefused : (prev?.pidsRefused ?? 0),
      changedAt: Date.now(),
    });
  }

  function onExit(e: Entry, launched: LaunchedRuntime, x: { code: number | null; signal: NodeJS.Signals | null; stderr: string }) {
    if (e.launched !== launched) return;
    // The OOM killer ended it (or the process it needed) when its group's counter moved since the last sweep.
    const u = e.group?.usage();
    const oom = !e.stopping && !!u && u.oomKills > e.oomSeen;
    e.launched = null;
    e.handle = null;
    e.running.clear();
    e.group?.kill();
    e.group?.remove();
    e.group = null;
    if (u) record(e, u);
    // A stop on purpose is recorded by stopEntry (with why, and whether it was idle); this is a crash.
    if (oom) {
      const notice: LimitNotice = { kind: 'memory', limitBytes: deps.limits?.memoryMaxBytes ?? null, ended: 'runtime' };
      tell(e, notice);
      void records.stopped(e.owner, launched.pid, { why: limitStopWhy(notice), idle: false }).catch(() => {});
    } else if (!e.stopping) void records.stopped(e.owner, launched.pid).catch(() => {});
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

  /** Stops a runtime; `limit`: for a limit it met, so whatever it was doing was cut (never "idle"). */
  async function stopEntry(e: Entry, why: string, o: { limit?: boolean } = {}): Promise<void> {
    e.stopping = true;
    entries.delete(e.owner.userId);
    const launched = e.launched;
    await e.starting?.catch(() => {});
    const l = e.launched ?? launched;
    if (l) {
      log.info({ userId: e.owner.userId, why }, 'stopping agent runtime');
      // A frozen process cannot act on its SIGTERM (nor, under cgroup v1, die of a SIGKILL) until thawed;
      // not in the middle of a page-out (thaw).
      const group = e.group;
      await settlePageOut(e);
      await group?.thaw();
      await l.stop();
      // Whatever the agent left in its group (a process that outlived the sandbox's pid 1 a moment) goes too.
      group?.kill();
      group?.remove();
      e.group = null;
      record(e);
      await records.stopped(e.owner, l.pid, { why, idle: !o.limit && e.running.size === 0 && Date.now() - e.lastUsed > 5000 }).catch(() => {});
    }
    await e.listener?.close().catch(() => {});
    e.listener = null;
    if (e.handle) {
      e.handle = null;
      notify(e.owner, null);
    }
  }

  /**
   * Before a runtime is thawed or stopped: a page-out of it still queued behind others is called off (the
   * person would otherwise wait for every page-out ahead of it), one under way is waited for (a second or
   * two: thawed in the middle of it, the runtime would fault its pages back as fast as the kernel pushes
   * them out).
   */
  async function settlePageOut(e: Entry): Promise<void> {
    if (!e.paging) return;
    if (e.pageOutAsk && !e.pageOutAsk.started) {
      e.pageOutAsk.cancelled = true;
      return;
    }
    await e.paging;
  }

  /**
   * Lets a frozen runtime run again (before anything is asked of it), a page-out of it settled first. Its
   * memory in swap comes back as its next turn touches it.
   */
  async function thaw(e: Entry): Promise<void> {
    await settlePageOut(e);
    if (!e.group?.frozen) return;
    const t0 = performance.now();
    const wasPaged = e.pagedOut;
    await e.group.thaw();
    e.pagedOut = false;
    e.pageOutFailed = false;
    if (wasPaged) e.memoryReadAt = 0;
    log.debug({ userId: e.owner.userId, ms: Math.round((performance.now() - t0) * 10) / 10, pagedOut: wasPaged }, 'agent runtime thawed');
  }

  /** Why idle runtimes cannot be paged out here (null: they can). */
  function pagingUnavailable(swap: SwapInfo | null = null): string | null {
    if (!deps.pageOutAfterMs) return 'turned off (AGENTWS_RUNTIME_PAGEOUT_SECONDS=0)';
    const m = cgroups?.mechanisms();
    if (!m) return cgroupsMissing ?? 'this process hosts no runtime';
    if (!m.freezer) return `idle runtimes are not frozen here (${m.unavailable.freezer ?? 'no freezer'})`;
    if (!m.memory) return `no memory cgroup for the runtimes (${m.unavailable.memory ?? 'unavailable'})`;
    if ((swap ?? swapNow()).totalBytes <= 0) {
      return 'no swap on this host: idle runtimes stay resident (about 300 MB each). Turn on compressed swap (`sudo ./install.sh --systemd --zram`, or Debian\'s systemd-zram-generator), then restart the service; docs/operating/sizing.md';
    }
    return null;
  }

  /**
   * Pushes a frozen idle runtime's memory out to swap (frozen first if it is not yet). One at a time on
   * the host; a runtime used meanwhile (thawed, busy, stopping) is left as it is.
   */
  function pageOut(e: Entry, why: string): Promise<void> {
    if (e.paging || e.pagedOut || e.pageOutFailed || !e.group || !e.handle || e.stopping) return e.paging ?? Promise.resolve();
    const group = e.group;
    const ask = { started: false, cancelled: false };
    e.pageOutAsk = ask;
    const run = pageOuts.then(async () => {
      if (ask.cancelled || entries.get(e.owner.userId) !== e || e.stopping || e.running.size > 0 || e.group !== group) return;
      ask.started = true;
      if (!group.frozen) await group.freeze();
      const r = await group.pageOut();
      if (!r) return;
      e.pagedOut = true;
      e.memoryReadAt = 0;
      log.info({ userId: e.owner.userId, why, beforeMb: Math.round(r.beforeBytes / 2 ** 20), afterMb: Math.round(r.afterBytes / 2 ** 20), ms: Math.round(r.ms) }, 'agent runtime paged out');
    });
    const settled = run.catch((err) => {
      e.pageOutFailed = true;
      log.warn({ userId: e.owner.userId, err: (err as Error).message }, 'could not page out an agent runtime');
    });
    const tracked: Promise<void> = settled.finally(() => {
      if (e.paging === tracked) {
        e.paging = null;
        e.pageOutAsk = null;
      }
    });
    e.paging = tracked;
    pageOuts = settled;
    return tracked;
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
    if (short && !pagingUnavailable()) {
      // Short of memory, not of places: paging out the least recently used idle runtime that still holds
      // its memory is enough when it frees what one more needs.
      const resident = idle.find((e) => !e.pagedOut && !e.paging && !e.pageOutFailed);
      if (resident) {
        await pageOut(resident, 'making room for another user: the host is short of memory');
        if (roomForOneMore(memory())) return;
      }
    }
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
    const entry: Entry = { owner, handle: null, launched: null, starting: null, listener: null, lastUsed: Date.now(), running: new Set(), restarts: 0, stopping: false, wanted: !ahead, prepared: false, launching: false, group: null, oomSeen: 0, pidsRefusedSeen: 0, pidsHit: false, quotaBytes: null, disk: { bytes: null, at: 0, ms: 0, freeAt: 0 }, memoryBytes: 0, memoryReadAt: 0, pagedOut: false, paging: null, pageOutAsk: null, pageOutFailed: false };
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

  /**
   * What the kernel says of each awake runtime's limits since the last sweep: a process the OOM killer
   * ended (the runtime itself survived: the tool reports it killed, the person is told), forks refused at
   * the process limit (told; refused again at the next sweep, the runtime is stopped: pidsVerdict).
   */
  function watchLimits(e: Entry, oomOnly = false): void {
    if (!e.group || e.group.frozen || !e.handle || e.stopping) return;
    const u = e.group.usage();
    record(e, u);
    if (u.oomKills > e.oomSeen) {
      e.oomSeen = u.oomKills;
      tell(e, { kind: 'memory', limitBytes: u.memoryMaxBytes, ended: 'process' });
    }
    // The process limit's verdict takes two sweeps (5 s apart): a second's look would stop a build.
    if (oomOnly) return;
    const verdict = pidsVerdict({ refusedBefore: e.pidsRefusedSeen, refusedNow: u.pidsRefused, hitLastSweep: e.pidsHit });
    e.pidsRefusedSeen = u.pidsRefused;
    e.pidsHit = verdict !== 'ok';
    if (verdict === 'ok') return;
    const notice: LimitNotice = { kind: 'processes', limit: u.pidsMax, stopped: verdict === 'stop' };
    tell(e, notice);
    if (verdict === 'stop') void stopEntry(e, limitStopWhy(notice), { limit: true });
  }

  /**
   * The workspace quota, measured (the kernel enforces none here: docs/admin/limits.md, "Workspace quota"): every few
   * seconds the data directory's free space is read, and each awake runtime's files are measured when due
   * (scanDue); one past its quota is stopped. When the filesystem runs short (diskFloorBytes), every awake
   * runtime is frozen at once (no process of any agent writes another byte), measured, and the ones past
   * their quota stopped; the others thawed. The database and the others' files keep what is left.
   */
  async function watchDisk(): Promise<void> {
    if (diskBusy || !deps.quotaOf) return;
    diskBusy = true;
    try {
      space = readSpace(spaceDir());
      if (!space) return;
      const now = Date.now();
      const awake = [...entries.values()].filter((e) => e.launched && e.handle && !e.stopping && !e.group?.frozen);
      const short = space.freeBytes < diskFloorBytes(space.totalBytes) || space.freeInodes < inodeFloor(space.totalInodes);
      if (!short) shortHandledAt = null;
      else if (shortHandledAt === null || shortHandledAt - space.freeBytes >= 256 * 2 ** 20) {
        shortHandledAt = space.freeBytes;
        log.error({ freeBytes: space.freeBytes, freeInodes: space.freeInodes, awake: awake.length }, 'the data directory\'s filesystem is short of space: freezing every awake runtime to measure them');
        const frozenHere: Entry[] = [];
        for (const e of awake) {
          if (!e.group?.canFreeze) continue;
          await e.group.freeze();
          frozenHere.push(e);
        }
        for (const e of awake) await measureEntry(e, space).catch(() => {});
        for (const e of frozenHere) if (entries.get(e.owner.userId) === e && !e.stopping && e.group) await thaw(e);
        if (!awake.some((e) => overQuota(e.disk.bytes, e.quotaBytes))) log.error('the data directory\'s filesystem is short of space and no runtime is past its quota: add space, or lower the quotas (AGENTWS_WORKSPACE_QUOTA, the tenants\' settings.workspace.quotaMb)');
        return;
      }
      for (const e of awake) {
        if (!scanDue({ now, lastAt: e.disk.at, lastMs: e.disk.ms, freeAtLast: e.disk.freeAt, freeNow: space.freeBytes, quotaBytes: e.quotaBytes ?? Number.MAX_SAFE_INTEGER })) continue;
        await measureEntry(e, space).catch((err) => log.warn({ userId: e.owner.userId, err: (err as Error).message }, 'could not measure a workspace'));
      }
    } finally {
      diskBusy = false;
    }
  }

  /** Idle runtimes stopped, frozen; under memory pressure the least recently used idle ones stopped; the report written. */
  function sweep() {
    const now = Date.now();
    for (const e of [...entries.values()]) watchLimits(e);
    for (const [userId, u] of usage) if (!entries.has(userId) && now - u.changedAt > USAGE_KEEP_MS) usage.delete(userId);
    const swap = swapNow();
    const canPage = !pagingUnavailable(swap);
    for (const e of [...entries.values()]) {
      if (!e.handle || e.running.size > 0 || e.stopping) continue;
      if (now - e.lastUsed > deps.idleMs) void stopEntry(e, 'idle');
      else if (e.group?.canFreeze && !e.group.frozen && deps.freezeAfterMs > 0 && now - e.lastUsed > deps.freezeAfterMs) {
        void e.group.freeze().then(() => log.debug({ userId: e.owner.userId }, 'agent runtime frozen while idle'));
      } else if (canPage && e.group?.frozen && !e.pagedOut && !e.paging && !e.pageOutFailed && now - e.lastUsed > deps.freezeAfterMs + deps.pageOutAfterMs!) {
        void pageOut(e, 'frozen a while');
      }
    }
    const mem = memory();
    const pressure = relief(
      { ...mem, swapFreeBytes: canPage ? swap.freeBytes : 0 },
      [...entries.values()]
        .filter((e) => !e.stopping)
        .map((e) => ({ e, lastUsed: e.lastUsed, idle: !!e.handle && !e.starting && e.running.size === 0, bytes: e.memoryBytes, pagedOut: e.pagedOut || e.pageOutFailed, pagingNow: !!e.paging && !e.pageOutAsk?.cancelled })),
    );
    for (const v of pressure.pageOut) {
      log.warn({ userId: v.e.owner.userId, availableMb: Math.round(mem.availableBytes / 2 ** 20) }, 'the host is short of memory: paging out the least recently used idle runtime');
      void pageOut(v.e, 'memory pressure');
    }
    for (const v of pressure.stop) {
      log.warn({ userId: v.e.owner.userId, availableMb: Math.round(mem.availableBytes / 2 ** 20) }, 'the host is short of memory: stopping the least recently used idle runtime');
      void stopEntry(v.e, 'memory pressure');
    }
    void report(mem).catch((err) => log.warn({ err: (err as Error).message }, 'could not record the runtime host\'s report'));
  }

  function status(mem: HostMemory = memory()): PoolStatus {
    const now = Date.now();
    let runtimesMemoryBytes = 0;
    let swap: SwapInfo | null = null;
    for (const e of entries.values()) {
      // Read every MEMORY_READ_MS only: cheap (/proc/<pid>/status), but one read per process of each runtime.
      if (e.launched && now - e.memoryReadAt > MEMORY_READ_MS) {
        swap ??= swapNow();
        // Resident private memory, and the RAM its pages in a compressed swap take (none for a disk's).
        const swapped = e.group?.usage().swapBytes ?? 0;
        e.memoryBytes = processesAnonKb(e.group?.pids() ?? [e.launched.pid, ...processDescendants(e.launched.pid)]) * 1024 + swapHeldBytes(swapped, swap);
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
      pagedOut: all.filter((e) => e.handle && e.group?.frozen && e.pagedOut).length,
      starting: all.filter((e) => !e.handle).length,
      busy: all.filter((e) => e.running.size > 0).length,
      runtimesMemoryBytes,
      memory: mem,
      freezer: cgroups?.mechanisms().freezer ?? null,
      freezerUnavailable: cgroups?.mechanisms().freezer ? null : (cgroups?.mechanisms().unavailable.freezer ?? cgroupsMissing ?? 'turned off (AGENTWS_RUNTIME_FREEZE_SECONDS=0)'),
      limits: limitsStatus(swap ?? swapNow()),
      disk: space,
      usage: [...usage.values()].map(({ changedAt: _c, ...u }) => u),
    };
  }

  /** Which limits hold here, and why not the others. */
  function limitsStatus(swap: SwapInfo = swapNow()): LimitsStatus {
    const m: CgroupMechanisms | null = cgroups?.mechanisms() ?? null;
    const missing = cgroupsMissing ?? 'this process hosts no runtime';
    const unavailable: Record<string, string> = {};
    const why = (c: 'memory' | 'pids' | 'cpu') => (m ? m.unavailable[c] : missing);
    if (!m?.memory) unavailable.memory = why('memory') ?? 'unavailable';
    if (!m?.pids) unavailable.processes = why('pids') ?? 'unavailable';
    if (!m?.cpu) unavailable.cpu = why('cpu') ?? 'unavailable';
    if (inotifyShort) unavailable.inotify = inotifyShort;
    unavailable.disk = deps.quotaOf
      ? 'measured, not enforced by the kernel: writes past the quota succeed until the next measure (seconds; sooner when the disk runs short), then the runtime is stopped and new turns are refused'
      : 'no workspace quota (AGENTWS_WORKSPACE_QUOTA=off)';
    const noPaging = pagingUnavailable(swap);
    if (noPaging) unavailable.paging = noPaging;
    return {
      memory: m?.memory ?? null,
      memoryMaxBytes: m?.memory ? (deps.limits?.memoryMaxBytes ?? null) : null,
      processes: m?.pids ?? null,
      processesMax: m?.pids ? (deps.limits?.pidsMax ?? null) : null,
      cpu: m?.cpu ?? null,
      tmpBytes: deps.sandboxed ? (deps.limits?.tmpBytes ?? null) : null,
      disk: deps.quotaOf ? 'measured' : null,
      paging: noPaging ? null : (m?.memory ?? null),
      pageOutAfterMs: noPaging ? null : deps.pageOutAfterMs!,
      swap: { totalBytes: swap.totalBytes, freeBytes: swap.freeBytes, compressedStoredBytes: swap.zram?.storedBytes ?? null, compressedUsedBytes: swap.zram?.usedBytes ?? null },
      unavailable,
    };
  }

  /** Writes the host's report when something changed, or every REPORT_MS. */
  async function report(mem: HostMemory): Promise<void> {
    if (!hosting || refusal) return;
    const s = status(mem);
    const key = JSON.stringify([s.resident, s.frozen, s.pagedOut, s.starting, s.busy, Math.round(s.runtimesMemoryBytes / 2 ** 24), Math.round(s.memory.availableBytes / 2 ** 26)]);
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
        state: !e.handle ? ('starting' as const) : e.group?.frozen ? (e.pagedOut ? ('paged-out' as const) : ('frozen' as const)) : ('ready' as const),
        running: e.running.size,
        idleMs: Date.now() - e.lastUsed,
      }));
    },

    /** Capacity, what is resident and in which state, and the memory it holds. */
    status,

    /** Which limits hold the runtimes here, and why not the others (cheap: no figures read). */
    limits: limitsStatus,

    /**
     * Starts hosting: forgets records of runtimes no host runs any more, sweeps idle runtimes. With
     * `refuse`, it hosts no runtime: every request for one fails with that reason (fail closed).
     */
    async start(refuse?: { problem: string; hint?: string }): Promise<void> {
      if (hosting) return;
      hosting = true;
      refusal = refuse ?? null;
      await records.hostStarting(host);
      if (!refuse) {
        const mem = memory();
        const open =
          deps.openCgroups ??
          (() =>
            openRuntimeCgroups(log, {
              // The memory controller also pages idle runtimes out, with no limit set.
              want: { freezer: deps.freezeAfterMs > 0, memory: !!deps.limits?.memoryMaxBytes || !!deps.pageOutAfterMs, pids: !!deps.limits?.pidsMax, cpu: true },
              paging: !!deps.pageOutAfterMs && deps.freezeAfterMs > 0,
              offWhy: { freezer: 'turned off (AGENTWS_RUNTIME_FREEZE_SECONDS=0)', memory: 'turned off (AGENTWS_RUNTIME_MEMORY_MAX=off)', pids: 'turned off (AGENTWS_RUNTIME_PIDS_MAX=off)' },
              total: { memoryBytes: runtimesMemoryTotal(mem.totalBytes), pids: runtimesPidsTotal(readInt('/proc/sys/kernel/pid_max', 32768), readInt('/proc/sys/kernel/threads-max', 32768)) },
            }));
        inotifyShort = raiseInotifyLimit(deps.max, log, deps.inotifyLimitFile);
        try {
          cgroups = open();
          if (!cgroups) cgroupsMissing = 'no cgroups (turned off)';
        } catch (err) {
          cgroupsMissing = `cannot open cgroups: ${(err as Error).message}`;
          log.warn({ err: cgroupsMissing }, 'runtimes run without cgroup limits');
        }
        // A killed tool is told while its turn runs: the OOM counters of runtimes running a turn or used in
        // the last seconds (a runner hears of a turn's status a moment late) are read every second.
        limitWatcher = setInterval(() => {
          const now = Date.now();
          for (const e of entries.values()) if (e.running.size > 0 || now - e.lastUsed < 10_000) watchLimits(e, true);
        }, LIMIT_WATCH_MS);
        limitWatcher.unref();
        if (deps.quotaOf) {
          diskWatcher = setInterval(() => void watchDisk().catch((err) => log.warn({ err: (err as Error).message }, 'the disk watch failed')), deps.diskWatchMs ?? DISK_WATCH_MS);
          diskWatcher.unref();
          space = readSpace(spaceDir());
        }
      } else cgroupsMissing = refuse.problem;
      const every = deps.sweepMs ?? Math.max(250, Math.min(SWEEP_MS, deps.idleMs / 2, deps.freezeAfterMs > 0 ? deps.freezeAfterMs / 2 : SWEEP_MS, deps.pageOutAfterMs ? deps.pageOutAfterMs / 2 : SWEEP_MS));
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
      if (diskWatcher) clearInterval(diskWatcher);
      diskWatcher = null;
      if (limitWatcher) clearInterval(limitWatcher);
      limitWatcher = null;
      await Promise.all([...entries.values()].map((e) => stopEntry(e, 'shutdown')));
      if (hosting) await records.hostStopped(host).catch(() => {});
      cgroups?.close();
      cgroups = null;
      hosting = false;
    },
  };
}

/**
 * Raises the host's fs.inotify.max_user_instances to what `capacity` runtimes want when it is lower and
 * this process may (root): past the limit a runtime's opencode cannot watch its workspace and its turn
 * hangs before the model is asked (seen at the 65th runtime, with 128). Returns why it stays short, or null.
 */
function raiseInotifyLimit(capacity: number, log: Logger, file: string | null = '/proc/sys/fs/inotify/max_user_instances'): string | null {
  if (!file) return null;
  const wanted = inotifyInstancesWanted(capacity);
  let now: number;
  try {
    now = Number(readFileSync(file, 'utf8').trim());
  } catch {
    return null;
  }
  if (!Number.isFinite(now) || now >= wanted) return null;
  try {
    writeFileSync(file, String(wanted));
    log.info({ from: now, to: wanted, capacity }, 'raised fs.inotify.max_user_instances for the runtimes (counted per user on the host; each runtime and its tools want some)');
    return null;
  } catch (err) {
    const why = `fs.inotify.max_user_instances is ${now}, under the ${wanted} that ${capacity} runtimes want (${(err as NodeJS.ErrnoException).code ?? 'not writable'}): past it a runtime cannot start its turns. As root: sysctl -w fs.inotify.max_user_instances=${wanted}, and in /etc/sysctl.d to keep it`;
    log.warn({ now, wanted }, why);
    return why;
  }
}
