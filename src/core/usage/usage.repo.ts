import type { Queryable } from '../../db/database.js';

/** One model call as recorded (usage.service.ts UsageRecordInput with its time settled). */
export interface UsageRecordRow {
  tenantId: string;
  userId: string | null;
  sessionId: string | null;
  messageId: string | null;
  model: string;
  provider: string;
  tokens: { input: number; output: number; reasoning: number; cacheRead: number; cacheWrite: number };
  costUsd: number;
  channel: string;
  at: Date;
  estimated: boolean;
}

/** Tokens and cost of one model and user (in one bucket of time), as text sums. */
export interface UsageSumRow {
  model: string;
  userId: string | null;
  tokens: string;
  cost: string;
}

/** The same, its tokens split by kind (what the digest shows: cache reads are billed apart). */
export interface UsageSplitRow extends UsageSumRow {
  input: string;
  output: string;
  reasoning: string;
  cacheRead: string;
  cacheWrite: string;
}

/** A call's tokens: input, output, reasoning, cache reads and writes (summed per group, as text). */
const TOKENS_SUM = 'sum(tokens_input + tokens_output + tokens_reasoning + tokens_cache_read + tokens_cache_write)::text as tokens';
/** Each kind apart (rows written before any cache was reported hold 0 in the cache columns). */
const SPLIT_SUM = `sum(tokens_input)::text as input, sum(tokens_output)::text as output, sum(tokens_reasoning)::text as reasoning,
                sum(tokens_cache_read)::text as "cacheRead", sum(tokens_cache_write)::text as "cacheWrite"`;

/** The SQL of usage reporting: recording model calls and summing them (limits' reads: spending.repo.ts). */
export function createUsageRepo() {
  return {
    /**
     * Records one model call and adds its cost to its user's month (usage_monthly) in the same statement,
     * so the two never disagree; a record already written (same message id) adds nothing.
     */
    async record(q: Queryable, r: UsageRecordRow): Promise<void> {
      await q.query(
        `with rec as (
           insert into usage_records (tenant_id, user_id, session_id, model, provider, tokens_input, tokens_output, tokens_reasoning,
                                      tokens_cache_read, tokens_cache_write, cost_usd, channel, created_at, message_id, estimated)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) on conflict do nothing
           returning tenant_id, user_id, created_at, cost_usd)
         insert into usage_monthly (tenant_id, user_id, month, cost_usd)
         select tenant_id, user_id, date_trunc('month', created_at at time zone 'UTC')::date, cost_usd from rec where user_id is not null
         on conflict (tenant_id, user_id, month) do update set cost_usd = usage_monthly.cost_usd + excluded.cost_usd`,
        [r.tenantId, r.userId, r.sessionId, r.model, r.provider, r.tokens.input, r.tokens.output, r.tokens.reasoning, r.tokens.cacheRead, r.tokens.cacheWrite, r.costUsd, r.channel, r.at, r.messageId, r.estimated],
      );
    },
    /** The tenant's tokens (in all and by kind) and cost in (from, to], per model and user. */
    async sums(q: Queryable, tenantId: string, from: Date, to: Date): Promise<UsageSplitRow[]> {
      const { rows } = await q.query<UsageSplitRow>(
        `select model, user_id as "userId",
                ${TOKENS_SUM},
                ${SPLIT_SUM},
                sum(cost_usd)::text as cost
           from usage_records where tenant_id = $1 and created_at > $2 and created_at <= $3
          group by model, user_id`,
        [tenantId, from, to],
      );
      return rows;
    },
    /** The same per UTC hour or day (only the buckets that saw use), oldest first. */
    async sumsOver(q: Queryable, tenantId: string, from: Date, to: Date, bucket: 'hour' | 'day'): Promise<Array<UsageSumRow & { at: Date }>> {
      const { rows } = await q.query<UsageSumRow & { at: Date }>(
        `select date_trunc('${bucket === 'hour' ? 'hour' : 'day'}', created_at, 'UTC') as at, model, user_id as "userId",
                ${TOKENS_SUM},
                sum(cost_usd)::text as cost
           from usage_records where tenant_id = $1 and created_at > $2 and created_at <= $3
          group by 1, model, user_id order by 1, model, user_id`,
        [tenantId, from, to],
      );
      return rows;
    },
  };
}

export type UsageRepo = ReturnType<typeof createUsageRepo>;
