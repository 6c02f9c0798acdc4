import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import { available, fitCall, type CallPrice } from './spending-fns.js';
import type { HoldRow, SpendingRepo } from './spending.repo.js';
import type { UsageRecordInput, UsageService } from './usage.service.js';

/** How long a call in flight holds its worst case at most (a call that never settles stops counting then). */
const HOLD_TTL_MS = 30 * 60_000;
/**
 * A hold of a process this one cannot see (another machine or container) is taken to be left behind,
 * and recorded at its estimate, this long after it stopped counting: no call runs that long.
 */
const ORPHAN_AFTER_EXPIRY_MS = 60 * 60_000;

/** A model call about to be forwarded: what its record needs should its process die before it settles. */
export interface HeldCall {
  provider: string;
  model: string;
  /** The gateway's count of its input tokens (its output is estimated at the limit the hold allows). */
  inputTokens: number;
}

/** The turn (or plan) a model call counts against for the per-request limit. */
export interface SpendingTurn {
  /** Our session the call is recorded under. */
  sessionId: string;
  channel: string;
  /** `session:<id>` for a turn of that session, `plan:<id>` when the session belongs to a plan (one budget). */
  budgetKey: string;
  /** USD recorded for this turn (or plan) so far, read in the transaction `q`. */
  recorded(q: Queryable): Promise<number>;
  /** The models the session may run on whatever the role's allow-list says (its template's: an admin's choice). */
  models?: readonly string[];
}

