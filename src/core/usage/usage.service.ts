import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { parseDuration } from '../../lib/duration.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ValidationError } from '../../kernel/errors.js';
import type { UsageRepo } from './usage.repo.js';

export interface UsageRecordInput {
  tenantId: string;
  userId: string | null;
  sessionId: string | null;
  /** The runtime's assistant message id: one record per message. */
  messageId?: string | null;
  model: string;
  provider: string;
  tokens: { input: number; output: number; reasoning: number; cacheRead: number; cacheWrite: number };
  costUsd: number;
  channel: string;
  at?: Date;
  /** The provider reported no usage for the call: these are the gateway's estimate. */
  estimated?: boolean;
}

/** Tokens by kind: they add up to the total, and each kind has its own price (cache reads cost a fraction of input). */
export interface TokenSplit {
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** SPEC.md's digest (totalTokens, totalCostUsd, byModel, byUser: tokens and cost), each level with its tokens by kind. */
export interface UsageDigest extends TokenSplit {
  totalTokens: number;
  totalCostUsd: number;
  byModel: Record<string, { tokens: number; cost: number } & TokenSplit>;
  byUser: Record<string, { tokens: number; cost: number } & TokenSplit>;
}

const noTokens = (): TokenSplit => ({ inputTokens: 0, outputTokens: 0, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });

/** Sums of decimal costs in floating point: rounded to the cent's ten-thousandth for stable output. */
const roundUsd = (n: number) => Math.round(n * 1e6) / 1e6;

/** Longest window a digest may cover. */
const MAX_WINDOW_MS = 366 * 86_400_000;

export function createUsageService(deps: { db: Database; repo: UsageRepo; clock: Clock }) {
  const { db, repo, clock } = deps;

  /** The window `since` names, ending now (400 when it is not a duration, or longer than 366 days). */
  function windowOf(input: { since?: string }): { since: string; from: Date; to: Date } {
    const since = input.since?.trim() || '24h';
    const ms = parseDuration(since);
    if (ms === null || ms > MAX_WINDOW_MS) {
      throw new ValidationError(`since must be a duration such as 24h, 7d or 30d (at most 366d), got "${since}"`, { details: { field: 'since' } });
    }
    const to = clock.now();
    return { since, from: new Date(to.getTime() - ms), to };
  }

  return {
    /**
     * Records one model call: an agent's through the LLM gateway, an embedding, a skill proposal. The
     * same statement adds its cost to its user's month (usage_monthly, what the monthly limit reads), so
     * the two never disagree; a record already written (same message id) adds nothing.
     */
    async record(q: Queryable, r: UsageRecordInput): Promise<void> {
      await repo.record(q, { ...r, messageId: r.messageId ?? null, at: r.at ?? clock.now(), estimated: r.estimated ?? false });
    },

    /**
     * Tokens and cost of the caller's tenant over the last `since` (24h, 7d, 30d, ...; default 24h),
     * in total, per model and per user (admin.view_audit_log: usage is part of the reporting an auditor
     * sees). Tokens count input + output + reasoning + cache reads and writes, and each level says how
     * many of each kind (inputTokens: those neither read from nor written to the prompt cache).
     */
    async digest(ctx: Ctx, input: { since?: string }): Promise<UsageDigest & { since: string; from: Date; to: Date }> {
      const tenantId = requirePermission(ctx, 'admin.view_audit_log');
      const { since, from, to } = windowOf(input);
      const rows = await repo.sums(db, tenantId, from, to);
      const digest: UsageDigest = { totalTokens: 0, totalCostUsd: 0, ...noTokens(), byModel: {}, byUser: {} };
      for (const r of rows) {
        const tokens = Number(r.tokens);
        const cost = Number(r.cost);
        const split: TokenSplit = { inputTokens: Number(r.input), outputTokens: Number(r.output), reasoningTokens: Number(r.reasoning), cacheReadTokens: Number(r.cacheRead), cacheWriteTokens: Number(r.cacheWrite) };
        const add = (into: TokenSplit) => {
          for (const k of Object.keys(split) as Array<keyof TokenSplit>) into[k] += split[k];
        };
        digest.totalTokens += tokens;
        digest.totalCostUsd += cost;
        add(digest);
        const m = (digest.byModel[r.model] ??= { tokens: 0, cost: 0, ...noTokens() });
        m.tokens += tokens;
        m.cost += cost;
        add(m);
        const key = r.userId ?? 'unknown';
        const u = (digest.byUser[key] ??= { tokens: 0, cost: 0, ...noTokens() });
        u.tokens += tokens;
        u.cost += cost;
        add(u);
      }
      digest.totalCostUsd = roundUsd(digest.totalCostUsd);
      for (const v of [...Object.values(digest.byModel), ...Object.values(digest.byUser)]) v.cost = roundUsd(v.cost);
      return { ...digest, since, from, to };
    },

    /**
     * The same window over time (admin.view_audit_log): tokens and cost per UTC hour (windows up to 48
     * hours) or day, per model and user, only the buckets that saw use, oldest first: what a chart of
     * spending draws.
     */
    async series(ctx: Ctx, input: { since?: string }): Promise<{ since: string; from: Date; to: Date; bucket: 'hour' | 'day'; points: UsagePoint[] }> {
      const tenantId = requirePermission(ctx, 'admin.view_audit_log');
      const { since, from, to } = windowOf(input);
      const bucket = to.getTime() - from.getTime() <= 48 * 3_600_000 ? 'hour' : 'day';
      const rows = await repo.sumsOver(db, tenantId, from, to, bucket);
      const points = rows.map((r) => ({ at: r.at, model: r.model, userId: r.userId, tokens: Number(r.tokens), cost: roundUsd(Number(r.cost)) }));
      return { since, from, to, bucket, points };
    },
  };
}

/** Tokens and cost of one model and user in one bucket of time. */
export interface UsagePoint {
  at: Date;
  model: string;
  userId: string | null;
  tokens: number;
  cost: number;
}

export type UsageService = ReturnType<typeof createUsageService>;
