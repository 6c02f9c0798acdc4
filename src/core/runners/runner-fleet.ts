import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { join, relative } from 'node:path';
import type { EventBus } from '../../kernel/events.js';
import { AppError, UnavailableError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RemoteRuntimes } from '../runtime/runtime-pool.js';
import { RuntimeBusyError, type AgentIdentity, type RuntimeOwner, type RuntimeSelf, type ToolCallOrigin } from '../runtime/host/runtime-host.js';
import { SANDBOX_PATHS } from '../runtime/host/sandbox.js';
import { setTunnelDialer, type RuntimeHandle } from '../runtime/host/runtime-transport.js';
import { createRunnerLinks, type RunnerNotice } from '../runtime/host/runner-links.js';
import { controlProof, RUNNER_HEADERS, RUNNER_PATHS, RUNNER_PROTOCOL, type RunnerInfo } from '../runtime/host/runner-protocol.js';
import { createListeners } from '../../lib/listeners.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { sendJson } from '../../lib/send-json.js';
import { parseLimitNotice, type LimitNotice } from '../runtime/host/runtime-limits-fns.js';
import { runnerTimings } from './runner-fns.js';

/**
 * The control plane's side of its runner hosts: takes their channels (runner-links.ts), places users'
 * runtimes on them (the placement and its lease fence live in PostgreSQL: runners.service.ts), starts and
 * reaches runtimes there for the pool (RemoteRuntimes), and answers what runners ask on behalf of their
 * runtimes: model calls and memory tools (relayed to this process's gateway, where keys and usage
 * records live), egress rules, runtimes started and stopped. Every such request names the user and the
 * lease fence, and is refused unless the runner holds that user's lease now: a runner declared lost that
 * comes back cannot act for a user placed elsewhere since.
 */
const AUTH_CACHE_MS = 5000;
const NONE_RUNNING: ReadonlySet<string> = new Set();
const PLACEMENT_CACHE_MS = 3000;
/** A drain moves a user whose runtime has done nothing for this long (not one about to take a prompt). */
const DRAIN_QUIET_MS = 5000;
/** Cheap (one indexed update): often, so a lost runner's users wait at most the timeout and this long. */
const LOST_SWEEP_MS = 1000;

interface SyncAnswer {
  capacity: number;
  resident: number;
  busy: number;
  users: Array<{ userId: string; state: string; running: number; idleMs: number }>;
  /** Users whose files the runner has but does not hold, with the copy each is (now and then; runner-agent.ts). */
  copies?: Array<{ userId: string; tenantId: string | null; filesFence: number | null }>;
}
const ANY_REMOTE_CACHE_MS = 5000;
/** The tenant's shared files (promoted skills) sent with a start: at most this much. */
const MAX_SHARED_BYTES = 8 * 1024 * 1024;
/** Published when a runner token is revoked: processes holding its runners' channels cut them. */
export const RUNNER_REVOKED_CHANNEL = 'runner.revoked';

export interface Placement {
  runnerId: string;
  fence: number;
  tenantId: string;
  userId: string;
}

/** What a runtime's placement says of the user's files: which copy is current, and whether a drain just moved them. */
interface PlacedFiles {
  filesFence: number;
  movedIntact: boolean;
}