export type HoldResult =
  /**
   * Go ahead, with at most `maxOutput` output tokens (`cut`: fewer than asked); release or settle `holdId`.
   * `limited`: the hold counts against a limit of the caller's (their next call is measured against it).
   */
  | { ok: true; holdId: string | null; maxOutput: number; cut: boolean; limited: boolean }
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
  /** This process, as its calls in flight are recorded (processIdentity). */
  holder: string;
  /** Whether the process a hold names still runs (processIdentityState on this host). */
  holderState: (holder: string | null) => 'alive' | 'dead' | 'unknown';
}) {
  const { db, repo, clock } = deps;

  const monthStart = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));

  async function limits(tenantId: string, userId: string): Promise<{ monthly?: number; perRequest?: number }> {
    const cost = (await deps.permissionsOf(tenantId, userId)).cost;
    return { monthly: cost.monthly_limit_usd, perRequest: cost.per_request_limit_usd };
  }

  /** The row of a call in flight that holds `amountUsd` and may produce `maxOutput` tokens. */
  const holdRow = (caller: { tenantId: string; userId: string }, turn: SpendingTurn | null, call: HeldCall | undefined, fit: { holdUsd: number; maxOutput: number }, now: Date): HoldRow => ({
    id: crypto.randomUUID(),
    tenantId: caller.tenantId,
    userId: caller.userId,
    budgetKey: turn?.budgetKey ?? null,
    amountUsd: fit.holdUsd,
    now,
    expiresAt: new Date(now.getTime() + HOLD_TTL_MS),
    provider: call?.provider ?? null,
    model: call?.model ?? null,
    sessionId: turn?.sessionId ?? null,
    channel: turn?.channel ?? 'agent',
    tokensInput: call ? call.inputTokens : null,
    tokensOutput: fit.maxOutput,
    holder: deps.holder,
  });

  /** Records a hold whose call never settled (its process died) at the estimate it holds, and drops it; once. */
  async function settleOrphan(tenantId: string, id: string): Promise<boolean> {
    return db.transaction(async (tx) => {
      const h = await repo.takeHold(tx, tenantId, id);
      if (!h) return false;
      await deps.usage.record(tx, {
        tenantId: h.tenantId,
        userId: h.userId,
        sessionId: h.sessionId,
        messageId: `${h.tenantId}:hold:${h.id}`,
        model: h.model ?? 'unknown',
        provider: h.provider ?? 'unknown',
        tokens: { input: h.tokensInput ?? 0, output: h.tokensOutput ?? 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 },
        costUsd: h.amountUsd,
        channel: h.channel ?? 'agent',
        // In the month the call was made, whenever it is recorded.
        at: h.createdAt,
        estimated: true,
      });
      return true;
    });
  }

  return {
    limits,

    /**
     * Holds what a call may cost before it is forwarded: the caller's month, and the turn (or plan) it
     * counts against (outside any turn, the per-request limit bounds the call alone). Refused when a
     * limit is spent or what it leaves cannot pay even a cut call. Every call forwarded holds a row, also
     * one of a user without limits (no lock, nothing they are limited by): should this process die before
     * the call settles, the row is what the call is recorded from (settleOrphans).
     */
    async hold(caller: { tenantId: string; userId: string }, turn: SpendingTurn | null, price: CallPrice, call?: HeldCall): Promise<HoldResult> {
      const l = await limits(caller.tenantId, caller.userId);
      if (l.monthly === undefined && l.perRequest === undefined) {
        const fit = fitCall(price, null) as { holdUsd: number; maxOutput: number };
        const row = holdRow(caller, turn, call, fit, clock.now());
        await repo.insertHold(db, row, { flush: false });
        return { ok: true, holdId: row.id, maxOutput: price.maxOutput, cut: false, limited: false };
      }
      return db.transaction(async (tx) => {
        await repo.lockUser(tx, caller.userId);
        const now = clock.now();
        const figures = await repo.spentAndHeld(tx, caller.tenantId, caller.userId, monthStart(now), turn?.budgetKey ?? null, now);
        const monthSpent = l.monthly !== undefined ? figures.month : 0;
        const turnSpent = l.perRequest !== undefined && turn ? (await turn.recorded(tx)) + figures.budgetHeld : 0;
        const room = available({ monthlyLimit: l.monthly, perRequestLimit: l.perRequest, monthSpent, turnSpent });
        const fit = fitCall(price, room.usd);
        if (!fit.ok) return { ok: false as const, limit: room.limit!, limitUsd: room.limitUsd!, spentUsd: room.spentUsd, needUsd: fit.needUsd };
        const row = holdRow(caller, turn, call, fit, now);
        await repo.insertHold(tx, row, { flush: true });
        return { ok: true as const, holdId: row.id, maxOutput: fit.maxOutput, cut: fit.cut, limited: true };
      });
    },

    /**
     * Records, at the estimate each holds, the calls in flight that processes which died left behind (and
     * drops their holds): those of a process of this host that no longer runs, and those of processes
     * this one cannot see an hour after they stopped counting. `everyOther`: every process but this one
     * is gone (the embedded database: one serve). Run as a serve starts and now and then; how many.
     */
    async settleOrphans(o: { everyOther?: boolean } = {}): Promise<number> {
      const now = clock.now().getTime();
      let settled = 0;
      for (;;) {
        const batch = await repo.holdsOfOthers(db, deps.holder, 500);
        let took = 0;
        for (const h of batch) {
          const state = deps.holderState(h.holder);
          const left = state === 'dead' || (state === 'unknown' && (o.everyOther || h.expiresAt.getTime() + ORPHAN_AFTER_EXPIRY_MS < now));
          if (left && (await settleOrphan(h.tenantId, h.id))) took++;
        }
        settled += took;
        if (batch.length < 500 || took === 0) return settled;
      }
    },

    /**
     * Records a call that reached a provider, and drops its hold, at once. A hold already gone was
     * recorded at its estimate as left behind (settleOrphans: a call outliving its hold by an hour) or
     * went with its user's erasure: the call is not recorded a second time, nor under an erased user.
     */
    async settle(holdId: string | null, record: UsageRecordInput): Promise<void> {
      if (!holdId) return deps.usage.record(db, record);
      await db.transaction(async (tx) => {
        if (await repo.deleteHold(tx, record.tenantId, holdId)) await deps.usage.record(tx, record);
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
