import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemCtx, type Ctx } from '../../src/kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from '../../src/kernel/errors.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { RUNNER_REVOKED_CHANNEL } from '../../src/core/runners/runner-fleet.js';
import { runnerTokenHash } from '../../src/core/runners/runner-fns.js';
import type { RunnerInfo } from '../../src/core/runtime/host/runner-protocol.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The runner registry (issue 26) on the real database: runner tokens, runners registering and
 * heartbeating, lost runners, and placements as leases with a fence. The channel itself (runner-fleet) is
 * not involved: the service is called as the fleet calls it.
 */
describe(`runner registry and placement (${DB_MODE})`, () => {
  let t: Awaited<ReturnType<typeof openTestCore>>;
  const ctx: Ctx = systemCtx(silentLogger);
  const users: Array<{ tenantId: string; userId: string }> = [];
  let other: { tenantId: string; ownerId: string };
  const svc = () => t.opened.core.runners;
  const db = () => t.opened.db;
  const info = (name: string, o: Partial<RunnerInfo> = {}): RunnerInfo & { serveId: string; relayUrl: string | null } => ({
    name,
    address: '10.0.0.9',
    capacity: 10,
    labels: { zone: 'a' },
    version: '0.1.0',
    sharedStorage: false,
    serveId: 'serve-1',
    relayUrl: 'http://10.0.0.1:8080',
    ...o,
  });
  /** A token and a registered runner with these figures. */
  const runner = async (name: string, o: Partial<RunnerInfo> & { resident?: number } = {}) => {
    const tok = await svc().createToken(ctx, { name: `tok-${name}` });
    const { tokenId } = await svc().authenticate(tok.token);
    const r = await svc().register(tokenId, info(name, o));
    if (o.resident) await svc().heartbeat(r.id, { resident: o.resident, busy: 0, capacity: r.capacity });
    return { ...r, token: tok.token, tokenId };
  };
  /** Makes the runner's last heartbeat `ms` old (by the database's clock). */
  const age = (id: string, ms: number) => db().query(`update runners set heartbeat_at = now() - make_interval(secs => $2::float8 / 1000) where id = $1`, [id, ms]);
  /** Audit entries of an action (on one target: entries of earlier tests stay). */
  const audits = async (action: string, target?: string) =>
    (await db().query(`select actor, target, details from audit_log where action = $1 and ($2::text is null or target = $2) order by ts`, [action, target ?? null])).rows;

  beforeAll(async () => {
    t = await openTestCore();
    const acme = await t.opened.core.tenants.seedTenant(ctx, { name: 'acme', slug: 'acme', ownerEmail: 'owner@acme.example' });
    for (let i = 0; i < 40; i++) {
      const { rows } = await db().query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $2) returning id`, [acme.tenant.id, `u${i}`, `u${i}@acme.example`]);
      users.push({ tenantId: acme.tenant.id, userId: rows[0].id });
    }
    const beta = await t.opened.core.tenants.seedTenant(ctx, { name: 'beta', slug: 'beta', ownerEmail: 'owner@beta.example' });
    other = { tenantId: beta.tenant.id, ownerId: beta.owner.id };
  });
  afterAll(() => t?.close());
  // Runners are appliance-wide: each test starts from none.
  beforeEach(async () => {
    await db().query(`delete from runtime_placements`);
    await db().query(`delete from runners`);
    await db().query(`delete from runner_tokens`);
  });

  describe('runner tokens', () => {
    it('a token is shown once, stored as its hash, audited; names are unique among live tokens', async () => {
      const created = await svc().createToken(ctx, { name: 'runner-2' });
      expect(created.token).toMatch(/^agwr_[A-Za-z0-9_-]{43}$/);
      const { rows } = await db().query(`select token_hash, created_by from runner_tokens where id = $1`, [created.id]);
      expect(rows[0]).toEqual({ token_hash: runnerTokenHash(created.token), created_by: 'system:cli' });
      const dump = JSON.stringify((await db().query(`select * from runner_tokens`)).rows);
      expect(dump).not.toContain(created.token);
      expect(await audits('runner.token_created', `runner_token:${created.id}`)).toEqual([expect.objectContaining({ actor: 'system:cli', target: `runner_token:${created.id}`, details: expect.objectContaining({ name: 'runner-2' }) })]);

      await expect(svc().createToken(ctx, { name: 'runner-2' })).rejects.toBeInstanceOf(ConflictError);
      await expect(svc().createToken(ctx, { name: 'Bad Name' })).rejects.toBeInstanceOf(ValidationError);
      const list = await svc().listTokens(ctx);
      expect(list).toEqual([expect.objectContaining({ id: created.id, name: 'runner-2', lastUsedAt: null, revokedAt: null, revoked: false, runners: [] })]);
      expect(JSON.stringify(list)).not.toMatch(/agwr_|token_?hash/i);
    });

    it('authenticates a live token (last use recorded), refuses unknown and revoked ones alike', async () => {
      const created = await svc().createToken(ctx, { name: 'r' });
      const a = await svc().authenticate(created.token);
      expect(a).toEqual({ tokenId: created.id, tokenHash: runnerTokenHash(created.token) });
      expect((await svc().listTokens(ctx))[0].lastUsedAt).toBeInstanceOf(Date);
      await expect(svc().authenticate(`agwr_${'A'.repeat(43)}`)).rejects.toBeInstanceOf(UnauthenticatedError);
      await expect(svc().authenticate('not a token')).rejects.toBeInstanceOf(UnauthenticatedError);
      await expect(svc().authenticate(created.token.slice(0, -1) + (created.token.endsWith('A') ? 'B' : 'A'))).rejects.toBeInstanceOf(UnauthenticatedError);
    });

    it('revoking (by name or id) puts its runners offline, tells every process after commit, and refuses the token', async () => {
      const seen: unknown[] = [];
      const off = await t.opened.core.bus.subscribe(RUNNER_REVOKED_CHANNEL, (p) => seen.push(p));
      try {
        const r1 = await runner('r1');
        const r2 = await runner('r2');
        await svc().place(users[0]);
        const revoked = await svc().revokeToken(ctx, 'tok-r1');
        expect(revoked).toMatchObject({ id: r1.tokenId, name: 'tok-r1', already: false, runners: ['r1'] });
        await expect.poll(() => seen, { timeout: 10_000 }).toEqual([{ tokenId: r1.tokenId }]);
        await expect(svc().authenticate(r1.token)).rejects.toBeInstanceOf(UnauthenticatedError);
        expect(await svc().runnerOf(r1.tokenId, 'r1')).toBeNull();
        const list = await svc().list(ctx);
        expect(list.find((x) => x.name === 'r1')).toMatchObject({ state: 'offline', healthy: false, connected: false });
        expect(list.find((x) => x.name === 'r2')).toMatchObject({ state: 'active', healthy: true, connected: true });
        expect(await audits('runner.token_revoked', `runner_token:${r1.tokenId}`)).toEqual([expect.objectContaining({ target: `runner_token:${r1.tokenId}`, details: expect.objectContaining({ runners: ['r1'] }) })]);

        // Again, by id: nothing more happens.
        expect(await svc().revokeToken(ctx, r1.tokenId)).toMatchObject({ already: true });
        expect(await audits('runner.token_revoked', `runner_token:${r1.tokenId}`)).toHaveLength(1);
        // The name is free again for a new token.
        await expect(svc().createToken(ctx, { name: 'tok-r1' })).resolves.toMatchObject({ name: 'tok-r1' });
        await expect(svc().revokeToken(ctx, 'nope')).rejects.toBeInstanceOf(NotFoundError);
        expect(await svc().authenticate(r2.token)).toMatchObject({ tokenId: r2.tokenId });
      } finally {
        await off();
      }
    });

    it('tokens are the CLI\'s; runners are the operator\'s: a tenant\'s owner gets 403 (no operator configured here)', async () => {
      const owner: Ctx = {
        tenantId: other.tenantId,
        actor: { kind: 'user', userId: other.ownerId, tenantId: other.tenantId, roles: ['owner'], permissions: systemRolePermissions('owner'), via: 'token' },
        requestId: 'r',
        log: silentLogger,
        channel: 'web',
      };
      await expect(svc().createToken(owner, { name: 'x' })).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().listTokens(owner)).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().revokeToken(owner, 'x')).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().list(owner)).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().drain(owner, 'x')).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().resume(owner, 'x')).rejects.toBeInstanceOf(ForbiddenError);
      await expect(svc().remove(owner, 'x')).rejects.toBeInstanceOf(ForbiddenError);
    });
  });

  describe('runners', () => {
    it('register, heartbeat and list: figures, labels, version; a name held by another token\'s healthy runner is refused', async () => {
      const r1 = await runner('r1', { capacity: 8, labels: { zone: 'b', gpu: 'no' }, version: '1.2.3' });
      expect(r1).toMatchObject({ name: 'r1', kind: 'remote', state: 'active', capacity: 8, labels: { zone: 'b', gpu: 'no' }, version: '1.2.3', serveId: 'serve-1' });
      expect(await svc().heartbeat(r1.id, { resident: 3, busy: 1, capacity: 9 })).toEqual({ state: 'active', sharedStorage: false });
      const [row] = await svc().list(ctx);
      expect(row).toMatchObject({ name: 'r1', state: 'active', healthy: true, capacity: 9, resident: 3, busy: 1, users: 0, version: '1.2.3', address: '10.0.0.9', sharedStorage: false, connected: true });
      expect(row.heartbeat).toMatch(/^\d+s ago$/);
      expect(row.heartbeatAgeMs).toBeLessThan(10_000);
      expect(await audits('runner.registered', `runner:${r1.id}`)).toHaveLength(1);

      // Another token, same name, while r1 is healthy: refused. Once r1 is stale, the name can be taken.
      const t2 = await svc().createToken(ctx, { name: 'other' });
      await expect(svc().register(t2.id, info('r1'))).rejects.toBeInstanceOf(ConflictError);
      await age(r1.id, 60_000);
      const taken = await svc().register(t2.id, info('r1'));
      expect(taken).toMatchObject({ id: r1.id, tokenId: t2.id, state: 'active' });
      expect(await svc().runnerOf(r1.tokenId, 'r1')).toBeNull();
      expect(await svc().runnerOf(t2.id, 'r1')).toEqual({ id: r1.id, kind: 'remote' });

      await expect(svc().register(t2.id, info('Not Valid'))).rejects.toBeInstanceOf(ValidationError);
      await expect(svc().register(t2.id, info('r9', { capacity: -1 }))).rejects.toBeInstanceOf(ValidationError);
      // The channel closed on another serve than the one holding it now: nothing changes.
      await svc().disconnected(r1.id, 'serve-2');
      expect((await svc().list(ctx))[0].connected).toBe(true);
      await svc().disconnected(r1.id, 'serve-1');
      expect((await svc().list(ctx))[0].connected).toBe(false);
    });

    it('a runner silent past the heartbeat timeout is marked lost once, with its users (audited); a heartbeat revives it', async () => {
      const r1 = await runner('r1');
      const r2 = await runner('r2', { resident: 5 });
      const p = await svc().place(users[0]);
      expect(p.runnerId).toBe(r1.id);
      expect(await svc().markLost()).toEqual([]);
      await age(r1.id, 31_000);
      const lost = await svc().markLost();
      expect(lost).toEqual([{ id: r1.id, name: 'r1', users: [users[0]] }]);
      expect(await svc().markLost()).toEqual([]);
      expect(await audits('runner.lost', `runner:${r1.id}`)).toEqual([expect.objectContaining({ actor: 'system:runners', details: expect.objectContaining({ name: 'r1', users: 1 }) })]);
      const list = await svc().list(ctx);
      expect(list.find((x) => x.name === 'r1')).toMatchObject({ state: 'lost', healthy: false, connected: false });
      expect(list.find((x) => x.name === 'r2')).toMatchObject({ state: 'active' });
      // Judged at a later time, r2 too.
      expect((await svc().markLost(new Date(Date.now() + 60_000))).map((r) => r.name)).toEqual(['r2']);
      expect(await svc().heartbeat(r1.id, { resident: 0, busy: 0, capacity: 10 })).toMatchObject({ state: 'active' });
    });

    it('drain (audited, returns the users placed), resume, and remove only what is gone', async () => {
      const r1 = await runner('r1');
      await runner('r2', { resident: 5 });
      await svc().place(users[0]);
      await svc().place(users[1]);
      const d = await svc().drain(ctx, 'r1');
      expect(d).toMatchObject({ name: 'r1', state: 'draining', users: 2 });
      expect(await audits('runner.drain', `runner:${r1.id}`)).toEqual([expect.objectContaining({ actor: 'system:cli', details: expect.objectContaining({ name: 'r1', users: 2 }) })]);
      // Reconnecting does not end a drain.
      await svc().register(r1.tokenId, info('r1'));
      expect((await svc().list(ctx)).find((x) => x.name === 'r1')?.state).toBe('draining');
      expect(await svc().resume(ctx, 'r1')).toMatchObject({ state: 'active' });
      expect(await audits('runner.resume', `runner:${r1.id}`)).toHaveLength(1);
      await expect(svc().drain(ctx, 'nope')).rejects.toBeInstanceOf(NotFoundError);

      await expect(svc().remove(ctx, 'r1')).rejects.toBeInstanceOf(ConflictError);
      await age(r1.id, 60_000);
      await svc().markLost();
      await expect(svc().drain(ctx, 'r1')).rejects.toBeInstanceOf(ConflictError);
      expect(await svc().remove(ctx, 'r1')).toEqual({ name: 'r1', removed: true, users: 2 });
      expect(await svc().current(users[0].userId)).toBeNull();
      expect((await svc().list(ctx)).map((x) => x.name)).toEqual(['r2']);
      expect(await audits('runner.removed', `runner:${r1.id}`)).toHaveLength(1);
    });
  });

  describe('placement', () => {
    it('places on the least loaded runner by share of capacity and keeps the user there (sticky)', async () => {
      const big = await runner('big', { capacity: 40, resident: 8 });
      await runner('small', { capacity: 10, resident: 3 });
      const p = await svc().place(users[0]);
      expect(p).toMatchObject({ runnerId: big.id, runnerName: 'big', kind: 'remote', storage: 'local', moved: true, reason: 'new', tenantId: users[0].tenantId, userId: users[0].userId });
      expect(p.previousRunnerId).toBeUndefined();
      // The load changes; the user stays (their workspace is there).
      await svc().heartbeat(big.id, { resident: 39, busy: 0, capacity: 40 });
      const again = await svc().place(users[0]);
      expect(again).toMatchObject({ runnerId: big.id, fence: p.fence, moved: false });
      expect(again.reason).toBeUndefined();
      expect(await svc().current(users[0].userId)).toMatchObject({ runnerId: big.id, fence: p.fence });
      expect(await svc().holds(big.id, users[0].userId, p.fence)).toEqual({ tenantId: users[0].tenantId });
      expect(await svc().placementsOf(big.id)).toEqual([{ userId: users[0].userId, fence: p.fence, tenantId: users[0].tenantId, storage: 'local' }]);
    });

    it('arrivals at once spread by capacity share, never past a runner\'s room; none with room: runner_unavailable', async () => {
      const rs = [await runner('a', { capacity: 4 }), await runner('b', { capacity: 8 }), await runner('c', { capacity: 12 })];
      const placed = await Promise.all(users.slice(0, 24).map((u) => svc().place(u)));
      const count = (id: string) => placed.filter((p) => p.runnerId === id).length;
      expect(rs.map((r) => count(r.id))).toEqual([4, 8, 12]);
      expect(new Set(placed.map((p) => p.fence)).size).toBe(24);
      const err = await svc().place(users[24]).catch((e) => e);
      expect(err).toBeInstanceOf(UnavailableError);
      expect(err.code).toBe('runner_unavailable');
    });

    it('a lost runner\'s user is placed again under a higher fence; the old runner no longer holds the lease', async () => {
      const r1 = await runner('r1');
      const r2 = await runner('r2', { resident: 5, sharedStorage: true });
      const first = await svc().place(users[0]);
      expect(first.runnerId).toBe(r1.id);
      await age(r1.id, 31_000);
      // Stale but not yet marked: not kept either.
      const second = await svc().place(users[0]);
      expect(second).toMatchObject({ runnerId: r2.id, storage: 'shared', moved: true, reason: 'lost', previousRunnerId: r1.id, previousStorage: 'local' });
      expect(second.fence).toBeGreaterThan(first.fence);
      expect(await svc().holds(r1.id, users[0].userId, first.fence)).toBeNull();
      expect(await svc().holds(r2.id, users[0].userId, first.fence)).toBeNull();
      expect(await svc().holds(r2.id, users[0].userId, second.fence)).toEqual({ tenantId: users[0].tenantId });
      // r1 comes back: its former user stays on r2.
      await svc().heartbeat(r1.id, { resident: 0, busy: 0, capacity: 10 });
      expect(await svc().place(users[0])).toMatchObject({ runnerId: r2.id, fence: second.fence, moved: false });
      // An offline runner (its token revoked) loses its users the same way.
      await svc().revokeToken(ctx, 'tok-r2');
      expect(await svc().place(users[0])).toMatchObject({ runnerId: r1.id, reason: 'offline', previousRunnerId: r2.id, previousStorage: 'shared' });
    });

    it('asked for shared storage, only a runner mounting it is chosen', async () => {
      await runner('plain');
      const shared = await runner('shared', { resident: 9, sharedStorage: true });
      expect(await svc().place(users[0], { needShared: true })).toMatchObject({ runnerId: shared.id, storage: 'shared' });
    });

    it('a draining runner keeps its users until they are moved, and takes no new ones', async () => {
      const r1 = await runner('r1');
      const r2 = await runner('r2', { resident: 5 });
      const p0 = await svc().place(users[0]);
      expect(p0.runnerId).toBe(r1.id);
      await svc().drain(ctx, 'r1');
      expect(await svc().place(users[0])).toMatchObject({ runnerId: r1.id, fence: p0.fence, moved: false });
      expect(await svc().place(users[1])).toMatchObject({ runnerId: r2.id });
      // Where the drain would take them, asked before their files are copied: the placement does not move.
      expect(await svc().moveTarget(users[0], r1.id)).toEqual({ runnerId: r2.id, storage: 'local' });
      expect(await svc().holds(r1.id, users[0].userId, p0.fence)).toEqual({ tenantId: users[0].tenantId });
      expect(await svc().moveTarget(users[0], r2.id)).toBeNull();
      const moved = await svc().move(users[0], r1.id);
      expect(moved).toMatchObject({ runnerId: r2.id, moved: true, reason: 'draining', previousRunnerId: r1.id });
      expect(moved!.fence).toBeGreaterThan(p0.fence);
      expect(await svc().holds(r1.id, users[0].userId, p0.fence)).toBeNull();
      // Not on r1 any more: nothing to move.
      expect(await svc().move(users[0], r1.id)).toBeNull();
      // Nowhere to go: null, and the user stays.
      await svc().drain(ctx, 'r2');
      const p2 = await svc().place(users[2]).catch((e) => e);
      expect(p2).toBeInstanceOf(UnavailableError);
      expect(await svc().moveTarget(users[1], r2.id)).toBeNull();
      expect(await svc().move(users[1], r2.id)).toBeNull();
      expect(await svc().current(users[1].userId)).toMatchObject({ runnerId: r2.id });
      // Moved to a named runner.
      await svc().resume(ctx, 'r1');
      expect(await svc().move(users[1], r2.id, r1.id)).toMatchObject({ runnerId: r1.id });
    });

    it('a placement in another tenant\'s name is not reused: the user is placed again', async () => {
      await runner('r1');
      const p = await svc().place(users[0]);
      const q = await svc().place({ tenantId: other.tenantId, userId: users[0].userId });
      expect(q).toMatchObject({ tenantId: other.tenantId, reason: 'new', moved: true });
      expect(q.fence).toBeGreaterThan(p.fence);
    });

    it('a user deleted takes their placement with them', async () => {
      await runner('r1');
      const { rows } = await db().query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'gone', 'gone@acme.example', 'gone') returning id`, [users[0].tenantId]);
      await svc().place({ tenantId: users[0].tenantId, userId: rows[0].id });
      await db().query(`delete from users where id = $1`, [rows[0].id]);
      expect(await svc().current(rows[0].id)).toBeNull();
    });
  });
});
