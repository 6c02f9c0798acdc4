import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission } from '../../kernel/authz.js';
import { actorString, systemCtx as makeSystemCtx, type Ctx } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import type { Logger } from '../../kernel/logger.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { RUNNER_REVOKED_CHANNEL } from './runner-fleet.js';
import {
  ageText,
  CAPACITY_NOTE_EVERY_MS,
  cappedCapacity,
  capacityNews,
  chooseRunner,
  DEFAULT_MAX_CAPACITY,
  looksLikeRunnerToken,
  newRunnerToken,
  placementVerdict,
  RUNNER_HEARTBEAT_TIMEOUT_MS,
  RUNNER_NAME,
  runnerHealth,
  runnerHealthy,
  runnerTokenHash,
  type PlacementReason,
} from './runner-fns.js';
import type { RunnerInfo } from '../runtime/host/runner-protocol.js';
import type { PlacementRow, RunnerRow, RunnersRepo } from './runners.repo.js';
import type { RunnerState } from './runner-fns.js';

const systemCtx = (log: Logger): Ctx => makeSystemCtx(log, { name: 'runners', channel: 'runner' });
/** A token's last use is written at most this often (authenticating is on every runner request). */
const TOKEN_TOUCH_MS = 60_000;
const MAX_LABELS = 32;
/** A refused registration (a name held by another token) is audited at most this often per token and name. */
const REFUSAL_AUDIT_EVERY_MS = 10 * 60_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Where a user's runtime is placed: the runner, the lease's fence, and whether it just moved and why. */
export interface Placed extends PlacementRow {
  runnerName: string;
  kind: 'local' | 'remote';
  /** The placement is new or on another runner than before (a new fence). */
  moved: boolean;
  /** Why it moved: placed for the first time ('new'), its runner was lost or offline, or drained. */
  reason?: PlacementReason;
  previousRunnerId?: string;
  /** Where the user's files were: 'local' on a runner now gone means a new workspace. */
  previousStorage?: 'local' | 'shared';
}

export interface RunnersDeps {
  db: Database;
  repo: RunnersRepo;
  audit: AuditService;
  bus: EventBus;
  clock: Clock;
  log: Logger;
  /** The operator user and tenant (AGENTWS_OPERATOR_EMAIL): whose owners may manage runners over the API. */
  operator?: () => Promise<{ tenantId: string; userId: string } | null>;
  /** How long without a heartbeat before a remote runner is lost (AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS). */
  heartbeatTimeoutMs?: number;
}

/**
 * Runner hosts as the control plane keeps them: the tokens runners authenticate with (the
 * operator's, from the CLI), the runners that registered, and where each user's runtime is placed, as a
 * lease with a fencing number. Runners serve every tenant, so they are the appliance operator's: the CLI
 * (system actor), and over the API an owner (admin.manage_tenant) of the operator's tenant. Tokens are
 * CLI-only: one lets a machine host any tenant's agents.
 */
