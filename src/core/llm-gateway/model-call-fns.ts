import type { ModelPrices } from '../providers/providers-fns.js';
import type { ProviderKind } from '../providers/providers.schemas.js';
import type { CallUsage } from './usage-tap.js';

/**
 * The pure rules of a model call as it passes the gateway: which wire format it speaks, how to make the
 * provider report its usage, how many output tokens it may produce and how to lower that, how many
 * input tokens it holds (estimated, before the provider says), and what it costs. No I/O: the gateway
 * reads and writes the request body with these, the spending rules decide what the call may cost.
 */

/** The kinds of call the gateway forwards: a billed model answer of one wire format, or a free call. */
export type CallFormat = 'chat' | 'completions' | 'responses' | 'messages' | 'embeddings' | 'free';

/** The format of a call to `path` (already known to be a model path of the provider's kind). */
export function callFormat(kind: ProviderKind, path: string): CallFormat {
  if (path === '/chat/completions') return 'chat';
  if (path === '/completions') return 'completions';
  if (path === '/responses') return 'responses';
  if (path === '/embeddings') return 'embeddings';
  if (kind === 'anthropic' && path === '/messages') return 'messages';
  return 'free'; // the model list, Anthropic's token counting
}

/** Output tokens assumed when neither the request nor the tenant's model entry says (opencode's own cap). */
export const DEFAULT_MAX_OUTPUT = 32_000;
/** Input tokens counted for one image (a large image at high detail costs providers ~1,100-1,600). */
export const IMAGE_TOKENS = 2_000;

type Body = Record<string, unknown>;

const positiveInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);

/**
 * The request, changed so that the provider reports the call's usage: OpenAI-style streams carry it only
 * when `stream_options.include_usage` is set (the runtime sets it; a client of its own need not), so it
 * is set on every streamed chat or completions call. Other formats always report it. Returns the same
 * object when nothing changes.
 */
export function withUsageReport(format: CallFormat, body: Body): Body {
  if ((format !== 'chat' && format !== 'completions') || body.stream !== true) return body;
  const given = body.stream_options;
  const options = given && typeof given === 'object' && !Array.isArray(given) ? (given as Body) : {};
  if (options.include_usage === true) return body;
  return { ...body, stream_options: { ...options, include_usage: true } };
}

/** How many answers a call asks for at once (OpenAI's `n`, legacy `best_of`): each may use the output limit. */
function choices(format: CallFormat, body: Body): number {
  if (format === 'chat') return positiveInt(body.n) ?? 1;
  if (format === 'completions') return Math.max(positiveInt(body.n) ?? 1, positiveInt(body.best_of) ?? 1);
  return 1;
}

/** The field that holds a call's output limit (per answer), in its wire format. */
function outputField(format: CallFormat, body: Body): string | null {
  if (format === 'chat') return body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  if (format === 'completions' || format === 'messages') return 'max_tokens';
  if (format === 'responses') return 'max_output_tokens';
  return null;
}

/**
 * The most output tokens a call may produce, over all the answers it asks for: its own limit, else the
 * model's output limit as the tenant registered it, else DEFAULT_MAX_OUTPUT (legacy completions default
 * to 16, as OpenAI does). Embeddings and free calls produce none.
 */
export function maxOutputTokens(format: CallFormat, body: Body, modelOutputLimit?: number): number {
  const field = outputField(format, body);
  if (!field) return 0;
  const asked = positiveInt(body[field]);
  const fallback = format === 'completions' ? 16 : (positiveInt(modelOutputLimit) ?? DEFAULT_MAX_OUTPUT);
  return (asked ?? fallback) * choices(format, body);
}

/**
 * The request with its output limit lowered to `total` tokens over all its answers (each answer gets an
 * equal share, at least one token). Only ever lowers: a call that asks for less keeps its own limit.
 */
export function withMaxOutput(format: CallFormat, body: Body, total: number): Body {
  const field = outputField(format, body);
  if (!field) return body;
  const perAnswer = Math.max(1, Math.floor(total / choices(format, body)));
  const asked = positiveInt(body[field]);
  if (asked !== undefined && asked <= perAnswer) return body;
  return { ...body, [field]: perAnswer };
}

/**
 * A string that is an image or file payload rather than text: a data: URL, or a long run of base64 (no
 * spaces, upper and lower case and digits mixed, as encoded bytes are; a run of one letter is text).
 */
function isBlob(s: string): boolean {
  if (s.startsWith('data:')) return true;
  if (s.length < 1024) return false;
  const head = s.slice(0, 4096);
  return /^[A-Za-z0-9+/=\r\n]+$/.test(head) && /[A-Z]/.test(head) && /[a-z]/.test(head) && /[0-9+/]/.test(head);
}

/**
 * Input tokens a request holds, estimated from its text before the provider counts them: every string
 * value (messages, system prompt, tool definitions and results) at about three ASCII characters a token
 * and one token for any other character (CJK text runs near one a character), images and other inline
 * payloads at IMAGE_TOKENS each. Deliberately on the high side: it bounds what a call may cost before it
 * runs, and is what a call is charged when the provider reports no usage.
 */