/** What the fleet needs of the runner registry (runners.service.ts). */
interface RunnerRegistry {
  authenticate(token: string): Promise<{ tokenId: string; tokenHash: string }>;
  register(tokenId: string, info: RunnerInfo & { serveId: string; relayUrl: string | null }): Promise<{ id: string; name: string }>;
  /** The runner of this name registered with this token; null: none (or another token's). */
  runnerOf(tokenId: string, name: string): Promise<{ id: string; kind: 'local' | 'remote' } | null>;
  /** Records the runner's figures (its capacity capped at its token's ceiling); answers its state (a drained runner's users are moved). */
  heartbeat(runnerId: string, figures: { resident: number; busy: number; capacity: number }): Promise<{ state: string; sharedStorage: boolean }>;
  /** Runners whose heartbeat stopped, newly marked lost (each returned to exactly one caller). */
  markLost(): Promise<Array<{ id: string; name: string; lostAt: Date; users: RuntimeOwner[] }>>;
  /** Where a drain would move the user off `from` now, without moving them; null: no other runner has room. */
  moveTarget(owner: RuntimeOwner, from: string): Promise<{ runnerId: string; storage: 'local' | 'shared' } | null>;
  /** A fence taken now for a move to come (the drain's copy is marked with it). */
  reserveFence(): Promise<number>;
  /**
   * Places the user on `to`, off `from` (a drain), under `fence`; null: `to` has no room now, or they left
   * `from` (or their lease is no longer `expectFence`).
   */
  move(owner: RuntimeOwner, from: string, to: string, o: { fence: number; expectFence: number }): Promise<(Placement & { storage: 'local' | 'shared' }) | null>;
  /** Whether a drain moved the user intact under this fence and they were not told yet (true once). */
  takeMovedIntact(userId: string, fence: number): Promise<boolean>;
  /** Of the copies a runner reports, those of users placed elsewhere since, with the copy current now. */
  staleCopies(runnerId: string, copies: Array<{ userId: string; filesFence: number | null }>): Promise<Array<{ userId: string; tenantId: string; filesFence: number }>>;
  /** A runner set a user's files aside (the operator is told: audit). */
  copySetAside(runnerId: string, owner: RuntimeOwner, where: string, why: string): Promise<void>;
  disconnected(runnerId: string, serveId: string): Promise<void>;
  /** Places the user (sticky while the runner is healthy), returning the runner, the lease's fence and which copy of their files is current. */
  place(owner: RuntimeOwner): Promise<Placement & PlacedFiles & { kind: 'local' | 'remote' }>;
  /** The user's tenant if the runner holds the user's lease under this fence now; null otherwise. */
  holds(runnerId: string, userId: string, fence: number): Promise<{ tenantId: string } | null>;
  placementsOf(runnerId: string): Promise<Array<{ userId: string; fence: number; storage: 'local' | 'shared' }>>;
  relayUrlOf(runnerId: string): Promise<string | null>;
  /** Whether any remote runner is registered (without one, placement is skipped entirely). */
  anyRemote(): Promise<boolean>;
}

export interface RunnerFleetDeps {
  registry: RunnerRegistry;
  bus: EventBus;
  log: Logger;
  relayKey: string;
  /** This process (its id in runners.serve_id). */
  serveId: string;
  /**
   * How long without a heartbeat before a runner is lost (AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS, 30 s by
   * default). Its runners are synced every sixth of it (5 s), and told to stop their runtimes after two
   * thirds of it without a sync (20 s): the same margins whatever the timeout.
   */
  heartbeatTimeoutMs?: number;
  /** The id of this serve's own local runner, when it hosts runtimes itself (null: it does not). */
  localRunnerId: () => string | null;
  /** Whether this control plane hosts runtimes itself; when not, every runtime is placed on a runner. */
  localRunner: boolean;
  /** Records a runtime a runner started (agent_runtimes) and writes its configuration through the channel. */
  started(owner: RuntimeOwner, runnerId: string, runtime: { pid: number; authorization: string }): Promise<void>;
  /** `sentBefore`: only turns sent before then were on that runtime (see runtimeLost). */
  stopped(owner: RuntimeOwner, runnerId: string, pid: number, o?: { why?: string | null; idle?: boolean; sentBefore?: Date }): Promise<void>;
  /** Whether the user's runtime is recorded as running on this runner. */
  runningOn(owner: RuntimeOwner, runnerId: string): Promise<boolean>;
  /** The gateway host (model calls, memory tools), as the proxy on this host would call it. */
  gateway(identity: AgentIdentity, req: IncomingMessage, res: ServerResponse, url: URL): void;
  /** Which session and message of the user's runtime on a runner a tool call came from (runtime-pool.ts). */
  toolCallOrigin(owner: RuntimeOwner, call: { tool: string; input: Record<string, unknown> }): Promise<ToolCallOrigin | null>;
  /** The runtime's gateway credential, derived as for local runtimes from its API authorization. */
  credentialOf(owner: RuntimeOwner): Promise<string | null>;
  egressRules(tenantId: string): Promise<{ rules: unknown; privateAllow: string; ports: number[] }>;
  refused(identity: RuntimeOwner, target: { host: string; port: number; reason: string }): void;
  /** Where the tenant's shared files are on the control plane. */
  tenantDir(tenantId: string): string;
  /**
   * A runtime's runner was lost: the turn it ran, if any, ends with a clear error (turn-runner.ts). Only
   * turns sent before `sentBefore`: once the runner is marked lost the person's next turn is placed on
   * another runner at once, and may be in flight there before the sweep reaches them.
   */
  runtimeLost(owner: RuntimeOwner, reason: string, o?: { sentBefore?: Date }): Promise<void>;
  /** A person's workspace quota (bytes; null: none), sent with each start (runtime-limits.ts). */
  quotaOf?(owner: RuntimeOwner): Promise<number | null>;
  /** A runtime on a runner met one of its limits (the runner's notice, for a user it holds). */
  limit?(owner: RuntimeOwner, notice: LimitNotice): Promise<void>;
  /** What a runner's sync said of its runtimes' limits and usage (`placed`: the users it holds now). */
  limitsReport?(runner: { id: string; name: string }, placed: ReadonlySet<string>, answer: unknown): Promise<void>;
}

