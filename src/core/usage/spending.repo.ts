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

    /** USD the user recorded since `from`, plus what their calls in flight hold. */
    async monthSpent(q: Queryable, tenantId: string, userId: string, from: Date, now: Date): Promise<number> {
      const { rows } = await q.query<{ spent: string }>(
        `select ((select coalesce(sum(cost_usd), 0) from usage_records where tenant_id = $1 and user_id = $2 and created_at >= $3)
               + (select coalesce(sum(amount_usd), 0) from model_call_holds where tenant_id = $1 and user_id = $2 and expires_at > $4))::text as spent`,
        [tenantId, userId, from, now],
      );
      return Number(rows[0].spent);
    },

    /** USD the calls in flight of one budget (a turn's session, a plan) hold. */
    async heldFor(q: Queryable, tenantId: string, budgetKey: string, now: Date): Promise<number> {
      const { rows } = await q.query<{ held: string }>(
        `select coalesce(sum(amount_usd), 0)::text as held from model_call_holds where tenant_id = $1 and budget_key = $2 and expires_at > $3`,
        [tenantId, budgetKey, now],
      );
      return Number(rows[0].held);
    },

    async insertHold(tx: Tx, h: { id: string; tenantId: string; userId: string; budgetKey: string | null; amountUsd: number; now: Date; expiresAt: Date }): Promise<void> {
      // Holds of calls that never settled are past their expiry: gone with the next hold of the user.
      await tx.query(`delete from model_call_holds where tenant_id = $1 and user_id = $2 and expires_at <= $3`, [h.tenantId, h.userId, h.now]);
      await tx.query(
        `insert into model_call_holds (id, tenant_id, user_id, budget_key, amount_usd, created_at, expires_at) values ($1, $2, $3, $4, $5, $6, $7)`,
        [h.id, h.tenantId, h.userId, h.budgetKey, h.amountUsd, h.now, h.expiresAt],
      );
    },

    async deleteHold(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`delete from model_call_holds where tenant_id = $1 and id = $2`, [tenantId, id]);
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
  };
}

export type SpendingRepo = ReturnType<typeof createSpendingRepo>;
