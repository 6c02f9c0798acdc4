import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { requireSystem } from '../authz.js';
import { actorString, systemCtx as makeSystemCtx, type Ctx } from '../context.js';
import { ConflictError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { Logger } from '../logger.js';
import type { RuntimeOwner } from '../runtime/runtime-pool.js';
import { RUNNER_REVOKED_CHANNEL } from './runner-fleet.js';
import { ageText, chooseRunner, newRunnerToken, RUNNER_HEARTBEAT_TIMEOUT_MS, runnerHealthy, runnerTokenHash } from './runner-fns.js';
import type { RunnerInfo } from './runner-protocol.js';
import type { PlacementRow, RunnerRow, RunnersRepo } from './runners.repo.js';

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const systemCtx = (log: Logger): Ctx => makeSystemCtx(log, { name: 'runners', channel: 'runner' });

/**
 * Runner hosts as the control plane keeps them (issue 26): the tokens runners authenticate with (the
 * operator's, from the CLI), the runners that registered, and where each user's runtime is placed, as a
 * lease with a fencing number. Runner administration is the operator's (system actor): runners serve
 * every tenant.
 */
export function createRunnersService(deps: { db: Database; repo: RunnersRepo; audit: AuditService; bus: EventBus; clock: Clock; log: Logger }) {
  const { db, repo, audit, clock } = deps;

  const publicRunner = (r: RunnerRow, now = clock.now()) => ({
    id: r.id,
    name: r.name,
    kind: r.kind,
    state: r.state,
    healthy: r.kind === 'local' ? r.state !== 'offline' : runnerHealthy(r, now),
    capacity: r.capacity,
    resident: r.resident,
    busy: r.busy,
    users: r.placed,
    heartbeatAt: r.heartbeatAt,
    heartbeat: ageText(r.heartbeatAt, now),
    version: r.version,
    labels: r.labels,
    address: r.address,
    sharedStorage: r.sharedStorage,
  });

  async function runnerNamed(name: string): Promise<RunnerRow> {
    const r = await repo.runnerByName(db, name);
    if (!r) throw new NotFoundError(`runner "${name}" not found`, { hint: 'List runners with `npx aws runner list`.' });
    return r;
  }

  async function place(owner: RuntimeOwner, exclude: string[] = [], force = false): Promise<PlacementRow & { kind: 'local' | 'remote'; runnerName: string }> {
    return db.transaction(async (tx) => {
      const now = clock.now();
      const current = await repo.lockPlacement(tx, owner.userId);
      const runners = await repo.listRunners(tx);
      const byId = new Map(runners.map((r) => [r.id, r]));
      const held = current ? byId.get(current.runnerId) : undefined;
      // Sticky: the user stays where their workspace is while that runner is healthy (draining included:
      // a drain moves its users itself).
      if (!force && current && held && current.tenantId === owner.tenantId && (held.kind === 'local' ? held.state !== 'offline' && held.state !== 'lost' : runnerHealthy(held, now))) {
        return { ...current, kind: held.kind, runnerName: held.name };
      }
      const placed = new Map(runners.map((r) => [r.id, r.recent]));
      const to = chooseRunner(
        runners.map((r) => (r.kind === 'local' ? { ...r, heartbeatAt: r.state === 'active' ? now : r.heartbeatAt } : r)),
        now,
        { exclude: [...exclude, ...(force && current ? [current.runnerId] : [])], placed },
      );
      if (!to) {
        throw new UnavailableError('no runner host has room for this agent now', {
          code: 'runner_unavailable',
          hint: 'The turn waits; an operator can add a runner host (`aws runner`) or check `npx aws runner list`.',
        });
      }
      const row = await repo.setPlacement(tx, { userId: owner.userId, tenantId: owner.tenantId, runnerId: to.id, storage: to.sharedStorage ? 'shared' : 'local' });
      if (current && current.runnerId !== to.id) {
        deps.log.info({ userId: owner.userId, from: held?.name ?? current.runnerId, to: to.name, fence: row.fence }, 'agent placed on another runner');
      }
      return { ...row, kind: to.kind, runnerName: to.name };
    });
  }

  return {
    /** A runner token (shown once; stored hashed). Operator only. */
    async createToken(ctx: Ctx, input: { name: string }) {
      requireSystem(ctx, 'creating runner tokens');
      if (!NAME.test(input.name)) throw new ValidationError('name must be lower-case letters, digits, dot, dash or underscore (at most 63)');
      const token = newRunnerToken();
      const row = await db.transaction(async (tx) => {
        const row = await repo.insertToken(tx, { name: input.name, tokenHash: runnerTokenHash(token), createdBy: actorString(ctx.actor) });
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.token_created', target: `runner_token:${row.id}`, details: { name: row.name } });
        return row;
      });
      return { id: row.id, name: row.name, token, createdAt: row.createdAt };
    },

    async listTokens(ctx: Ctx) {
      requireSystem(ctx, 'listing runner tokens');
      return (await repo.listTokens(db)).map((t) => ({ ...t, revoked: t.revokedAt !== null }));
    },

    /** Revokes a token: its runners are cut off now and refused when they dial again. */
    async revokeToken(ctx: Ctx, ref: string) {
      requireSystem(ctx, 'revoking runner tokens');
      const t = await repo.findToken(db, ref);
      if (!t) throw new NotFoundError(`runner token "${ref}" not found`, { hint: 'List them with `npx aws runner token list`.' });
      if (t.revokedAt) return { id: t.id, name: t.name, revoked: true, already: true };
      await db.transaction(async (tx) => {
        await repo.revokeToken(tx, t.id);
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.token_revoked', target: `runner_token:${t.id}`, details: { name: t.name } });
        await deps.bus.publish(RUNNER_REVOKED_CHANNEL, { tokenId: t.id }, tx);
      });
      return { id: t.id, name: t.name, revoked: true, already: false };
    },

    /** The token's id and hash if it is a live runner token; UnauthenticatedError otherwise. */
    async authenticate(token: string): Promise<{ tokenId: string; tokenHash: string }> {
      const hash = runnerTokenHash(token);
      const t = await repo.tokenByHash(db, hash);
      if (!t || t.revokedAt) throw new UnauthenticatedError('unknown or revoked runner token');
      void repo.touchToken(db, t.id).catch(() => {});
      return { tokenId: t.id, tokenHash: hash };
    },

    /** A runner connected: registered by name (a name taken by another token's healthy runner is refused). */
    async register(tokenId: string, info: RunnerInfo & { serveId: string; relayUrl: string | null }): Promise<RunnerRow> {
      if (!NAME.test(info.name)) throw new ValidationError(`runner name "${info.name}" is not valid`);
      const existing = await repo.runnerByName(db, info.name);
      if (existing && existing.tokenId !== tokenId && existing.kind === 'remote' && runnerHealthy(existing, clock.now())) {
        throw new ConflictError(`a runner named "${info.name}" is connected with another token`);
      }
      if (existing?.kind === 'local') throw new ConflictError(`"${info.name}" is the name of a serve's local runner`);
      const row = await repo.upsertRunner(db, { name: info.name, tokenId, kind: 'remote', address: info.address, labels: info.labels ?? {}, version: info.version ?? null, capacity: Math.max(0, Math.floor(info.capacity)), sharedStorage: !!info.sharedStorage, serveId: info.serveId, relayUrl: info.relayUrl });
      if (!existing || existing.state === 'lost' || existing.state === 'offline') {
        await db.transaction((tx) => audit.record(tx, systemCtx(deps.log), { tenantId: null, action: 'runner.registered', target: `runner:${row.id}`, details: { name: row.name, address: row.address, capacity: row.capacity, version: row.version } }));
      }
      return row;
    },

    /** A serve's own runtimes, as a runner placements can choose (no token: it is the control plane itself). */
    async registerLocal(input: { name: string; capacity: number; serveId: string }): Promise<string> {
      const row = await repo.upsertRunner(db, { name: input.name, tokenId: null, kind: 'local', address: null, labels: {}, version: null, capacity: input.capacity, sharedStorage: false, serveId: input.serveId, relayUrl: null });
      return row.id;
    },

    /** A serve stopped hosting: its local runner takes no placements until it starts again. */
    localStopped: (runnerId: string) => repo.setState(db, runnerId, 'offline'),

    /** The runner of this name registered with this token (what a runner's request acts as). */
    async runnerOf(tokenId: string, name: string): Promise<{ id: string; kind: 'local' | 'remote' } | null> {
      const r = await repo.runnerByName(db, name);
      return r && r.tokenId === tokenId && r.kind === 'remote' ? { id: r.id, kind: r.kind } : null;
    },

    async heartbeat(runnerId: string, figures: { resident: number; busy: number; capacity: number }) {
      return (await repo.heartbeat(db, runnerId, figures)) ?? { state: 'offline' as const, sharedStorage: false };
    },

    disconnected: (runnerId: string, serveId: string) => repo.disconnected(db, runnerId, serveId),

    /** Runners not heard from within the timeout, newly marked lost, with the users placed on them (audited). */
    async markLost(): Promise<Array<{ id: string; name: string; users: RuntimeOwner[] }>> {
      const lost = await repo.markLost(db, new Date(clock.now().getTime() - RUNNER_HEARTBEAT_TIMEOUT_MS));
      const out: Array<{ id: string; name: string; users: RuntimeOwner[] }> = [];
      for (const r of lost) {
        const users = (await repo.placementsOf(db, r.id)).map((p) => ({ tenantId: p.tenantId, userId: p.userId }));
        await db.transaction((tx) => audit.record(tx, systemCtx(deps.log), { tenantId: null, action: 'runner.lost', target: `runner:${r.id}`, details: { name: r.name, users: users.length } }));
        out.push({ ...r, users });
      }
      return out;
    },

    /** Every runner with its state and figures (operator). */
    async list(ctx: Ctx) {
      requireSystem(ctx, 'listing runners');
      const now = clock.now();
      return (await repo.listRunners(db)).map((r) => publicRunner(r, now));
    },

    /** No new placements on the runner; its idle users move (the serve holding its channel moves them). */
    async drain(ctx: Ctx, name: string) {
      requireSystem(ctx, 'draining runners');
      const r = await runnerNamed(name);
      if (r.state === 'lost' || r.state === 'offline') throw new ConflictError(`runner "${name}" is ${r.state}: there is nothing to drain`, { hint: 'Remove it with `npx aws runner remove`.' });
      await db.transaction(async (tx) => {
        await repo.setState(tx, r.id, 'draining');
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.drain', target: `runner:${r.id}`, details: { name, users: r.placed } });
      });
      return { ...publicRunner({ ...r, state: 'draining' }), users: r.placed };
    },

    /** Ends a drain. */
    async resume(ctx: Ctx, name: string) {
      requireSystem(ctx, 'resuming runners');
      const r = await runnerNamed(name);
      if (r.state !== 'draining') throw new ConflictError(`runner "${name}" is ${r.state}, not draining`);
      await db.transaction(async (tx) => {
        await repo.setState(tx, r.id, 'active');
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.resume', target: `runner:${r.id}`, details: { name } });
      });
      return publicRunner({ ...r, state: 'active' });
    },

    /** Forgets a lost or offline runner and its placements (its users are placed again at their next turn). */
    async remove(ctx: Ctx, name: string) {
      requireSystem(ctx, 'removing runners');
      const r = await runnerNamed(name);
      if (r.kind === 'remote' && runnerHealthy(r, clock.now()) && r.state !== 'offline') throw new ConflictError(`runner "${name}" is connected and ${r.state}`, { hint: 'Drain it and stop it first (`npx aws runner drain`).' });
      await db.transaction(async (tx) => {
        await repo.dropPlacementsOf(tx, r.id);
        await repo.deleteRunner(tx, r.id);
        await audit.record(tx, ctx, { tenantId: null, action: 'runner.removed', target: `runner:${r.id}`, details: { name, users: r.placed } });
      });
      return { name, removed: true, users: r.placed };
    },

    /** Where the user's runtime goes (sticky while its runner is healthy), with the lease's fence. */
    place: (owner: RuntimeOwner) => place(owner),
    /** Moves the user off `from` (a drain); null when no other runner has room. */
    async move(owner: RuntimeOwner, from: string) {
      try {
        return await place(owner, [from], true);
      } catch (err) {
        if (err instanceof UnavailableError) return null;
        throw err;
      }
    },
    /** The user's tenant if `runnerId` holds their lease under `fence` now. */
    async holds(runnerId: string, userId: string, fence: number): Promise<{ tenantId: string } | null> {
      const p = await repo.placement(db, userId);
      return p && p.runnerId === runnerId && p.fence === fence ? { tenantId: p.tenantId } : null;
    },
    placement: (userId: string) => repo.placement(db, userId),
    placementsOf: async (runnerId: string) => (await repo.placementsOf(db, runnerId)).map((p) => ({ userId: p.userId, fence: p.fence, tenantId: p.tenantId })),
    relayUrlOf: (runnerId: string) => repo.relayUrlOf(db, runnerId),
    anyRemote: () => repo.anyRemote(db),
  };
}

export type RunnersService = ReturnType<typeof createRunnersService>;
