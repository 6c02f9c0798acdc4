import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import { available, fitCall, type CallPrice } from './spending-fns.js';
import type { SpendingRepo } from './spending.repo.js';
import type { UsageRecordInput, UsageService } from './usage.service.js';

/** How long a call in flight holds its worst case at most (a call that never settles stops counting then). */
export const HOLD_TTL_MS = 30 * 60_000;

/** The turn (or plan) a model call counts against for the per-request limit. */
export interface SpendingTurn {
  /** Our session the call is recorded under. */
  sessionId: string;
  channel: string;
  /** `session:<id>` for a turn of that session, `plan:<id>` when the session belongs to a plan (one budget). */
  budgetKey: string;
  /** USD recorded for this turn (or plan) so far, read in the transaction `q`. */
  recorded(q: Queryable): Promise<number>;
}

export type HoldResult =
  /** Go ahead, with at most `maxOutput` output tokens (`cut`: fewer than asked); release or settle `holdId`. */
  | { ok: true; holdId: string | null; maxOutput: number; cut: boolean }
  /** Refused: `limit` is spent, or what it leaves cannot pay for the call (`needUsd` at least). */
  | { ok: false; limit: 'monthly' | 'per_request'; limitUsd: number; spentUsd: number; needUsd: number };

/**
 * Spending against the cost limits of a user's roles (`cost.monthly_limit_usd`, `cost.per_request_limit_usd`).
 * Every model call that reaches a provider holds its worst case before it runs and is recorded when its
 * usage is known, in one transaction that also drops the hold; the hold is taken under a per-user lock
 * against what is recorded and what the user's other calls in flight hold, so calls made side by side
 * cannot together spend past a limit (spending-fns.ts decides how much a call may take). Users whose roles
 * set no limit take no lock and hold nothing: their calls are only recorded.
 */
export function createSpendingService(deps: {
  db: Database;
  repo: SpendingRepo;
  usage: Pick<UsageService, 'record'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  clock: Clock;
}) {
  const { db, repo, clock } = deps;

  const monthStart = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));

  async function limits(tenantId: string, userId: string): Promise<{ monthly?: number; perRequest?: number }> {
    const cost = (await deps.permissionsOf(tenantId, userId)).cost;
    return { monthly: cost.monthly_limit_usd, perRequest: cost.per_request_limit_usd };
  }

  return {
    limits,

    /**
     * Holds what a call may cost before it is forwarded: the caller's month, and the turn (or plan) it
     * counts against (outside any turn, the per-request limit bounds the call alone). Refused when a
     * limit is spent or what it leaves cannot pay even a cut call.
     */
    async hold(caller: { tenantId: string; userId: string }, turn: SpendingTurn | null, price: CallPrice): Promise<HoldResult> {
      const l = await limits(caller.tenantId, caller.userId);
      if (l.monthly === undefined && l.perRequest === undefined) return { ok: true, holdId: null, maxOutput: price.maxOutput, cut: false };
      return db.transaction(async (tx) => {
        await repo.lockUser(tx, caller.userId);
        const now = clock.now();
        const figures = await repo.spentAndHeld(tx, caller.tenantId, caller.userId, monthStart(now), turn?.budgetKey ?? null, now);
        const monthSpent = l.monthly !== undefined ? figures.month : 0;
        const turnSpent = l.perRequest !== undefined && turn ? (await turn.recorded(tx)) + figures.budgetHeld : 0;
        const room = available({ monthlyLimit: l.monthly, perRequestLimit: l.perRequest, monthSpent, turnSpent });
        const fit = fitCall(price, room.usd);
        if (!fit.ok) return { ok: false as const, limit: room.limit!, limitUsd: room.limitUsd!, spentUsd: room.spentUsd, needUsd: fit.needUsd };
        const holdId = crypto.randomUUID();
        await repo.insertHold(tx, { id: holdId, tenantId: caller.tenantId, userId: caller.userId, budgetKey: turn?.budgetKey ?? null, amountUsd: fit.holdUsd, now, expiresAt: new Date(now.getTime() + HOLD_TTL_MS) });
        return { ok: true as const, holdId, maxOutput: fit.maxOutput, cut: fit.cut };
      });
    },

    /** Records a call that reached a provider, and drops its hold, at once. */
    async settle(holdId: string | null, record: UsageRecordInput): Promise<void> {
      if (!holdId) return deps.usage.record(db, record);
      await db.transaction(async (tx) => {
        await repo.deleteHold(tx, record.tenantId, holdId);
        await deps.usage.record(tx, record);
      });
    },

    /** Drops the hold of a call that cost nothing (refused by the provider, or never sent). */
    async release(tenantId: string, holdId: string | null): Promise<void> {
      if (holdId) await repo.deleteHold(db, tenantId, holdId);
    },

    /** USD the user recorded this calendar month (UTC): what the monthly limit is checked against. */
    monthSpent: (tenantId: string, userId: string): Promise<number> => repo.monthRecorded(db, tenantId, userId, monthStart(clock.now())),

    /** USD the user may still spend this month (null: no monthly limit): whether a background call may run. */
    async monthlyRoom(tenantId: string, userId: string): Promise<number | null> {
      const l = await limits(tenantId, userId);
      if (l.monthly === undefined) return null;
      const now = clock.now();
      return l.monthly - (await repo.spentAndHeld(db, tenantId, userId, monthStart(now), null, now)).month;
    },

    /** The session of the user's latest turn (what a call naming no running session counts against). */
    latestTurn: (tenantId: string, userId: string) => repo.latestTurn(db, tenantId, userId),
  };
}

export type SpendingService = ReturnType<typeof createSpendingService>;
