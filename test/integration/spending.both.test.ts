import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processIdentity } from '../../src/lib/process-state.js';
import type { SpendingTurn } from '../../src/core/usage/spending.service.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';

/**
 * The spending service on the real databases: holds taken in a locked transaction against what is
 * recorded and what calls in flight hold, settled with the usage record in one transaction, released,
 * and no longer counted once expired; a user whose roles set no limit holds a row too (no lock), so that
 * a call whose process dies before it settles is recorded at its estimate when the service comes back.
 * Concurrent holds of one user never add up past the limit (on PostgreSQL the advisory lock serialises
 * them; the embedded database runs one transaction at a time).
 */
describe('spending: holds against cost limits', () => {
  let t: TestApp;
  let tenantId: string;
  let limited: string;
  let free: string;
  let now = new Date('2026-11-26T12:00:00Z');
  const clock = { now: () => now };

  beforeAll(async () => {
    t = await startTestApp({ clock });
    const s = await seedTenant(t, 'spend', [{ handle: 'lim', roles: [] }, { handle: 'free', roles: ['member'] }]);
    tenantId = s.tenantId;
    limited = s.ids.lim;
    free = s.ids.free;
    const owner = await signToken(t, { sub: s.ids.owner, tid: tenantId, roles: ['owner'] });
    const role = await api(t, 'POST', '/v1/admin/roles', { token: owner, body: { name: 'capped', permissions: { agents: { create: true }, cost: { monthly_limit_usd: 1, per_request_limit_usd: 0.1 } } } });
    expect(role.status, role.text).toBe(201);
    expect((await api(t, 'POST', `/v1/admin/users/${limited}/roles`, { token: owner, body: { roleId: role.json.role.id } })).status).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
  });

  const spending = () => t.opened.core.spending;
  const holdsOf = async (userId: string) => Number((await t.opened.db.query<{ n: string }>(`select coalesce(sum(amount_usd), 0)::text as n from model_call_holds where user_id = $1 and expires_at > $2`, [userId, now])).rows[0].n);
  const turnOf = (key: string, recorded = 0): SpendingTurn => ({ sessionId: crypto.randomUUID(), channel: 'web', budgetKey: key, recorded: async () => recorded });
  const record = (userId: string, costUsd: number) => ({ tenantId, userId, sessionId: null, model: 'm', provider: 'p', tokens: { input: 1, output: 1, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd, channel: 'agent', at: now });
  // Worst case $0.08 per call (no cut needed within $0.1).
  const price = { inputUsd: 0.02, outputUsdPerToken: 0.00001, maxOutput: 6000 };

  it('holds a call\'s worst case, records it and drops the hold in one step, and forgets an expired hold', async () => {
    const turn = turnOf('session:a');
    const held = await spending().hold({ tenantId, userId: limited }, turn, price);
    expect(held).toMatchObject({ ok: true, cut: false, maxOutput: 6000, limited: true });
    if (!held.ok) return;
    expect(await holdsOf(limited)).toBeCloseTo(0.08, 8);
    // A second call of the same turn finds $0.02 left of $0.1: cut to half of that.
    const second = await spending().hold({ tenantId, userId: limited }, turn, price);
    expect(second).toMatchObject({ ok: false, limit: 'per_request', limitUsd: 0.1 });
    await spending().settle(held.holdId, record(limited, 0.03));
    expect(await holdsOf(limited)).toBe(0);
    const third = await spending().hold({ tenantId, userId: limited }, turnOf('session:a', 0.03), price);
    expect(third).toMatchObject({ ok: true, cut: true });
    if (!third.ok) return;
    expect(third.maxOutput).toBe(Math.floor((0.035 - 0.02) / 0.00001));
    // A call that never settled: after its expiry its hold no longer counts (the row stays until it is recorded).
    now = new Date(now.getTime() + 31 * 60_000);
    expect(await holdsOf(limited)).toBe(0);
    expect(await spending().hold({ tenantId, userId: limited }, turnOf('session:a', 0.03), price)).toMatchObject({ ok: true });
  });

  it('calls of many turns at once never hold more than the month leaves', async () => {
    await t.opened.db.query(`delete from model_call_holds`);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => spending().hold({ tenantId, userId: limited }, turnOf(`session:m${i}`), price)));
    const ok = results.filter((r) => r.ok);
    expect(ok.length).toBeGreaterThan(0);
    expect(results.some((r) => !r.ok && r.limit === 'monthly')).toBe(true);
    // $0.03 recorded this month so far: the holds fit in the $0.97 left.
    expect(await holdsOf(limited)).toBeLessThanOrEqual(0.97 + 1e-9);
    for (const r of ok) if (r.ok) await spending().release(tenantId, r.holdId);
    expect(await holdsOf(limited)).toBe(0);
  });

  it('a user without limits is held back by nothing, but their call holds a row until it is recorded', async () => {
    const held = await spending().hold({ tenantId, userId: free }, null, price, { provider: 'p', model: 'm', inputTokens: 2000 });
    expect(held).toEqual({ ok: true, holdId: expect.any(String), maxOutput: 6000, cut: false, limited: false });
    if (!held.ok) return;
    expect(await holdsOf(free)).toBeCloseTo(0.08, 8);
    await spending().settle(held.holdId, record(free, 0.5));
    expect(await holdsOf(free)).toBe(0);
    const { rows } = await t.opened.db.query<{ cost: string }>(`select cost_usd::text as cost from usage_records where user_id = $1`, [free]);
    expect(rows.map((r) => Number(r.cost))).toEqual([0.5]);
    expect(await spending().monthlyRoom(tenantId, free)).toBeNull();
    expect(await spending().monthlyRoom(tenantId, limited)).toBeCloseTo(0.97, 8);
  });

  it('a call whose process died before it settled is recorded at its estimate when the service comes back, once; a live process\'s is left alone', async () => {
    await t.opened.db.query(`delete from model_call_holds`);
    const sessionId = (await t.opened.db.query<{ id: string }>(
      `insert into agent_sessions (tenant_id, owner_id, title, directory, channel) values ($1, $2, 'orphans', '/w', 'web') returning id`, [tenantId, free],
    )).rows[0].id;
    const turn: SpendingTurn = { sessionId, channel: 'web', budgetKey: `session:${sessionId}`, recorded: async () => 0 };
    const call = { provider: 'scripted', model: 'fake-model', inputTokens: 1500 };
    const dead = await spending().hold({ tenantId, userId: free }, turn, price, call);
    const live = await spending().hold({ tenantId, userId: free }, turn, price, call);
    const elsewhere = await spending().hold({ tenantId, userId: free }, turn, price, call);
    if (!dead.ok || !live.ok || !elsewhere.ok) throw new Error('not held');
    // This test process holds them all; one is made a process of this host that has exited (its start time
    // no longer matches this pid), one another machine's.
    const me = processIdentity(hostname());
    const [host, boot, ns, pid, ticks] = me.split('/');
    await t.opened.db.query(`update model_call_holds set holder = $2, created_at = $3 where id = $1`, [dead.holdId, [host, boot, ns, pid, String(Number(ticks) + 7)].join('/'), new Date('2026-10-31T23:59:00Z')]);
    await t.opened.db.query(`update model_call_holds set holder = $2 where id = $1`, [elsewhere.holdId, `another-host/${boot}/${ns}/${pid}/${ticks}`]);
    const before = await t.opened.db.query(`select count(*)::int as n from usage_records where user_id = $1`, [free]);

    expect(await spending().settleOrphans()).toBe(1);
    // Run again (another serve coming back at the same moment): nothing is recorded twice.
    expect(await spending().settleOrphans()).toBe(0);
    const recorded = await t.opened.db.query(
      `select session_id as "sessionId", model, provider, tokens_input::int as input, tokens_output::int as output, cost_usd::float8 as cost, channel, estimated, message_id as "messageId", created_at as at
         from usage_records where user_id = $1 and estimated`,
      [free],
    );
    expect(recorded.rows).toHaveLength(1);
    expect(recorded.rows[0]).toEqual({
      sessionId, model: 'fake-model', provider: 'scripted', input: 1500, output: 6000, cost: expect.closeTo(0.08, 8), channel: 'web', estimated: true,
      messageId: `${tenantId}:hold:${dead.holdId}`, at: new Date('2026-10-31T23:59:00Z'),
    });
    expect((await t.opened.db.query(`select count(*)::int as n from usage_records where user_id = $1`, [free])).rows[0].n).toBe(before.rows[0].n + 1);
    const left = (await t.opened.db.query<{ id: string }>(`select id from model_call_holds order by id`)).rows.map((r) => r.id).sort();
    expect(left).toEqual([live.holdId, elsewhere.holdId].sort());

    // Another machine's call: an hour after its hold stopped counting, it cannot still run.
    now = new Date(now.getTime() + 31 * 60_000 + 61 * 60_000);
    expect(await spending().settleOrphans()).toBe(1);
    expect((await t.opened.db.query(`select id from model_call_holds`)).rows).toEqual([{ id: live.holdId }]);
    // The embedded database's one serve coming back: every other process's call was left behind.
    await t.opened.db.query(`update model_call_holds set holder = 'elsewhere/x/y/1/2' where id = $1`, [live.holdId]);
    expect(await spending().settleOrphans({ everyOther: true })).toBe(1);

    // A call still settling after its hold was recorded as left behind is not recorded a second time.
    const late = await spending().hold({ tenantId, userId: free }, turn, price, call);
    if (!late.ok) throw new Error('not held');
    await t.opened.db.query(`update model_call_holds set holder = 'elsewhere/x/y/1/2' where id = $1`, [late.holdId]);
    expect(await spending().settleOrphans({ everyOther: true })).toBe(1);
    const n = (await t.opened.db.query(`select count(*)::int as n from usage_records where user_id = $1`, [free])).rows[0].n;
    await spending().settle(late.holdId, record(free, 0.01));
    expect((await t.opened.db.query(`select count(*)::int as n from usage_records where user_id = $1`, [free])).rows[0].n).toBe(n);
  });
});
