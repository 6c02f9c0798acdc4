import { performance } from 'node:perf_hooks';
import type { Queryable } from '../../src/db/database.js';
import { createTurnsRepo } from '../../src/core/sessions/turns.repo.js';
import type { SpendingTurn } from '../../src/core/usage/spending.service.js';
import { median, percentile, report } from './bench-utils.js';
import { newSession, post, setUp } from './in-process-serve.js';

const CALLS = Number(process.env.BENCH_SPENDING_CALLS ?? 400);
const PARALLEL = 8;
const CALLS_PER_TURN = 25;

/**
 * What counting and capping a model call costs the gateway on PostgreSQL (in-process core, scratch
 * database with 20,000 usage records of the user this month): for a user whose roles set cost limits,
 * the hold before the call (a transaction: per-user lock, the month's and the turn's recorded spending,
 * the holds in flight, insert) and the settle after it (the usage record and the hold's removal, one
 * transaction); for a user without limits, the same two steps (no lock; a row held while the call runs,
 * so a call whose process dies is still recorded, dropped with the record in one transaction). Baseline
 * in the same run: what the gateway did per call before holds (the month's and the turn's spending read,
 * the usage record written). A new turn every CALLS_PER_TURN calls. Also PARALLEL calls of one user at once (they
 * queue on the user's lock). Target: a call's hold + settle ≤ 5 ms p95, against model calls that take
 * seconds.
 */
export async function spendingBench(): Promise<boolean> {
  const s = await setUp('spending');
  try {
    const { core, db } = s.opened;
    const role = await post(s, '/v1/admin/roles', { name: 'capped', permissions: { agents: { create: true }, cost: { monthly_limit_usd: 1_000_000, per_request_limit_usd: 1_000 } } });
    if (role.status !== 201) throw new Error(`role: ${JSON.stringify(role.json)}`);
    const user = async (handle: string, roleName: string) => {
      const { rows } = await db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, $2, $3) returning id`, [s.tenantId, handle, `${handle}@bench.example`]);
      await db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'bench' from roles where tenant_id = $1 and name = $3`, [s.tenantId, rows[0].id, roleName]);
      return rows[0].id;
    };
    const capped = await user('capped', 'capped');
    const free = await user('free', 'member');
    const sessionId = await newSession(s, 'spend');
    await db.query(`update agent_sessions set owner_id = $2 where id = $1`, [sessionId, capped]);
    // A month of use: 20,000 records of each user (what the month's sum reads through its index).
    for (const u of [capped, free]) {
      await db.query(
        `insert into usage_records (tenant_id, user_id, session_id, model, provider, tokens_input, tokens_output, cost_usd, channel, created_at)
         select $1, $2, $3, 'm', 'p', 1000, 100, 0.001, 'web', now() - (i || ' seconds')::interval from generate_series(1, 20000) i`,
        [s.tenantId, u, sessionId],
      );
    }
    await db.query('analyze usage_records');
    // The turn as the egress wiring makes one: its spending read by the turns repo.
    const turnsRepo = createTurnsRepo();
    const sessionsTurnSpent = (q: Queryable) => turnsRepo.turnSpent(q, s.tenantId, sessionId);
    const turn: SpendingTurn = { sessionId, channel: 'web', budgetKey: `session:${sessionId}`, recorded: sessionsTurnSpent };
    const price = { inputUsd: 0.02, outputUsdPerToken: 8e-6, maxOutput: 4096 };
    // What the gateway passes with every hold: what the call's record needs should its process die.
    const call = { provider: 'p', model: 'm', inputTokens: 1000 };
    const record = (userId: string) => ({ tenantId: s.tenantId, userId, sessionId, model: 'm', provider: 'p', tokens: { input: 1000, output: 100, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: 0.001, channel: 'web', messageId: crypto.randomUUID() });
    const monthStart = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1));

    const time = async (fn: () => Promise<unknown>) => {
      const t0 = performance.now();
      await fn();
      return performance.now() - t0;
    };
    // A turn makes a few dozen calls: a new turn every CALLS_PER_TURN calls (not timed), so the turn's
    // own spending sums what one turn records, as in use.
    const newTurn = () => db.query(`insert into agent_turns (tenant_id, session_id, user_id, message_id, parts, status) values ($1, $2, $3, $4, '[]', 'sent')`, [s.tenantId, sessionId, capped, `msg_bench_${crypto.randomUUID()}`]);
    const measure = async (fn: () => Promise<unknown>) => {
      for (let i = 0; i < 30; i++) await fn();
      const xs: number[] = [];
      for (let i = 0; i < CALLS; i++) {
        if (i % CALLS_PER_TURN === 0) await newTurn();
        xs.push(await time(fn));
      }
      return xs;
    };
    // Before holds: limits from the roles, the month's and the turn's spending read, then the record.
    const baseline = await measure(async () => {
      await core.spending.limits(s.tenantId, capped);
      await db.query(`select sum(cost_usd)::text as spent from usage_records where tenant_id = $1 and user_id = $2 and created_at >= $3`, [s.tenantId, capped, monthStart]);
      await sessionsTurnSpent(db);
      await core.usage.record(db, record(capped));
    });
    const cappedCall = await measure(async () => {
      const h = await core.spending.hold({ tenantId: s.tenantId, userId: capped }, turn, price, call);
      if (!h.ok) throw new Error('refused');
      await core.spending.settle(h.holdId, record(capped));
    });
    const freeCall = await measure(async () => {
      const h = await core.spending.hold({ tenantId: s.tenantId, userId: free }, null, price, call);
      if (!h.ok) throw new Error('refused');
      await core.spending.settle(h.holdId, record(free));
    });
    await newTurn();
    const t0 = performance.now();
    let done = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (done < CALLS_PER_TURN * 4) {
          done++;
          const h = await core.spending.hold({ tenantId: s.tenantId, userId: capped }, turn, price, call);
          if (h.ok) await core.spending.settle(h.holdId, record(capped));
        }
      }),
    );
    const parallelPerSec = (done / (performance.now() - t0)) * 1000;
    const stat = (xs: number[]) => `${median(xs).toFixed(2)} / ${percentile(xs, 95).toFixed(2)} / ${percentile(xs, 99).toFixed(2)} ms`;
    const ok = percentile(cappedCall, 95) <= 5;
    return report(
      `spending: a model call held against its caller's cost limits and recorded (PostgreSQL, ${CALLS} calls, 20,000 records of the user this month)`,
      {
        'capped user: hold + settle p50 / p95 / p99': `${stat(cappedCall)}  ${ok ? 'met' : 'NOT met'}`,
        'user without limits: hold + settle p50 / p95 / p99': stat(freeCall),
        'baseline: before holds (limits, month and turn read, record) p50 / p95 / p99': `${stat(baseline)}; capped is ${(median(cappedCall) / median(baseline)).toFixed(2)}x`,
        [`${PARALLEL} calls of one capped user at once (one turn, ${CALLS_PER_TURN * 4} calls)`]: `${parallelPerSec.toFixed(0)} calls/s`,
      },
      { ok, target: 'hold + settle <= 5 ms p95' },
    );
  } finally {
    await s.close();
  }
}