export function createRunnersService(deps: RunnersDeps) {
  const { db, repo, audit, clock } = deps;
  const timeoutMs = deps.heartbeatTimeoutMs ?? RUNNER_HEARTBEAT_TIMEOUT_MS;

  /** Runner administration: the CLI, or an owner of the operator's tenant; anyone else 403. */
  async function requireOperator(ctx: Ctx, what: string): Promise<void> {
    if (ctx.actor.kind === 'system') return;
    if (ctx.actor.kind === 'user' && hasPermission(ctx.actor.permissions, 'admin.manage_tenant')) {
      const op = await deps.operator?.();
      if (op && op.tenantId === ctx.actor.tenantId) return;
    }
    throw new ForbiddenError(`${what} is only available to the appliance's operator (the CLI, or an owner of the operator's tenant)`);
  }

  function requireCli(ctx: Ctx, what: string): void {
    if (ctx.actor.kind !== 'system') throw new ForbiddenError(`${what} is only available to the operator (CLI)`);
  }

  /** When each token was last audited for a name it may not take (a refused runner dials again and again). */
  const refusalsAudited = new Map<string, number>();

  /** A token asked for a name another token holds: logged, and audited once in a while (runner.refused names the token). */
  async function refused(token: { id: string; name: string }, name: string, holder: RunnerRow | null): Promise<void> {
    deps.log.warn({ runner: name, token: token.name, tokenId: token.id, holderState: holder?.state }, 'a runner token asked for a runner name that belongs to another token: refused');
    const key = `${token.id}:${name}`;
    const now = clock.now().getTime();
    if (now - (refusalsAudited.get(key) ?? -Infinity) < REFUSAL_AUDIT_EVERY_MS) return;
    refusalsAudited.set(key, now);
    if (refusalsAudited.size > 10_000) refusalsAudited.clear();
    await db
      .transaction((tx) =>
        audit.record(tx, systemCtx(deps.log), {
          tenantId: null,
          action: 'runner.refused',
          target: holder ? `runner:${holder.id}` : `runner_name:${name}`,
          details: { name, token: { id: token.id, name: token.name }, reason: 'name_taken', holderState: holder?.state ?? null },
        }),
      )
      .catch((err) => deps.log.error({ err: (err as Error).message }, 'could not audit a refused runner'));
  }

  /**
   * A jump in what a runner reports about its capacity (over its token's ceiling, or a large change):
   * logged and audited (runner.capacity) once; the ceiling is what placement counts either way.
   */
  async function noteCapacity(runner: { id: string; name: string | null; capacity: number }, facts: Parameters<typeof capacityNews>[0]): Promise<void> {
    const news = capacityNews(facts);
    if (!news) return;
    try {
      await db.transaction(async (tx) => {
        if (!(await repo.noteCapacity(tx, runner.id, CAPACITY_NOTE_EVERY_MS))) return;
        const name = runner.name ?? (await repo.runnerById(tx, runner.id))?.name ?? runner.id;
        const details = { name, reported: facts.reported, previous: facts.previous, maxCapacity: facts.ceiling, counted: runner.capacity, news };
        deps.log.warn(details, news === 'over_ceiling' ? 'a runner reports more capacity than its token allows: counted at the ceiling' : 'a runner\'s reported capacity changed a lot');
        await audit.record(tx, systemCtx(deps.log), { tenantId: null, action: 'runner.capacity', target: `runner:${runner.id}`, details });
      });
    } catch (err) {
      deps.log.error({ err: (err as Error).message }, 'could not record a runner\'s capacity jump');
    }
  }

  const healthOf = (r: RunnerRow, now: Date): boolean => (r.kind === 'local' ? r.state === 'active' || r.state === 'draining' : runnerHealthy(r, now, timeoutMs));

  const publicRunner = (r: RunnerRow, now: Date) => ({
    id: r.id,
    name: r.name,
    kind: r.kind,
    state: r.state,
    healthy: healthOf(r, now),
    capacity: r.capacity,
    reportedCapacity: r.reportedCapacity,
    maxCapacity: r.maxCapacity,
    resident: r.resident,
    busy: r.busy,
    users: r.placed,
    heartbeatAt: r.heartbeatAt,
    heartbeatAgeMs: r.heartbeatAt ? Math.max(0, now.getTime() - r.heartbeatAt.getTime()) : null,
    heartbeat: ageText(r.heartbeatAt, now),
    version: r.version,
    labels: r.labels,
    address: r.address,
    sharedStorage: r.sharedStorage,
    connected: r.serveId !== null,
    registeredAt: r.registeredAt,
    connectedAt: r.connectedAt,
  });

  async function runnerNamed(name: string): Promise<RunnerRow> {
    const r = RUNNER_NAME.test(name) ? await repo.runnerByName(db, name) : null;
    if (!r) throw new NotFoundError(`runner "${name}" not found`, { hint: 'List runners with `npx aws runner list`.' });
    return r;
  }

  /** The runner a new placement would go to now (the least loaded healthy one with room); null: none. */
  async function choose(q: Queryable, now: Date, o: { exclude?: string[]; needShared?: boolean }) {
    const runners = await repo.listRunners(q);
    return chooseRunner(
      // A serve's local runner has no heartbeat: while active it is as healthy as the serve that asks.
      runners.map((r) => (r.kind === 'local' ? { ...r, heartbeatAt: r.state === 'active' ? now : r.heartbeatAt } : r)),
      now,
      { exclude: o.exclude, placed: new Map(runners.map((r) => [r.id, r.recent])), needShared: o.needShared, timeoutMs },
    );
  }

  /**
   * Places the user in one transaction, serialised per user: kept where they are while that runner may
   * keep them (sticky), else on the least loaded runner with room under a new fence. Their current files
   * stay the current copy only where the new runner has them (the same runner, or both on the shared
   * storage); elsewhere the placement starts a new copy (filesFence), and any copy the runner has of them
   * is set aside there, never used. Throws UnavailableError (runner_unavailable) when no runner has room.
   */
  async function place(owner: RuntimeOwner, o: { exclude?: string[]; needShared?: boolean } = {}): Promise<Placed> {
    return db.transaction(async (tx) => {
      const now = await repo.now(tx);
      const current = await repo.lockPlacement(tx, owner.userId);
      const held = current ? await repo.runnerById(tx, current.runnerId) : null;
      const verdict = placementVerdict(current, held, owner.tenantId, now, timeoutMs);
      if (verdict.keep && current && held) return { ...current, runnerName: held.name, kind: held.kind, moved: false };
      // A new runner is chosen: one choice at a time, on figures read under the lock.
      await repo.lockChoice(tx);
      const to = await choose(tx, now, { exclude: o.exclude, needShared: o.needShared });
      if (!to) {
        throw new UnavailableError('no runner host has room for this agent now', {
          code: 'runner_unavailable',
          hint: 'The turn waits; an operator can add a runner host (`aws runner`) or check `npx aws runner list`.',
        });
      }
      const sameFiles = !!current && current.tenantId === owner.tenantId && (current.runnerId === to.id || (current.storage === 'shared' && to.sharedStorage));
      const row = await repo.setPlacement(tx, {
        userId: owner.userId,
        tenantId: owner.tenantId,
        runnerId: to.id,
        storage: to.sharedStorage ? 'shared' : 'local',
        filesFence: sameFiles ? current!.filesFence : 'new',
      });
      const reason: PlacementReason = verdict.keep ? 'new' : verdict.reason;
      if (current && current.runnerId !== to.id) {
        deps.log.info({ userId: owner.userId, from: held?.name ?? current.runnerId, to: to.name, fence: row.fence, reason }, 'agent placed on another runner');
      }
      return {
        ...row,
        runnerName: to.name,
        kind: to.kind,
        moved: true,
        reason,
        ...(current ? { previousRunnerId: current.runnerId, previousStorage: current.storage } : {}),
      };
    });
  }

  return {
    /**
     * A runner token (shown once; stored hashed), with the ceiling on each of its runners' capacity
     * (default DEFAULT_MAX_CAPACITY). CLI only; audited runner.token_created.
     */
    async createToken(ctx: Ctx, input: { name: string; maxCapacity?: number }): Promise<{ id: string; name: string; token: string; maxCapacity: number; createdAt: Date }> {
      requireCli(ctx, 'creating runner tokens');
      if (!RUNNER_NAME.test(input.name)) throw new ValidationError('a runner token\'s name is lower-case letters, digits, dot, dash or underscore (at most 63)');
      const maxCapacity = checkMaxCapacity(input.maxCapacity ?? DEFAULT_MAX_CAPACITY);
      const token = newRunnerToken();
      const row = await db.transaction(async (tx) => {
        await repo.lockTokenName(tx, input.name);
        const same = await repo.findToken(tx, input.name);
        if (same && !same.revokedAt) {
          throw new ConflictError(`a runner token named "${input.name}" exists`, { hint: 'Choose another name, or revoke it first (`npx aws runner token revoke`).' });
        }
        const row = await repo.insertToken(tx, { name: input.name, tokenHash: runnerTokenHash(token), createdBy: actorString(ctx.actor), maxCapacity });
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.token_created', target: `runner_token:${row.id}`, details: { name: row.name, maxCapacity } });
        return row;
      });
      return { id: row.id, name: row.name, token, maxCapacity: row.maxCapacity, createdAt: row.createdAt };
    },

    /**
     * Changes a live token's ceiling on each of its runners' capacity (by id or name); its runners are
     * counted under it at once. CLI only; audited runner.token_updated.
     */
    async setTokenCapacity(ctx: Ctx, ref: string, maxCapacity: number): Promise<{ id: string; name: string; maxCapacity: number; previous: number; runners: string[] }> {
      requireCli(ctx, 'changing runner tokens');
      const ceiling = checkMaxCapacity(maxCapacity);
      const t = await repo.findToken(db, ref);
      if (!t || t.revokedAt) throw new NotFoundError(`runner token "${ref}" not found${t ? ' (it is revoked)' : ''}`, { hint: 'List them with `npx aws runner token list`.' });
      await db.transaction(async (tx) => {
        await repo.setMaxCapacity(tx, t.id, ceiling);
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.token_updated', target: `runner_token:${t.id}`, details: { name: t.name, maxCapacity: ceiling, previous: t.maxCapacity } });
      });
      return { id: t.id, name: t.name, maxCapacity: ceiling, previous: t.maxCapacity, runners: t.runners };
    },

    /** Runner tokens (never the tokens nor their hashes): when last used, whether revoked, the runners using each. CLI only. */
    async listTokens(ctx: Ctx) {
      requireCli(ctx, 'listing runner tokens');
      return (await repo.listTokens(db)).map((t) => ({ ...t, revoked: t.revokedAt !== null }));
    },

    /**
     * Revokes a token (by id or name): its runners go offline now, the processes holding their channels cut
     * them (bus, after commit), and they are refused when they dial again. CLI only; audited runner.token_revoked.
     */
    async revokeToken(ctx: Ctx, ref: string): Promise<{ id: string; name: string; revoked: true; already: boolean; runners: string[] }> {
      requireCli(ctx, 'revoking runner tokens');
      const t = await repo.findToken(db, ref);
      if (!t) throw new NotFoundError(`runner token "${ref}" not found`, { hint: 'List them with `npx aws runner token list`.' });
      const runners = await db.transaction(async (tx) => {
        const runners = await repo.revokeToken(tx, t.id);
        if (!runners) return null;
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.token_revoked', target: `runner_token:${t.id}`, details: { name: t.name, runners } });
        await deps.bus.publish(RUNNER_REVOKED_CHANNEL, { tokenId: t.id }, tx);
        return runners;
      });
      return { id: t.id, name: t.name, revoked: true, already: runners === null, runners: runners ?? t.runners };
    },

    /** The token's id and hash if it is a live runner token; UnauthenticatedError otherwise (unknown or revoked alike). */
    async authenticate(token: string): Promise<{ tokenId: string; tokenHash: string }> {
      if (typeof token !== 'string' || !looksLikeRunnerToken(token)) throw new UnauthenticatedError('unknown or revoked runner token');
      const hash = runnerTokenHash(token);
      const t = await repo.tokenByHash(db, hash);
      if (!t || t.revokedAt) throw new UnauthenticatedError('unknown or revoked runner token');
      if (!t.lastUsedAt || clock.now().getTime() - t.lastUsedAt.getTime() > TOKEN_TOUCH_MS) await repo.touchToken(db, t.id).catch(() => {});
      return { tokenId: t.id, tokenHash: hash };
    },

    /**
     * A runner connected: registered (or registered again) by name. A name belongs to the token that first
     * registered it until an operator removes the runner (`remove`): another token is refused
     * (ConflictError naming the name; audited runner.refused, naming the token), whether the runner holding
     * it is connected, lost or offline, so no token inherits another's placements and fences. A drained
     * runner that reconnects stays draining. Its capacity counts up to its token's ceiling.
     */
    async register(tokenId: string, info: RunnerInfo & { serveId: string; relayUrl: string | null }): Promise<RunnerRow> {
      if (typeof info.name !== 'string' || !RUNNER_NAME.test(info.name)) throw new ValidationError(`runner name "${String(info.name)}" is not valid (lower-case letters, digits, dot, dash, underscore; at most 63)`);
      const reported = Number(info.capacity);
      if (!Number.isInteger(reported) || reported < 0 || reported > 100_000) throw new ValidationError('a runner\'s capacity is a whole number from 0');
      const labels = cleanLabels(info.labels);
      const token = UUID.test(tokenId) ? await repo.findToken(db, tokenId) : null;
      if (!token || token.revokedAt) throw new UnauthenticatedError('unknown or revoked runner token');
      const existing = await repo.runnerByName(db, info.name);
      if (existing?.kind === 'local') throw new ConflictError(`"${info.name}" is the name of a serve's local runner`);
      // Audited before it is answered: the refusal's record is there when the runner (or a reader) hears it.
      const taken = async () => {
        await refused(token, info.name, existing);
        return new ConflictError(`the runner name "${info.name}" belongs to another runner token`, {
          code: 'runner_name_taken',
          hint: `Give this runner another name (AGENTWS_RUNNER_NAME). If this host replaces that runner, an operator removes it first (\`npx aws runner remove ${info.name}\`, once it is drained or lost): its users are then placed afresh.`,
        });
      };
      if (existing && existing.tokenId !== tokenId) throw await taken();
      const capacity = cappedCapacity(reported, token.maxCapacity);
      const row = await db.transaction(async (tx) => {
        const row = await repo.upsertRunner(tx, {
          name: info.name,
          tokenId,
          kind: 'remote',
          address: typeof info.address === 'string' ? info.address.slice(0, 255) : null,
          labels,
          version: typeof info.version === 'string' ? info.version.slice(0, 64) : null,
          capacity,
          reportedCapacity: reported,
          sharedStorage: info.sharedStorage === true,
          serveId: info.serveId,
          relayUrl: info.relayUrl,
        });
        // Another token registered the name between the read above and this write: refused the same way.
        if (!row) return null;
        if (!existing || existing.state === 'lost' || existing.state === 'offline') {
          await audit.record(tx, systemCtx(deps.log), {
            tenantId: null,
            action: 'runner.registered',
            target: `runner:${row.id}`,
            details: {
              name: row.name,
              token: { id: token.id, name: token.name },
              address: row.address,
              capacity: row.capacity,
              ...(reported !== row.capacity ? { reportedCapacity: reported, maxCapacity: token.maxCapacity } : {}),
              version: row.version,
              sharedStorage: row.sharedStorage,
              state: row.state,
            },
          });
        }
        return row;
      });
      if (!row) throw await taken();
      await noteCapacity(row, { reported, previous: existing?.reportedCapacity ?? null, ceiling: token.maxCapacity, notedAt: existing?.capacityNotedAt ?? null, now: await repo.now(db) });
      return row;
    },

    /** A serve's own runtimes, as a runner placements can choose (no token: it is the control plane itself). */
    async registerLocal(input: { name: string; capacity: number; serveId: string }): Promise<string> {
      const row = await repo.upsertRunner(db, { name: input.name, tokenId: null, kind: 'local', address: null, labels: {}, version: null, capacity: input.capacity, reportedCapacity: null, sharedStorage: false, serveId: input.serveId, relayUrl: null });
      if (!row) throw new ConflictError(`"${input.name}" is the name of a runner host, not of this serve's local runner`, { hint: 'Remove that runner (`npx aws runner remove`), or rename it.' });
      return row.id;
    },

    /** A serve stopped hosting: its local runner takes no placements until it starts again. */
    localStopped: (runnerId: string) => repo.setState(db, runnerId, 'offline'),

    /** The runner of this name registered with this token (what a runner's request acts as). */
    async runnerOf(tokenId: string, name: string): Promise<{ id: string; kind: 'local' | 'remote' } | null> {
      const r = await repo.runnerByName(db, name);
      return r && r.tokenId === tokenId && r.kind === 'remote' && r.state !== 'offline' ? { id: r.id, kind: r.kind } : null;
    },

    /**
     * Records a runner's figures and that it is alive (a lost runner heard again is active); answers its
     * state. The capacity it reports counts up to its token's ceiling; a jump in it is logged and audited
     * (runner.capacity) once, not at every heartbeat.
     */
    async heartbeat(runnerId: string, figures: { resident: number; busy: number; capacity: number }): Promise<{ state: RunnerState; sharedStorage: boolean; capacity: number }> {
      const n = (x: number) => (Number.isFinite(x) ? Math.max(0, Math.min(100_000, Math.floor(x))) : 0);
      const reported = n(figures.capacity);
      const r = await repo.heartbeat(db, runnerId, { resident: n(figures.resident), busy: n(figures.busy), reported });
      if (!r) return { state: 'offline', sharedStorage: false, capacity: 0 };
      await noteCapacity({ id: runnerId, name: null, capacity: r.capacity }, { reported, previous: r.previousReported, ceiling: r.ceiling, notedAt: r.notedAt, now: r.now });
      return { state: r.state, sharedStorage: r.sharedStorage, capacity: r.capacity };
    },

    /** The runner's channel to `serveId` closed (forgotten only if that serve still held it). */
    disconnected: (runnerId: string, serveId: string) => repo.disconnected(db, runnerId, serveId),

    /**
     * Remote runners not heard from within the heartbeat timeout, newly marked lost, with the users placed
     * on them (each runner returned to exactly one caller: the update decides). Audited runner.lost.
     */
    async markLost(now?: Date): Promise<Array<{ id: string; name: string; lostAt: Date; users: RuntimeOwner[] }>> {
      const lost = await repo.markLost(db, timeoutMs, now ?? null);
      const out: Array<{ id: string; name: string; lostAt: Date; users: RuntimeOwner[] }> = [];
      for (const r of lost) {
        const users = (await repo.placementsOf(db, r.id)).map((p) => ({ tenantId: p.tenantId, userId: p.userId }));
        await db.transaction((tx) => audit.record(tx, systemCtx(deps.log), { tenantId: null, action: 'runner.lost', target: `runner:${r.id}`, details: { name: r.name, users: users.length } }));
        deps.log.warn({ runner: r.name, users: users.length }, 'runner lost: no heartbeat');
        out.push({ ...r, users });
      }
      return out;
    },

    /** Every runner with its state and figures (the operator's). */
    async list(ctx: Ctx) {
      await requireOperator(ctx, 'listing runners');
      const now = await repo.now(db);
      return (await repo.listRunners(db)).map((r) => publicRunner(r, now));
    },

    /**
     * No new placements on the runner; the serve holding its channel moves its idle users (`move`), running
     * turns finish first. Returns the runner and the number of users placed there. Audited runner.drain.
     */
    async drain(ctx: Ctx, name: string) {
      await requireOperator(ctx, 'draining runners');
      const r = await runnerNamed(name);
      if (r.state === 'lost' || r.state === 'offline') {
        throw new ConflictError(`runner "${name}" is ${r.state}: there is nothing to drain`, { hint: 'Its users are placed elsewhere at their next turn; forget it with `npx aws runner remove`.' });
      }
      if (r.state !== 'draining') {
        await db.transaction(async (tx) => {
          await repo.setState(tx, r.id, 'draining');
          await audit.record(tx, ctx, { tenantId: null, action: 'runner.drain', target: `runner:${r.id}`, details: { name, users: r.placed } });
        });
      }
      return { ...publicRunner({ ...r, state: 'draining' }, await repo.now(db)), users: r.placed };
    },

    /** Ends a drain: the runner takes placements again. Audited runner.resume. */
    async resume(ctx: Ctx, name: string) {
      await requireOperator(ctx, 'resuming runners');
      const r = await runnerNamed(name);
      if (r.state === 'active') return publicRunner(r, await repo.now(db));
      if (r.state !== 'draining') throw new ConflictError(`runner "${name}" is ${r.state}, not draining`, { hint: r.state === 'lost' ? 'It becomes active again when it answers its heartbeat.' : 'It becomes active again when it connects with a valid token.' });
      await db.transaction(async (tx) => {
        await repo.setState(tx, r.id, 'active');
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.resume', target: `runner:${r.id}`, details: { name } });
      });
      return publicRunner({ ...r, state: 'active' }, await repo.now(db));
    },

    /**
     * Forgets a runner that is lost or offline (or whose heartbeat stopped) and its placements: its users
     * are placed elsewhere at their next turn. Audited runner.removed.
     */
    async remove(ctx: Ctx, name: string): Promise<{ name: string; removed: true; users: number }> {
      await requireOperator(ctx, 'removing runners');
      const r = await runnerNamed(name);
      const gone = r.state === 'lost' || r.state === 'offline' || (r.kind === 'remote' && runnerHealth(r, await repo.now(db), timeoutMs) === 'stale');
      if (!gone) throw new ConflictError(`runner "${name}" is ${r.state} and connected`, { hint: 'Drain it (`npx aws runner drain`), stop it, then remove it.' });
      await db.transaction(async (tx) => {
        await repo.dropPlacementsOf(tx, r.id);
        await repo.deleteRunner(tx, r.id);
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.removed', target: `runner:${r.id}`, details: { name, users: r.placed } });
      });
      return { name, removed: true, users: r.placed };
    },

    /**
     * Where the user's runtime goes, with the lease's fence: sticky while its runner may keep them, else the
     * least loaded runner with room (only those with shared storage when `needShared`). UnavailableError
     * (runner_unavailable) when none has room.
     */
    place: (owner: RuntimeOwner, opts: { needShared?: boolean } = {}): Promise<Placed> => place(owner, { needShared: opts.needShared }),

    /**
     * Where a drain would move the user off `from` now, without moving them (their files are copied there
     * first); null when no other runner has room or they are no longer on `from`.
     */
    async moveTarget(owner: RuntimeOwner, from: string): Promise<{ runnerId: string; storage: 'local' | 'shared' } | null> {
      const current = await repo.placement(db, owner.userId);
      if (!current || current.runnerId !== from) return null;
      const to = await choose(db, await repo.now(db), { exclude: [from] });
      return to ? { runnerId: to.id, storage: to.sharedStorage ? 'shared' : 'local' } : null;
    },

    /** A fence taken ahead of the move it will be (a drain marks the copy it makes on the new runner with it). */
    reserveFence: (): Promise<number> => repo.nextFence(db),

    /**
     * Moves the user off `from` (a drain) to `to` if given, else the least loaded other runner, with their
     * files (copied there first, the copy marked with `fence`, or on the shared storage both mount), told
     * once on their next turn (takeMovedIntact). Null when none has room, or they are no longer on `from`
     * (or no longer under `expectFence`: placed again meanwhile).
     */
    async move(owner: RuntimeOwner, from: string, to?: string, o: { fence?: number; expectFence?: number } = {}): Promise<Placed | null> {
      return db.transaction(async (tx) => {
        const now = await repo.now(tx);
        const current = await repo.lockPlacement(tx, owner.userId);
        if (!current || current.runnerId !== from || current.tenantId !== owner.tenantId) return null;
        if (o.expectFence !== undefined && current.fence !== o.expectFence) return null;
        await repo.lockChoice(tx);
        const runners = await repo.listRunners(tx);
        const dest = await choose(tx, now, { exclude: [from, ...(to ? runners.filter((r) => r.id !== to).map((r) => r.id) : [])] });
        if (!dest) return null;
        const held = runners.find((r) => r.id === from);
        const sameFiles = current.storage === 'shared' && dest.sharedStorage;
        const row = await repo.setPlacement(tx, {
          userId: owner.userId,
          tenantId: owner.tenantId,
          runnerId: dest.id,
          storage: dest.sharedStorage ? 'shared' : 'local',
          fence: o.fence,
          filesFence: sameFiles ? current.filesFence : 'new',
          movedIntact: true,
        });
        deps.log.info({ userId: owner.userId, from: held?.name ?? from, to: dest.name, fence: row.fence }, 'agent moved to another runner (drain)');
        return { ...row, runnerName: dest.name, kind: dest.kind, moved: true, reason: 'draining' as const, previousRunnerId: current.runnerId, previousStorage: current.storage };
      });
    },

    /** Whether the user's placement under `fence` was moved intact by a drain and they were not told yet: true once. */
    takeMovedIntact: (userId: string, fence: number): Promise<boolean> => repo.takeMovedIntact(db, userId, fence),

    /** The user's placement now, or null. */
    current: (userId: string): Promise<PlacementRow | null> => repo.placement(db, userId),
    /** Same as current (the fleet's name for it). */
    placement: (userId: string): Promise<PlacementRow | null> => repo.placement(db, userId),

    /** The user's tenant if `runnerId` holds their lease under `fence` now (the tenant is the placement's, never the runner's word). */
    async holds(runnerId: string, userId: string, fence: number): Promise<{ tenantId: string } | null> {
      const p = await repo.placement(db, userId);
      return p && p.runnerId === runnerId && p.fence === fence ? { tenantId: p.tenantId } : null;
    },

    /**
     * Of the users whose files a runner has (with the copy each is), those placed elsewhere since: on
     * another runner that does not see the same files (both on the shared storage), with the copy current
     * now. That runner sets their files aside (never used silently). A user placed nowhere keeps theirs:
     * it may be their only copy.
     */
    async staleCopies(runnerId: string, copies: Array<{ userId: string; filesFence: number | null }>): Promise<Array<{ userId: string; tenantId: string; filesFence: number }>> {
      const me = await repo.runnerById(db, runnerId);
      if (!me) return [];
      const marked = new Map(copies.filter((c) => typeof c?.userId === 'string' && UUID.test(c.userId)).map((c) => [c.userId, typeof c.filesFence === 'number' ? c.filesFence : null]));
      const placed = await repo.placementsOfUsers(db, [...marked.keys()].slice(0, 100_000));
      return placed
        .filter((p) => p.runnerId !== runnerId && !(me.sharedStorage && p.storage === 'shared') && marked.get(p.userId) !== p.filesFence)
        .map((p) => ({ userId: p.userId, tenantId: p.tenantId, filesFence: p.filesFence }));
    },

    /** A runner set a user's files aside (not the current copy): audited runner.copy_set_aside, for the operator. */
    async copySetAside(runnerId: string, owner: RuntimeOwner, where: string, why: string): Promise<void> {
      const r = await repo.runnerById(db, runnerId);
      deps.log.warn({ runner: r?.name ?? runnerId, userId: owner.userId, tenantId: owner.tenantId, where, why }, 'a runner set aside a copy of a user\'s files that is not their current one');
      await db.transaction((tx) =>
        audit.record(tx, systemCtx(deps.log), {
          tenantId: null,
          action: 'runner.copy_set_aside',
          target: `runner:${runnerId}`,
          details: { runner: r?.name ?? null, tenantId: owner.tenantId, userId: owner.userId, where: where.slice(0, 200), why: why.slice(0, 200) },
        }),
      );
    },

    /** The users placed on a runner, with their fences. */
    placementsOf: async (runnerId: string) => (await repo.placementsOf(db, runnerId)).map((p) => ({ userId: p.userId, fence: p.fence, tenantId: p.tenantId, storage: p.storage, filesFence: p.filesFence })),
    /** Where other control-plane processes reach the serve holding the runner's channel. */
    relayUrlOf: (runnerId: string) => repo.relayUrlOf(db, runnerId),
    /** Whether any remote runner is registered and not offline. */
    anyRemote: () => repo.anyRemote(db),
  };
}

/** A token's ceiling on its runners' capacity, checked (a whole number from 0 to 100000). */
function checkMaxCapacity(n: number): number {
  if (!Number.isInteger(n) || n < 0 || n > 100_000) throw new ValidationError('maxCapacity is a whole number from 0 to 100000 (the most runtimes each runner of the token is counted to hold)', { details: { field: 'maxCapacity' } });
  return n;
}

/** A runner's labels as it sent them, kept to short string pairs. */
function cleanLabels(labels: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) return out;
  for (const [k, v] of Object.entries(labels as Record<string, unknown>).slice(0, MAX_LABELS)) {
    if (/^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/.test(k) && (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')) out[k] = String(v).slice(0, 128);
  }
  return out;
}
