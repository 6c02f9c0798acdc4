import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SpendingTurn } from '../../src/core/usage/spending.service.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';

/**
 * The spending service on the real databases: holds taken in a locked transaction against what is
 * recorded and what calls in flight hold, settled with the usage record in one transaction, released,
 * and forgotten once expired; a user whose roles set no limit is only recorded. Concurrent holds of one
 * user never add up past the limit (on PostgreSQL the advisory lock serialises them; the embedded
 * database runs one transaction at a time).
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
    expect(held).toMatchObject({ ok: true, cut: false, maxOutput: 6000 });
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
    // The process holding it died: after its expiry the hold no longer counts.
    now = new Date(now.getTime() + 31 * 60_000);
    expect(await holdsOf(limited)).toBe(0);
    expect(await spending().hold({ tenantId, userId: limited }, turnOf('session:a', 0.03), price)).toMatchObject({ ok: true });
    const { rows } = await t.opened.db.query(`select 1 from model_call_holds where user_id = $1 and expires_at <= $2`, [limited, now]);
    expect(rows).toEqual([]);
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

  it('a user without limits takes no hold, and their calls are still recorded', async () => {
    const held = await spending().hold({ tenantId, userId: free }, null, price);
    expect(held).toEqual({ ok: true, holdId: null, maxOutput: 6000, cut: false });
    await spending().settle(null, record(free, 0.5));
    const { rows } = await t.opened.db.query<{ cost: string }>(`select cost_usd::text as cost from usage_records where user_id = $1`, [free]);
    expect(rows.map((r) => Number(r.cost))).toEqual([0.5]);
    expect(await spending().monthlyRoom(tenantId, free)).toBeNull();
    expect(await spending().monthlyRoom(tenantId, limited)).toBeCloseTo(0.97, 8);
  });
});
