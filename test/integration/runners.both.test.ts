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
 * The runner registry on the real database: runner tokens, runners registering and
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
    it('register, heartbeat and list: figures, labels, version; a name held by another token is refused, healthy or not', async () => {
      const r1 = await runner('r1', { capacity: 8, labels: { zone: 'b', gpu: 'no' }, version: '1.2.3' });
      expect(r1).toMatchObject({ name: 'r1', kind: 'remote', state: 'active', capacity: 8, labels: { zone: 'b', gpu: 'no' }, version: '1.2.3', serveId: 'serve-1' });
      expect(await svc().heartbeat(r1.id, { resident: 3, busy: 1, capacity: 9 })).toEqual({ state: 'active', sharedStorage: false, capacity: 9 });
      const [row] = await svc().list(ctx);
      expect(row).toMatchObject({ name: 'r1', state: 'active', healthy: true, capacity: 9, resident: 3, busy: 1, users: 0, version: '1.2.3', address: '10.0.0.9', sharedStorage: false, connected: true });
      expect(row.heartbeat).toMatch(/^\d+s ago$/);
      expect(row.heartbeatAgeMs).toBeLessThan(10_000);
      expect(await audits('runner.registered', `runner:${r1.id}`)).toHaveLength(1);

      // Another token, same name: refused while r1 is healthy, and still once it is stale (the name is r1's
      // token's until an operator removes r1).
      const t2 = await svc().createToken(ctx, { name: 'other' });
      await expect(svc().register(t2.id, info('r1'))).rejects.toBeInstanceOf(ConflictError);
      await age(r1.id, 60_000);
      await expect(svc().register(t2.id, info('r1'))).rejects.toMatchObject({ code: 'runner_name_taken' });
      expect(await svc().runnerOf(r1.tokenId, 'r1')).toEqual({ id: r1.id, kind: 'remote' });
      expect(await svc().runnerOf(t2.id, 'r1')).toBeNull();
      expect((await svc().register(r1.tokenId, info('r1'))).id).toBe(r1.id);

      await expect(svc().register(t2.id, info('Not Valid'))).rejects.toBeInstanceOf(ValidationError);
      await expect(svc().register(t2.id, info('r9', { capacity: -1 }))).rejects.toBeInstanceOf(ValidationError);
      // The channel closed on another serve than the one holding it now: nothing changes.
      await svc().disconnected(r1.id, 'serve-2');
      expect((await svc().list(ctx))[0].connected).toBe(true);
      await svc().disconnected(r1.id, 'serve-1');
      expect((await svc().list(ctx))[0].connected).toBe(false);
    });

    it('a second token taking over a lost runner\'s name gets no placement, no fence, no credential for its users; the real runner is not refused when it returns', async () => {
      const r1 = await runner('r1');
      const p0 = await svc().place(users[0]);
      const p1 = await svc().place({ tenantId: other.tenantId, userId: other.ownerId });
      expect([p0.runnerId, p1.runnerId]).toEqual([r1.id, r1.id]);
      await age(r1.id, 60_000);
      expect((await svc().markLost()).map((r) => r.name)).toEqual(['r1']);

      // Any other runner token, under r1's name: refused, naming the name and what the operator can do.
      const intruder = await svc().createToken(ctx, { name: 'intruder' });
      const err = await svc().register(intruder.id, info('r1', { capacity: 1000 })).catch((e) => e);
      expect(err).toBeInstanceOf(ConflictError);
      expect(err.message).toMatch(/"r1" belongs to another runner token/);
      expect(err.hint).toMatch(/runner remove r1/);
      // Its requests act as no runner (the fleet answers them 401), so no lease, fence or credential of r1's users.
      expect(await svc().runnerOf(intruder.id, 'r1')).toBeNull();
      expect(await svc().placementsOf(r1.id)).toEqual([
        expect.objectContaining({ userId: users[0].userId, fence: p0.fence }),
        expect.objectContaining({ userId: other.ownerId, fence: p1.fence }),
      ]);
      const row = (await db().query(`select token_id, capacity from runners where id = $1`, [r1.id])).rows[0];
      expect(row).toEqual({ token_id: r1.tokenId, capacity: 10 });
      // Audited once (it dials again and again), naming the token.
      await svc().register(intruder.id, info('r1')).catch(() => {});
      expect(await audits('runner.refused', `runner:${r1.id}`)).toEqual([
        expect.objectContaining({ actor: 'system:runners', details: expect.objectContaining({ name: 'r1', token: { id: intruder.id, name: 'intruder' }, reason: 'name_taken', holderState: 'lost' }) }),
      ]);
      // Under a name of its own it is a new runner with nothing placed on it.
      const own = await svc().register(intruder.id, info('intruder-1'));
      expect(own.id).not.toBe(r1.id);
      expect(await svc().placementsOf(own.id)).toEqual([]);

      // The real runner comes back: taken again, with its row, and its users' leases until they are placed again.
      const back = await svc().register(r1.tokenId, info('r1'));
      expect(back).toMatchObject({ id: r1.id, tokenId: r1.tokenId, state: 'active' });
      expect(await svc().runnerOf(r1.tokenId, 'r1')).toEqual({ id: r1.id, kind: 'remote' });
      expect(await svc().holds(r1.id, users[0].userId, p0.fence)).toEqual({ tenantId: users[0].tenantId });
      expect(await audits('runner.registered', `runner:${r1.id}`)).toEqual([
        expect.objectContaining({ details: expect.objectContaining({ token: { id: r1.tokenId, name: 'tok-r1' } }) }),
        expect.objectContaining({ details: expect.objectContaining({ token: { id: r1.tokenId, name: 'tok-r1' }, state: 'active' }) }),
      ]);

      // Once an operator removes r1 (drained or lost), its name is free for another token, as a new runner.
      await age(r1.id, 60_000);
      await svc().markLost();
      await svc().remove(ctx, 'r1');
      const renamed = await svc().register(intruder.id, info('r1'));
      expect(renamed.id).not.toBe(r1.id);
      expect(await svc().placementsOf(renamed.id)).toEqual([]);
    });

    it('capacity counts up to the token\'s ceiling; a report over it, or a large change, is audited once', async () => {
      const capped = await svc().createToken(ctx, { name: 'tok-capped', maxCapacity: 5 });
      expect(capped.maxCapacity).toBe(5);
      expect((await svc().listTokens(ctx)).find((x) => x.name === 'tok-capped')).toMatchObject({ maxCapacity: 5 });
      await expect(svc().createToken(ctx, { name: 'tok-bad', maxCapacity: -1 })).rejects.toBeInstanceOf(ValidationError);
      expect((await svc().createToken(ctx, { name: 'tok-default' })).maxCapacity).toBe(100);
      const big = await svc().register(capped.id, info('big', { capacity: 5000 }));
      expect(big).toMatchObject({ capacity: 5, reportedCapacity: 5000, maxCapacity: 5 });
      const plain = await runner('plain', { capacity: 10 });
      // Heartbeats repeating the figure: counted at the ceiling, noted once.
      for (let i = 0; i < 3; i++) expect(await svc().heartbeat(big.id, { resident: 0, busy: 0, capacity: 5000 })).toMatchObject({ capacity: 5 });
      expect(await audits('runner.capacity', `runner:${big.id}`)).toEqual([expect.objectContaining({ actor: 'system:runners', details: expect.objectContaining({ name: 'big', reported: 5000, maxCapacity: 5, counted: 5, news: 'over_ceiling' }) })]);
      // Twelve arrivals: never more than five on it, whatever it says (uncapped, it would take them all).
      const placed = await Promise.all(users.slice(0, 12).map((u) => svc().place(u)));
      expect(placed.filter((p) => p.runnerId === big.id).length).toBeLessThanOrEqual(5);
      expect(placed.filter((p) => p.runnerId === plain.id).length).toBeGreaterThanOrEqual(7);
      const listed = (await svc().list(ctx)).find((r) => r.name === 'big');
      expect(listed).toMatchObject({ capacity: 5, reportedCapacity: 5000, maxCapacity: 5 });

      // A large change within the ceiling is news too (once an hour a runner).
      await svc().heartbeat(plain.id, { resident: 0, busy: 0, capacity: 40 });
      await svc().heartbeat(plain.id, { resident: 0, busy: 0, capacity: 90 });
      expect(await audits('runner.capacity', `runner:${plain.id}`)).toEqual([expect.objectContaining({ details: expect.objectContaining({ reported: 40, previous: 10, news: 'large_change' }) })]);

      // The operator raises the ceiling: counted at once, audited.
      const up = await svc().setTokenCapacity(ctx, 'tok-capped', 50);
      expect(up).toMatchObject({ maxCapacity: 50, previous: 5, runners: ['big'] });
      expect((await svc().list(ctx)).find((r) => r.name === 'big')).toMatchObject({ capacity: 50, reportedCapacity: 5000 });
      expect(await audits('runner.token_updated', `runner_token:${capped.id}`)).toHaveLength(1);
      await expect(svc().setTokenCapacity(ctx, 'nope', 5)).rejects.toBeInstanceOf(NotFoundError);
    });

    it('a runner silent past the heartbeat timeout is marked lost once, with its users (audited); a heartbeat revives it', async () => {
      const r1 = await runner('r1');
      await runner('r2', { resident: 5 });
      const p = await svc().place(users[0]);
      expect(p.runnerId).toBe(r1.id);
      expect(await svc().markLost()).toEqual([]);
      await age(r1.id, 31_000);
      const lost = await svc().markLost();
      expect(lost).toEqual([{ id: r1.id, name: 'r1', lostAt: expect.any(Date), users: [users[0]] }]);
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
      expect(await svc().placementsOf(big.id)).toEqual([{ userId: users[0].userId, fence: p.fence, tenantId: users[0].tenantId, storage: 'local', filesFence: p.fence }]);
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

    it('which copy of a user\'s files is current: kept where the files are, a new one elsewhere; a drain\'s move carries the copy it made', async () => {
      const a = await runner('a');
      const b = await runner('b', { resident: 5 });
      const s1 = await runner('s1', { resident: 8, sharedStorage: true });
      const s2 = await runner('s2', { resident: 9, sharedStorage: true });
      const u = users[0];
      const p0 = await svc().place(u);
      expect(p0).toMatchObject({ runnerId: a.id, filesFence: p0.fence, movedIntact: false });
      // Sticky: the same copy.
      expect(await svc().place(u)).toMatchObject({ fence: p0.fence, filesFence: p0.fence });
      // a is lost: b has none of the files, so a new copy starts there (what a has is not current any more).
      await age(a.id, 60_000);
      const p1 = await svc().place(u);
      expect(p1).toMatchObject({ runnerId: b.id, reason: 'lost', filesFence: p1.fence });
      expect(p1.fence).toBeGreaterThan(p0.fence);
      // a's copy is stale now: a, reporting it, is told to set it aside; b's is current (not reported as stale).
      expect(await svc().staleCopies(a.id, [{ userId: u.userId, filesFence: p0.fence }, { userId: users[1].userId, filesFence: 3 }, { userId: 'not-a-uuid', filesFence: 1 }])).toEqual([{ userId: u.userId, tenantId: u.tenantId, filesFence: p1.fence }]);
      expect(await svc().staleCopies(b.id, [{ userId: u.userId, filesFence: p1.fence }])).toEqual([]);

      // A drain of b to s1: the move takes the fence the copy was marked with, and carries that copy; told once.
      await svc().drain(ctx, 'b');
      const fence = await svc().reserveFence();
      expect(await svc().move(u, b.id, s1.id, { fence, expectFence: p1.fence - 1 })).toBeNull();
      const m = await svc().move(u, b.id, s1.id, { fence, expectFence: p1.fence });
      expect(m).toMatchObject({ runnerId: s1.id, fence, filesFence: fence, movedIntact: true, reason: 'draining', storage: 'shared' });
      expect(await svc().takeMovedIntact(u.userId, fence)).toBe(true);
      expect(await svc().takeMovedIntact(u.userId, fence)).toBe(false);
      expect(await svc().staleCopies(b.id, [{ userId: u.userId, filesFence: p1.fence }])).toEqual([{ userId: u.userId, tenantId: u.tenantId, filesFence: fence }]);
      // Between runners sharing the storage, the copy is the same files: kept, lost or drained alike, and not stale for s2.
      expect(await svc().staleCopies(s2.id, [{ userId: u.userId, filesFence: fence }])).toEqual([]);
      await age(s1.id, 60_000);
      const p2 = await svc().place(u);
      expect(p2).toMatchObject({ runnerId: s2.id, reason: 'lost', filesFence: fence });
      await svc().heartbeat(s1.id, { resident: 0, busy: 0, capacity: 10 });
      await svc().drain(ctx, 's2');
      const m2 = await svc().move(u, s2.id, s1.id, { fence: await svc().reserveFence(), expectFence: p2.fence });
      expect(m2).toMatchObject({ runnerId: s1.id, filesFence: fence, movedIntact: true });
    });

    it('a runner lost and back before its user was placed elsewhere keeps them, their lease and their copy', async () => {
      const x = await runner('x');
      const p0 = await svc().place(users[0]);
      await age(x.id, 60_000);
      await svc().markLost();
      await expect(svc().place(users[0])).rejects.toBeInstanceOf(UnavailableError);
      await svc().heartbeat(x.id, { resident: 0, busy: 0, capacity: 10 });
      expect(await svc().place(users[0])).toMatchObject({ runnerId: x.id, moved: false, fence: p0.fence, filesFence: p0.fence });
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
