import type { Queryable, Tx } from '../../db/database.js';

/** The SQL of spending: what a user has recorded and holds in flight (model_call_holds, usage_records). */
export function createSpendingRepo() {
  return {
    /**
     * Serialises the spending decisions of one user until the transaction ends, so two calls cannot both
     * read the same room under a limit. (The embedded database runs one transaction at a time anyway.)
     */
    async lockUser(tx: Tx, userId: string): Promise<void> {
      await tx.query(`select pg_advisory_xact_lock(hashtextextended('spending:' || $1::text, 0))`, [userId]);
    },

    /** USD the user recorded in the calendar month (UTC) starting at `month` (usage_monthly). */
    async monthRecorded(q: Queryable, tenantId: string, userId: string, month: Date): Promise<number> {
      const { rows } = await q.query<{ spent: string }>(`select cost_usd::text as spent from usage_monthly where tenant_id = $1 and user_id = $2 and month = $3::date`, [
        tenantId,
        userId,
        month.toISOString().slice(0, 10),
      ]);
      return Number(rows[0]?.spent ?? 0);
    },

    /**
     * In one round trip (read after lockUser, so it sees every call settled before): USD the user recorded
     * in the month starting at `month` plus what all their calls in flight hold, and what the calls in
     * flight of one budget (a turn's session, a plan) hold.
     */
    async spentAndHeld(q: Queryable, tenantId: string, userId: string, month: Date, budgetKey: string | null, now: Date): Promise<{ month: number; budgetHeld: number }> {
      const { rows } = await q.query<{ month: string; budgetHeld: string }>(
        `select ((select coalesce(sum(cost_usd), 0) from usage_monthly where tenant_id = $1 and user_id = $2 and month = $3::date)
               + (select coalesce(sum(amount_usd), 0) from model_call_holds where tenant_id = $1 and user_id = $2 and expires_at > $4))::text as month,
                (select coalesce(sum(amount_usd), 0) from model_call_holds where tenant_id = $1 and budget_key = $5 and expires_at > $4)::text as "budgetHeld"`,
        [tenantId, userId, month.toISOString().slice(0, 10), now, budgetKey],
      );
      return { month: Number(rows[0].month), budgetHeld: Number(rows[0].budgetHeld) };
    },

    /**
     * A call in flight: what it holds against its user's limits, and what its record needs if it never
     * settles. With `flush: false` (a user without limits: the row holds nothing anybody is checked
     * against) its statement commits without waiting for the disk: the row must outlive this process,
     * which it does as soon as PostgreSQL has it; a PostgreSQL crash in the fraction of a second before
     * its WAL is written loses the row, never a record. That spares such a call a flush (most of what the
     * row cost: the spending benchmark). A hold against limits is flushed as it always was: measured, a
     * hold that did not wait let a user's next call read its room more often before the last call's record
     * had committed, and refused it (model-pricing.test.ts).
     */
    async insertHold(q: Queryable, h: HoldRow, o: { flush: boolean }): Promise<void> {
      const values = '$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14';
      await q.query(
        `insert into model_call_holds (id, tenant_id, user_id, budget_key, amount_usd, created_at, expires_at, provider, model, session_id, channel, tokens_input, tokens_output, holder)
         ${o.flush ? `values (${values})` : `select ${values} from (select set_config('synchronous_commit', 'off', true)) as no_flush`}`,
        [h.id, h.tenantId, h.userId, h.budgetKey, h.amountUsd, h.now, h.expiresAt, h.provider, h.model, h.sessionId, h.channel, h.tokensInput, h.tokensOutput, h.holder],
      );
    },

    /**
     * Holds of calls that may never settle: those of processes other than `holder` (the caller decides
     * which of those died), oldest first, at most `limit`. Across tenants: a process coming back settles
     * what any process before it left.
     */
    async holdsOfOthers(q: Queryable, holder: string, limit: number): Promise<Array<{ id: string; tenantId: string; holder: string | null; expiresAt: Date }>> {
      const { rows } = await q.query<{ id: string; tenantId: string; holder: string | null; expiresAt: Date }>(
        `select id, tenant_id as "tenantId", holder, expires_at as "expiresAt" from model_call_holds where holder is distinct from $1 order by created_at limit $2`,
        [holder, limit],
      );
      return rows;
    },

    /** Takes a hold away (once across processes): its row as it was, or null when it was gone already. */
    async takeHold(q: Queryable, tenantId: string, id: string): Promise<(HoldRow & { createdAt: Date }) | null> {
      const { rows } = await q.query<HoldRow & { createdAt: Date }>(
        `delete from model_call_holds where tenant_id = $1 and id = $2
         returning id, tenant_id as "tenantId", user_id as "userId", budget_key as "budgetKey", amount_usd::float8 as "amountUsd", created_at as "createdAt",
                   expires_at as "expiresAt", provider, model, session_id as "sessionId", channel, tokens_input::float8 as "tokensInput", tokens_output::float8 as "tokensOutput", holder`,
        [tenantId, id],
      );
      return rows[0] ? { ...rows[0], now: rows[0].createdAt } : null;
    },

    /** Drops a hold; false when it was gone already (recorded as left behind, or its user erased). */
    async deleteHold(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from model_call_holds where tenant_id = $1 and id = $2`, [tenantId, id]);
      return (rowCount ?? 0) > 0;
    },

    /**
     * The session of the user's most recent turn, and when that turn was accepted: what a model call
     * that names no running session of the user counts against.
     */
    async latestTurn(q: Queryable, tenantId: string, userId: string): Promise<{ sessionId: string; at: Date } | null> {
      const { rows } = await q.query<{ sessionId: string; at: Date }>(
        `select session_id as "sessionId", created_at as at from agent_turns where tenant_id = $1 and user_id = $2 order by created_at desc limit 1`,
        [tenantId, userId],
      );
      return rows[0] ?? null;
    },
    /** A person's usage records, oldest first (their data export). */
    async usageOfUser(q: Queryable, tenantId: string, userId: string): Promise<Array<Record<string, unknown>>> {
      const { rows } = await q.query<Record<string, unknown>>(
        `select id, session_id as "sessionId", model, provider, tokens_input as "tokensInput", tokens_output as "tokensOutput", tokens_reasoning as "tokensReasoning",
                tokens_cache_read as "tokensCacheRead", tokens_cache_write as "tokensCacheWrite", cost_usd::float8 as "costUsd", channel, created_at as "createdAt"
           from usage_records where tenant_id = $1 and user_id = $2 order by created_at, id`,
        [tenantId, userId],
      );
      return rows.map((r) => ({ ...r, tokensInput: Number(r.tokensInput), tokensOutput: Number(r.tokensOutput), tokensReasoning: Number(r.tokensReasoning), tokensCacheRead: Number(r.tokensCacheRead), tokensCacheWrite: Number(r.tokensCacheWrite) }));
    },
    /**
     * Moves a person's usage (records and monthly totals) to a pseudonymous id and drops their calls in
     * flight (their erasure: the organisation keeps its spend record, no longer naming them); how many
     * records moved.
     */
    async pseudonymiseUser(q: Queryable, tenantId: string, userId: string, pseudoId: string): Promise<number> {
      const { rowCount } = await q.query(`update usage_records set user_id = $3 where tenant_id = $1 and user_id = $2`, [tenantId, userId, pseudoId]);
      await q.query(
        `insert into usage_monthly (tenant_id, user_id, month, cost_usd) select tenant_id, $3, month, cost_usd from usage_monthly where tenant_id = $1 and user_id = $2
         on conflict (tenant_id, user_id, month) do update set cost_usd = usage_monthly.cost_usd + excluded.cost_usd`,
        [tenantId, userId, pseudoId],
      );
      await q.query(`delete from usage_monthly where tenant_id = $1 and user_id = $2`, [tenantId, userId]);
      await q.query(`delete from model_call_holds where tenant_id = $1 and user_id = $2`, [tenantId, userId]);
      return rowCount ?? 0;
    },


    /** How many of the tenant's usage records were written before `before` (retention's dry run). */
    async countUsageBefore(q: Queryable, tenantId: string, before: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from usage_records where tenant_id = $1 and created_at < $2`, [tenantId, before]);
      return rows[0].n;
    },
    /**
     * Removes up to `limit` of the tenant's usage records written before `before`, oldest first (retention).
     * The monthly totals (usage_monthly) stay: cost limits read them, and they name no session or model.
     */
    async removeUsageBefore(q: Queryable, tenantId: string, before: Date, limit: number): Promise<number> {
      const { rowCount } = await q.query(
        `delete from usage_records where id in (select id from usage_records where tenant_id = $1 and created_at < $2 order by created_at limit $3)`,
        [tenantId, before, limit],
      );
      return rowCount ?? 0;
    },
  };
}

export type SpendingRepo = ReturnType<typeof createSpendingRepo>;

/** One call in flight (model_call_holds). */
export interface HoldRow {
  id: string;
  tenantId: string;
  userId: string;
  budgetKey: string | null;
  amountUsd: number;
  now: Date;
  expiresAt: Date;
  /** What the call's record needs should its process die before it settles (null: a row of an older release). */
  provider: string | null;
  model: string | null;
  sessionId: string | null;
  channel: string | null;
  tokensInput: number | null;
  tokensOutput: number | null;
  /** The process forwarding the call (processIdentity). */
  holder: string | null;
}