export function createRunnerFleet(deps: RunnerFleetDeps) {
  const { registry, log } = deps;
  const { heartbeatMs, leaseMs } = runnerTimings(deps.heartbeatTimeoutMs);
  let relayUrl: string | null = null;
  const auth = createPromiseCache<{ id: string } | null>({ ttlMs: AUTH_CACHE_MS });
  const placements = createPromiseCache<Placement & PlacedFiles & { kind: 'local' | 'remote' }>({ ttlMs: PLACEMENT_CACHE_MS, max: 50_000 });
  let anyRemote: { at: number; value: Promise<boolean> } | null = null;
  const heartbeats = new Map<string, NodeJS.Timeout>();
  let offRevoked: (() => Promise<void>) | null = null;
  const draining = new Set<string>();
  /** The token each runner connected here used (a revocation cuts its channels). */
  const tokenOf = new Map<string, string>();
  let lostSweeper: NodeJS.Timeout | null = null;
  /** Who follows runtimes on runners whose channel this process holds becoming ready or going (the pool: session streams follow them). */
  const changes = createListeners<[owner: RuntimeOwner, handle: RuntimeHandle | null]>((err) => log.error({ err: err.message }, 'runner runtime listener failed'));
  const changed = changes.notify;
  /** Runtime sessions with a turn running, of users whose runtime is on a runner (what this process was told: remote.setRunning). */
  const running = new Map<string, Set<string>>();
  /** What the gateway host may ask of the user's runtime on a runner (runtime-host.ts RuntimeSelf). */
  const selfOf = (owner: RuntimeOwner): RuntimeSelf => ({
    runningSessions: () => running.get(owner.userId) ?? NONE_RUNNING,
    toolCallOrigin: (call) => deps.toolCallOrigin(owner, call),
  });

  /** Each runner's notices, handled one after another (a ready then a stopped must not swap while their leases are checked). */
  const noticeQueues = new Map<string, Promise<void>>();

  /**
   * A runner's notice counts only for a user it holds under the fence it names, now, and for the tenant
   * of that placement (never the one it names): a runner cannot swap another user's event stream for one
   * of its own (injected text, permission prompts, turn ends) or cut it.
   */
  async function onNotice(runnerId: string, n: RunnerNotice): Promise<void> {
    if (!n || (n.type !== 'ready' && n.type !== 'stopped') || typeof n.userId !== 'string' || !Number.isFinite(Number(n.fence))) return;
    const held = await registry.holds(runnerId, n.userId, Number(n.fence));
    if (!held) {
      log.warn({ runner: links.local(runnerId)?.name ?? runnerId, userId: n.userId, notice: n.type }, 'a runner\'s notice for a user it does not hold (under that fence) was ignored');
      return;
    }
    const owner = { tenantId: held.tenantId, userId: n.userId };
    if (n.type === 'ready') {
      if (typeof n.authorization !== 'string') return;
      changed(owner, { endpoint: { tunnel: { runnerId, userId: n.userId }, authorization: n.authorization }, directory: typeof n.directory === 'string' && n.directory ? n.directory : SANDBOX_PATHS.workspace });
    } else {
      running.delete(n.userId);
      changed(owner, null);
    }
  }

  const links = createRunnerLinks({
    log,
    relayKey: deps.relayKey,
    relayUrlOf: (id) => registry.relayUrlOf(id),
    onNotice: (runnerId, n: RunnerNotice) => {
      const next = (noticeQueues.get(runnerId) ?? Promise.resolve())
        .then(() => onNotice(runnerId, n))
        .catch((err) => log.warn({ err: (err as Error).message }, 'a runner notice could not be handled'));
      noticeQueues.set(runnerId, next);
      void next.finally(() => {
        if (noticeQueues.get(runnerId) === next) noticeQueues.delete(runnerId);
      });
    },
    onClosed: (runnerId, link) => {
      clearInterval(heartbeats.get(runnerId));
      heartbeats.delete(runnerId);
      log.warn({ runner: link.name }, 'a runner\'s channel closed');
      void registry.disconnected(runnerId, deps.serveId).catch(() => {});
    },
  });
  setTunnelDialer((tunnel, req) => links.request(tunnel.runnerId, { ...req, path: `/rt/${encodeURIComponent(tunnel.userId)}${req.path}` }));

  /** The runner a request of a runner comes from: its token, and a runner of that name registered with it. */
  async function runnerOfRequest(req: IncomingMessage): Promise<{ id: string } | null> {
    const token = req.headers[RUNNER_HEADERS.token];
    const name = req.headers[RUNNER_HEADERS.runner];
    if (typeof token !== 'string' || typeof name !== 'string') return null;
    const key = `${createHash('sha256').update(token).digest('hex')}:${name}`;
    return auth.get(key, () =>
      registry.authenticate(token).then(
        (t) => registry.runnerOf(t.tokenId, name),
        () => null,
      ),
    );
  }

  /** The user and lease a runner request acts for, if the runner holds that lease now. */
  async function leaseOf(runnerId: string, req: IncomingMessage): Promise<RuntimeOwner | null> {
    const userId = req.headers[RUNNER_HEADERS.user];
    const fence = Number(req.headers[RUNNER_HEADERS.fence]);
    if (typeof userId !== 'string' || !Number.isFinite(fence)) return null;
    // The tenant is the placement's, never what the runner says.
    const held = await registry.holds(runnerId, userId, fence);
    return held ? { tenantId: held.tenantId, userId } : null;
  }

  const readJson = async (req: IncomingMessage): Promise<any> => {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > 1024 * 1024) throw new Error('body too large');
      chunks.push(c as Buffer);
    }
    return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
  };

  function sharedFiles(tenantId: string): Array<{ path: string; content: string }> {
    const root = deps.tenantDir(tenantId);
    const out: Array<{ path: string; content: string }> = [];
    let total = 0;
    const walk = (dir: string) => {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        return;
      }
      for (const n of names) {
        const p = join(dir, n);
        const st = statSync(p, { throwIfNoEntry: false });
        if (!st) continue;
        if (st.isDirectory()) walk(p);
        else if (st.isFile() && (total += st.size) <= MAX_SHARED_BYTES) out.push({ path: relative(root, p), content: readFileSync(p).toString('base64') });
      }
    };
    walk(root);
    return out;
  }

  /**
   * Sends the runner the leases it holds (it stops runtimes it no longer holds) and records its figures
   * (its runtimes' limits and usage among them); when it reports the users whose files it has (a runner
   * back from being lost or frozen does at once), those placed elsewhere since are set aside there (never
   * used silently; the operator is told).
   */
  async function sync(runnerId: string, name = runnerId): Promise<void> {
    const placed = await registry.placementsOf(runnerId);
    const s = await links.call<SyncAnswer>(runnerId, 'POST', '/sync', { placements: placed, leaseMs }, 10_000);
    const { state, sharedStorage } = await registry.heartbeat(runnerId, { resident: Number(s?.resident), busy: Number(s?.busy), capacity: Number(s?.capacity) });
    await deps.limitsReport?.({ id: runnerId, name }, new Set(placed.map((p) => p.userId)), s).catch((err) => log.warn({ runner: name, err: (err as Error).message }, 'could not record a runner\'s limits'));
    if (Array.isArray(s?.copies) && s.copies.length) await setAsideStale(runnerId, s.copies);
    if (state === 'draining' && !draining.has(runnerId)) {
      draining.add(runnerId);
      void drainStep(runnerId, placed, s, sharedStorage).finally(() => draining.delete(runnerId));
    }
  }

  /** The runner's copies of users placed elsewhere since go aside there (recovered/), each audited. */
  async function setAsideStale(runnerId: string, copies: NonNullable<SyncAnswer['copies']>): Promise<void> {
    const stale = await registry.staleCopies(runnerId, copies.map((c) => ({ userId: String(c?.userId), filesFence: typeof c?.filesFence === 'number' ? c.filesFence : null })));
    if (!stale.length) return;
    const r = await links.call<{ setAside?: Array<{ tenantId: string; userId: string; where: string }> }>(runnerId, 'POST', '/set-aside', { users: stale }, 60_000);
    const asked = new Map(stale.map((x) => [x.userId, x]));
    for (const done of Array.isArray(r?.setAside) ? r.setAside : []) {
      const u = asked.get(String(done?.userId));
      // The tenant is the placement's, never the runner's word.
      if (u) await registry.copySetAside(runnerId, { tenantId: u.tenantId, userId: u.userId }, String(done.where), 'placed on another runner since this copy was current');
    }
  }

  /**
   * One pass of a drain: every user placed on the runner whose runtime is not running a turn (and was not
   * used in the last few seconds) moves to another runner: their runtime stops here, their files are
   * copied when storage is local, and only then does their placement move (a new fence: the old runner no
   * longer holds them). Moving it first would send a prompt arriving during the copy to a runner without
   * their files, and a copy that failed would leave them placed where their files are not, with no later
   * pass to copy them (the user is no longer on this runner). Users with a turn running are moved by a
   * later pass, once it ends.
   */
  async function drainStep(runnerId: string, placed: Array<{ userId: string; fence: number; storage: 'local' | 'shared' }>, s: SyncAnswer, sharedHere: boolean): Promise<void> {
    const live = new Map((Array.isArray(s?.users) ? s.users : []).map((u) => [u.userId, u]));
    for (const p of placed) {
      const u = live.get(p.userId);
      if (u && (u.running > 0 || u.idleMs < DRAIN_QUIET_MS || u.state === 'starting')) continue;
      const owner = await registry.holds(runnerId, p.userId, p.fence);
      if (!owner) continue;
      const who = { tenantId: owner.tenantId, userId: p.userId };
      try {
        // Also when no runtime runs (it stopped idle): the runner forgets the lease, so its files can go once moved.
        await links.call(runnerId, 'POST', '/stop', { userId: p.userId }, 30_000);
        const to = await registry.moveTarget(who, runnerId);
        if (!to) {
          log.warn({ userId: p.userId }, 'drain: no other runner has room for this user now');
          continue;
        }
        // Both runners mount the shared storage: the files are already where the new one looks.
        const copied = !(sharedHere && p.storage === 'shared' && to.storage === 'shared');
        // The placement's next fence, taken now: the copy on the new runner is marked with it, so it is the
        // current copy exactly when the move below commits (and, if it does not, a copy nobody uses).
        const fence = await registry.reserveFence();
        const q = `?tenantId=${encodeURIComponent(who.tenantId)}&userId=${encodeURIComponent(who.userId)}`;
        if (copied) {
          const files = await links.request(runnerId, { method: 'GET', path: `/export${q}`, headers: {}, timeoutMs: 0 });
          if (files.statusCode !== 200) throw new Error(`export answered ${files.statusCode}`);
          const imported = await links.request(to.runnerId, { method: 'POST', path: `/import${q}&filesFence=${fence}`, headers: { 'content-type': 'application/x-tar' }, bodyStream: files });
          const answer = await readSmall(imported);
          if (imported.statusCode !== 200) throw new Error(`import answered ${imported.statusCode}: ${answer.slice(0, 300)}`);
        }
        if (!(await registry.move(who, runnerId, to.runnerId, { fence, expectFence: p.fence }))) {
          log.warn({ userId: p.userId }, 'drain: the runner chosen for this user has no room any more, or the user was placed again (retried at the next pass)');
          continue;
        }
        placements.delete(p.userId);
        log.info({ userId: p.userId, to: to.runnerId }, 'drain: user moved to another runner');
        // The copy is confirmed where the user now is: the one here goes, so a later failure of that runner
        // can never bring it back (it would be older). If this fails, the runner sets it aside itself when
        // it next reports its copies (sync), and a runtime never starts on it (its marker is not current).
        if (copied) {
          await links
            .call(runnerId, 'POST', '/discard', { tenantId: who.tenantId, userId: who.userId }, 60_000)
            .catch((err) => log.warn({ userId: p.userId, err: (err as Error).message }, 'drain: could not remove the moved user\'s files from the runner they left'));
        }
      } catch (err) {
        log.error({ userId: p.userId, err: (err as Error).message }, 'drain: could not move a user (retried at the next pass)');
      }
    }
  }

  /** Runners that stopped answering: their users' turns end with an error, their runtimes are forgotten. */
  async function sweepLost(): Promise<void> {
    for (const r of await registry.markLost()) {
      log.error({ runner: r.name, users: r.users.length }, 'runner lost (no heartbeat): its users are placed elsewhere at their next turn');
      for (const owner of r.users) {
        placements.delete(owner.userId);
        await deps.runtimeLost(owner, `its runner host "${r.name}" stopped answering`, { sentBefore: r.lostAt }).catch((err) => log.error({ err: (err as Error).message }, 'could not end a lost turn'));
        await deps.stopped(owner, r.id, -1, { sentBefore: r.lostAt }).catch(() => {});
      }
    }
  }

  const remote: RemoteRuntimes = {
    async acquire(runnerId, owner, onStarting, onMoved) {
      const p = await placementOf(owner);
      // Said only when the runtime is not running there already (a cold start: the stream says why it waits).
      if (!(await deps.runningOn(owner, runnerId))) onStarting?.();
      let r: { pid: number; authorization: string; directory: string; setAside?: string };
      const diskQuotaBytes = (await deps.quotaOf?.(owner)) ?? null;
      try {
        r = await links.call(runnerId, 'POST', '/acquire', { tenantId: owner.tenantId, userId: owner.userId, fence: p.fence, filesFence: p.filesFence, files: sharedFiles(owner.tenantId), diskQuotaBytes }, 120_000);
      } catch (err) {
        const e = err as Error & { status?: number; code?: string };
        if (e.code === 'runtime_busy') throw new RuntimeBusyError(0, 'capacity');
        // The runner is not reachable now (restarting, cut off, or dead and about to be declared lost, when
        // its users are placed elsewhere): the turn waits in the queue rather than failing.
        if (!e.status || e.status === 503) {
          placements.delete(owner.userId);
          throw new RuntimeBusyError(0, 'runners');
        }
        // The placement is re-read at the next try: a runner that went away is replaced then.
        placements.delete(owner.userId);
        if (e instanceof AppError) throw e;
        throw new UnavailableError(`the agent's runner did not start the runtime: ${e.message}`, { code: 'runtime_unavailable', hint: 'The turn is retried; `npx aws runner list` shows the runners and their state.' });
      }
      if (typeof r?.setAside === 'string') {
        await registry.copySetAside(runnerId, owner, r.setAside, 'not the user\'s current copy when their runtime started there').catch((err) => log.error({ err: (err as Error).message }, 'could not audit a copy set aside'));
      }
      // A drain moved the user with their files: the one caller that says so on a stream tells them, once.
      if (onMoved && p.movedIntact && p.runnerId === runnerId && (await registry.takeMovedIntact(owner.userId, p.fence))) {
        placements.delete(owner.userId);
        onMoved({ workspace: 'moved' });
      }
      return { endpoint: { tunnel: { runnerId, userId: owner.userId }, authorization: String(r?.authorization ?? '') }, directory: typeof r?.directory === 'string' && r.directory ? r.directory : SANDBOX_PATHS.workspace };
    },
    setRunning(userId, sessionId, isRunning) {
      const set = running.get(userId) ?? new Set<string>();
      if (isRunning) set.add(sessionId);
      else set.delete(sessionId);
      if (set.size) running.set(userId, set);
      else running.delete(userId);
      const p = placements.peek(userId);
      if (!p) return;
      void p
        .then((x) => (x.kind === 'remote' ? links.call(x.runnerId, 'POST', '/running', { userId, sessionId, running: isRunning }, 10_000) : null))
        .catch((err) => log.debug({ err: (err as Error).message }, 'could not tell a runner a turn is running'));
    },
    onChange: (listener) => changes.add(listener),
    async stopUser(userId) {
      const p = placements.peek(userId);
      const x = p ? await p.catch(() => null) : null;
      if (x?.kind === 'remote') await links.call(x.runnerId, 'POST', '/stop', { userId }, 30_000).catch(() => {});
    },
  };

  function placementOf(owner: RuntimeOwner) {
    return placements.get(owner.userId, () => registry.place(owner));
  }

  /** At most 64 KiB of a runner's answer, as text (an error's message). */
  async function readSmall(res: AsyncIterable<unknown> & { destroy(): void }): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res) {
      size += (c as Buffer).length;
      if (size > 64 * 1024) {
        res.destroy();
        break;
      }
      chunks.push(c as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  return {
    remote,
    links,

    /** The runner the user's runtime is placed on; null: this serve's own runtimes (no remote runner, or placed here). */
    async placement(owner: RuntimeOwner): Promise<string | null> {
      if (!anyRemote || Date.now() - anyRemote.at > ANY_REMOTE_CACHE_MS) anyRemote = { at: Date.now(), value: registry.anyRemote().catch(() => false) };
      if (deps.localRunner && !(await anyRemote.value)) return null;
      let p: Awaited<ReturnType<typeof placementOf>>;
      try {
        p = await placementOf(owner);
      } catch (err) {
        // No runner with room: the turn waits in the queue (it is not the turn's fault).
        if ((err as AppError).code === 'runner_unavailable') throw new RuntimeBusyError(0, 'runners');
        throw err;
      }
      return p.kind === 'local' && p.runnerId === deps.localRunnerId() ? null : p.runnerId;
    },

    /** Where other control-plane processes reach this one's runner channels. */
    setRelayUrl(url: string | null): void {
      relayUrl = url;
    },

    async start(): Promise<void> {
      lostSweeper = setInterval(() => void sweepLost().catch((err) => log.warn({ err: (err as Error).message }, 'could not check runners\' heartbeats')), LOST_SWEEP_MS);
      lostSweeper.unref();
      offRevoked = await deps.bus.subscribe(RUNNER_REVOKED_CHANNEL, (p) => {
        // A revoked token: its runners' channels close now, and every request is authenticated again.
        auth.clear();
        const tokenId = (p as { tokenId?: string })?.tokenId;
        for (const l of links.connected()) {
          if (tokenOf.get(l.runnerId) === tokenId) {
            log.warn({ runner: l.name }, 'runner token revoked: closing its channel');
            l.session.destroy();
          }
        }
      });
    },

    /** A runner's `GET /runner/v1/connect` with `Upgrade: agentws-runner/1`. */
    async accept(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
      const refuse = (status: number, message: string) => {
        socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 409 ? 'Conflict' : 'Bad Request'}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ error: 'runner_refused', message })}`);
      };
      socket.on('error', () => {});
      if (String(req.headers.upgrade ?? '').toLowerCase() !== RUNNER_PROTOCOL) return refuse(400, `upgrade to ${RUNNER_PROTOCOL}`);
      const token = req.headers[RUNNER_HEADERS.token];
      const nonce = req.headers[RUNNER_HEADERS.nonce];
      let info: RunnerInfo;
      try {
        info = JSON.parse(Buffer.from(String(req.headers[RUNNER_HEADERS.info] ?? ''), 'base64url').toString('utf8')) as RunnerInfo;
        if (!info?.name || typeof info.capacity !== 'number') throw new Error('name and capacity are required');
      } catch (err) {
        return refuse(400, `the runner's description is not valid: ${(err as Error).message}`);
      }
      if (typeof token !== 'string' || typeof nonce !== 'string' || nonce.length < 16) return refuse(401, 'a runner token and a nonce are required');
      let tokenId: string;
      let tokenHash: string;
      try {
        ({ tokenId, tokenHash } = await registry.authenticate(token));
      } catch {
        log.warn({ runner: info.name, from: socket.remoteAddress }, 'a runner presented an unknown or revoked token');
        return refuse(401, 'this runner token is unknown or revoked');
      }
      let runner: { id: string; name: string };
      try {
        runner = await registry.register(tokenId, { ...info, address: info.address ?? socket.remoteAddress ?? null, serveId: deps.serveId, relayUrl });
      } catch (err) {
        return refuse(409, (err as Error).message);
      }
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${RUNNER_PROTOCOL}\r\n${RUNNER_HEADERS.proof}: ${controlProof(tokenHash, nonce)}\r\n\r\n`);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 10_000);
      tokenOf.set(runner.id, tokenId);
      links.attach(runner.id, runner.name, socket, head);
      log.info({ runner: runner.name, address: info.address ?? socket.remoteAddress, capacity: info.capacity }, 'runner connected');
      const beat = () =>
        sync(runner.id, runner.name).catch((err) => {
          if (links.local(runner.id)) log.warn({ runner: runner.name, err: (err as Error).message }, 'runner heartbeat failed');
        });
      void beat();
      const timer = setInterval(beat, heartbeatMs);
      timer.unref();
      clearInterval(heartbeats.get(runner.id));
      heartbeats.set(runner.id, timer);
    },

    /** The `/runner/...` requests: a runner's (token) or another control-plane process's relay (relay key). */
    handle(req: IncomingMessage, res: ServerResponse): void {
      const url = new URL(req.url ?? '/', 'http://control');
      if (url.pathname.startsWith(RUNNER_PATHS.relay)) return links.serveRelay(req, res);
      void (async () => {
        const runner = await runnerOfRequest(req);
        if (!runner) {
          req.resume();
          return sendJson(res, 401, { error: 'unauthorized', message: 'unknown or revoked runner token' });
        }
        const owner = await leaseOf(runner.id, req);
        if (!owner) {
          req.resume();
          return sendJson(res, 403, { error: 'not_placed', message: 'this runner does not hold that user\'s lease' });
        }
        // The rules of the tenant of a user placed on this runner, and only those.
        if (url.pathname === RUNNER_PATHS.egress && req.method === 'GET') return sendJson(res, 200, await deps.egressRules(owner.tenantId));
        if (url.pathname.startsWith(`${RUNNER_PATHS.gateway}/`)) {
          const credential = await deps.credentialOf(owner);
          if (!credential) {
            req.resume();
            return sendJson(res, 401, { error: { message: 'agentws: the runtime is not recorded as running' } });
          }
          return deps.gateway({ ...owner, credential, self: selfOf(owner) }, req, res, new URL(url.pathname.slice(RUNNER_PATHS.gateway.length) + url.search, 'http://gateway'));
        }
        if (req.method !== 'POST') return sendJson(res, 404, { error: 'not_found' });
        const body = await readJson(req);
        if (url.pathname === RUNNER_PATHS.started) {
          await deps.started(owner, runner.id, { pid: Number(body.pid), authorization: String(body.authorization) });
          return sendJson(res, 204);
        }
        if (url.pathname === RUNNER_PATHS.stopped) {
          await deps.stopped(owner, runner.id, Number(body.pid), { why: typeof body.why === 'string' ? body.why.slice(0, 200) : null, idle: body.idle === true });
          return sendJson(res, 204);
        }
        if (url.pathname === RUNNER_PATHS.limit) {
          // Figures only, checked here; the person's message is written by the control plane.
          const notice = parseLimitNotice(body);
          if (!notice) return sendJson(res, 400, { error: 'validation_failed', message: 'not a limit notice' });
          await deps.limit?.(owner, notice);
          return sendJson(res, 204);
        }
        if (url.pathname === RUNNER_PATHS.refused) {
          deps.refused(owner, { host: String(body.host), port: Number(body.port), reason: String(body.reason) });
          return sendJson(res, 204);
        }
        return sendJson(res, 404, { error: 'not_found' });
      })().catch((err) => {
        log.error({ err: (err as Error).message, path: url.pathname }, 'a runner request failed');
        sendJson(res, err instanceof AppError ? err.status : 500, { error: 'runner_request_failed', message: (err as Error).message });
      });
    },

    /** Forgets a user's cached placement (a runner lost, a drain moved them). */
    forget(userId: string): void {
      placements.delete(userId);
    },

    async stop(): Promise<void> {
      if (lostSweeper) clearInterval(lostSweeper);
      for (const t of heartbeats.values()) clearInterval(t);
      heartbeats.clear();
      await offRevoked?.().catch(() => {});
      offRevoked = null;
      links.close();
      setTunnelDialer(null);
    },
  };
}