export function estimateInputTokens(body: unknown): number {
  let ascii = 0;
  let other = 0;
  let blobs = 0;
  let values = 0;
  const walk = (v: unknown, depth: number): void => {
    if (depth > 64) return;
    if (typeof v === 'string') {
      values++;
      if (isBlob(v)) {
        blobs++;
        return;
      }
      for (let i = 0; i < v.length; i++) {
        if (v.charCodeAt(i) < 128) ascii++;
        else other++;
      }
    } else if (Array.isArray(v)) {
      for (const x of v) walk(x, depth + 1);
    } else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        // The model name and the call's settings are not input the model reads.
        if (depth === 0 && (k === 'model' || k === 'stream' || k === 'stream_options')) continue;
        walk(x, depth + 1);
      }
    }
  };
  walk(body, 0);
  // A few tokens of framing per value (roles, message boundaries).
  return Math.ceil(ascii / 3) + other + blobs * IMAGE_TOKENS + values;
}

/**
 * USD of a call's tokens at a model's prices per million tokens, each kind at its own price: input,
 * cache reads, cache writes (Anthropic's one-hour writes apart), and output with reasoning.
 */
export function callCost(u: CallUsage, p: ModelPrices): number {
  const long = Math.min(u.cacheWriteLong ?? 0, u.cacheWrite);
  return (
    (u.input * p.inputPerMTok +
      u.cacheRead * p.cacheReadPerMTok +
      (u.cacheWrite - long) * p.cacheWritePerMTok +
      long * p.cacheWriteLongPerMTok +
      (u.output + u.reasoning) * p.outputPerMTok) /
    1e6
  );
}

/**
 * Whether a call asks Anthropic for a cache that outlives the default five minutes anywhere (a
 * `cache_control` with a `ttl` other than "5m", on a block, a tool or the whole request): writes to it
 * cost more. Walks objects and arrays only (a long text is never looked into).
 */
export function asksLongCache(format: CallFormat, body: Body): boolean {
  if (format !== 'messages') return false;
  const walk = (v: unknown, depth: number): boolean => {
    if (depth > 64 || !v || typeof v !== 'object') return false;
    if (Array.isArray(v)) return v.some((x) => walk(x, depth + 1));
    const control = (v as Body).cache_control;
    if (control && typeof control === 'object' && 'ttl' in control && (control as Body).ttl !== '5m') return true;
    for (const x of Object.values(v)) if (x && typeof x === 'object' && walk(x, depth + 1)) return true;
    return false;
  };
  return walk(body, 0);
}

/**
 * The most one input token of a call may cost before the provider says how it served it: the highest of
 * the model's input prices (at Anthropic a token written to the cache costs 1.25x plain input; to the
 * one-hour cache, which only a call that asks for it writes, 2x). What a call holds, and is charged when
 * the provider reports nothing, prices its estimated input at this.
 */
export function worstInputPerMTok(p: ModelPrices, longCache: boolean): number {
  return Math.max(p.inputPerMTok, p.cacheReadPerMTok, p.cacheWritePerMTok, longCache ? p.cacheWriteLongPerMTok : 0);
}

/** What the gateway knew of a call before it went out: its estimated input, the output it may produce, whether it asks for a long cache. */
export interface CallEstimate {
  input: number;
  output: number;
  longCache: boolean;
}

/**
 * What a call that reached the provider is charged. Answered with a usage report: exactly what the
 * provider bills, each kind of token at its price. Without one: the estimate at its worst case, which is
 * what the call held (its estimated input at worstInputPerMTok, its whole output limit). Cut off before
 * its end, the provider may have gone on generating: the input as the provider counted it where it did
 * (Anthropic reports input and cache tokens first), else the estimate; the output the larger of what it
 * reported and the output limit. Anything but a complete report is `estimated`.
 */
export function chargeCall(outcome: 'answered' | 'cut', reported: CallUsage | null, estimate: CallEstimate, price: ModelPrices): { usage: CallUsage; costUsd: number; estimated: boolean } {
  if (reported && outcome === 'answered') return { usage: reported, costUsd: callCost(reported, price), estimated: false };
  const counted = reported !== null && reported.input + reported.cacheRead + reported.cacheWrite > 0;
  const reasoning = reported?.reasoning ?? 0;
  const output = Math.max((reported?.output ?? 0) + reasoning, estimate.output) - reasoning;
  const usage: CallUsage = counted && reported
    ? { ...reported, output, reasoning }
    : { input: estimate.input, output, reasoning, cacheRead: 0, cacheWrite: 0, ...(reported?.model ? { model: reported.model } : {}) };
  // Input the provider did not count is charged as it was held: at the highest input price.
  const unknownInput = counted ? 0 : (estimate.input * (worstInputPerMTok(price, estimate.longCache) - price.inputPerMTok)) / 1e6;
  return { usage, costUsd: callCost(usage, price) + unknownInput, estimated: true };
}
