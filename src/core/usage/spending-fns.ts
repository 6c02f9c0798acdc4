/**
 * The pure rules of spending: what a model call may cost before it runs, against what its caller may
 * still spend. No I/O: the spending service reads the figures (recorded usage, calls in flight, the
 * limits of the caller's roles) inside one locked transaction and asks these rules.
 */

/** What one call may cost: its input (estimated) and each output token, in USD. */
export interface CallPrice {
  /** USD of the call's input, estimated before it runs. */
  inputUsd: number;
  /** USD of one output token. */
  outputUsdPerToken: number;
  /** The most output tokens the call asks for (all its answers). */
  maxOutput: number;
}

/** Fewer output tokens than this is no answer worth starting: the call is refused instead of cut. */
export const MIN_OUTPUT_TOKENS = 256;

export type CallFit =
  /** The call may run: hold `holdUsd` until its usage is known; `maxOutput` lower than asked means it was cut to fit. */
  | { ok: true; holdUsd: number; maxOutput: number; cut: boolean }
  /** It may not: even cut to MIN_OUTPUT_TOKENS it could cost more than is left (`needUsd`). */
  | { ok: false; needUsd: number };

/** What a call costs at most with `maxOutput` output tokens. */
export const worstCase = (p: CallPrice, maxOutput = p.maxOutput): number => p.inputUsd + maxOutput * p.outputUsdPerToken;

/**
 * Whether a call fits in what its caller may still spend (`availableUsd`; null: no limit applies), and
 * what it holds meanwhile. A call whose worst case fits runs as asked and holds its worst case. One that
 * does not is cut: its output limit lowered so that its worst case is at most HALF of what is left, so
 * calls made at the same time (a turn's title beside its first step, a plan's subtasks side by side)
 * each still find room, and together never spend more than is left. Refused when even a cut call could
 * not fit, or nothing is left.
 */
export function fitCall(price: CallPrice, availableUsd: number | null): CallFit {
  const worst = worstCase(price);
  if (availableUsd === null) return { ok: true, holdUsd: worst, maxOutput: price.maxOutput, cut: false };
  if (availableUsd <= 0) return { ok: false, needUsd: worst };
  if (worst <= availableUsd) return { ok: true, holdUsd: worst, maxOutput: price.maxOutput, cut: false };
  const minimum = Math.min(MIN_OUTPUT_TOKENS, price.maxOutput);
  const share = availableUsd / 2;
  const affordable = price.outputUsdPerToken > 0 ? Math.floor((share - price.inputUsd) / price.outputUsdPerToken) : 0;
  if (price.outputUsdPerToken <= 0 || affordable < minimum) return { ok: false, needUsd: worstCase(price, minimum) };
  const maxOutput = Math.min(affordable, price.maxOutput);
  return { ok: true, holdUsd: worstCase(price, maxOutput), maxOutput, cut: maxOutput < price.maxOutput };
}

/** The limits of a caller's roles, and what counts against them (USD; recorded usage and calls in flight). */
export interface SpendingFigures {
  monthlyLimit?: number;
  perRequestLimit?: number;
  /** Recorded this calendar month plus held by the caller's calls in flight. */
  monthSpent: number;
  /** Recorded for the turn (or plan) the call counts against, plus held by its calls in flight. */
  turnSpent: number;
}

/**
 * What the caller may still spend, and which limit binds: the smaller of what the monthly limit and the
 * per-request limit leave (the latter for the call's turn, or, outside any turn, for the call alone).
 */
export function available(f: SpendingFigures): { usd: number | null; limit: 'monthly' | 'per_request' | null; limitUsd: number | null; spentUsd: number } {
  const monthly = f.monthlyLimit !== undefined ? f.monthlyLimit - f.monthSpent : null;
  const perRequest = f.perRequestLimit !== undefined ? f.perRequestLimit - f.turnSpent : null;
  if (monthly === null && perRequest === null) return { usd: null, limit: null, limitUsd: null, spentUsd: 0 };
  if (perRequest !== null && (monthly === null || perRequest <= monthly)) return { usd: perRequest, limit: 'per_request', limitUsd: f.perRequestLimit!, spentUsd: f.turnSpent };
  return { usd: monthly!, limit: 'monthly', limitUsd: f.monthlyLimit!, spentUsd: f.monthSpent };
}
