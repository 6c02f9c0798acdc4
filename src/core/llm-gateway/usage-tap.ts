/**
 * Reads the provider's own usage report from a model call's response as it streams past, without holding
 * the stream back: the gateway forwards every chunk as it arrives and feeds a copy here. Understands the
 * wire formats providers are registered with:
 *  - OpenAI chat completions (and OpenAI-compatible servers): `usage` in the last SSE chunk when the
 *    request asks for it (`stream_options.include_usage`; opencode does), or in the JSON body;
 *  - OpenAI responses: `response.usage` of the `response.completed` event, or of the JSON body;
 *  - Anthropic messages: `message_start` (input and cache tokens) and `message_delta` (running totals:
 *    output tokens, and input and cache tokens where a server tool read more), or `usage` of the JSON body.
 * The input tokens are split as providers bill them: `input` is what was neither read from nor written to
 * the prompt cache (OpenAI counts cached tokens inside `prompt_tokens` / `input_tokens`; Anthropic's
 * `input_tokens` leaves them out).
 */
export interface CallUsage {
  /** Input tokens at the input price: neither read from nor written to the prompt cache. */
  input: number;
  /** Output tokens, reasoning not included. */
  output: number;
  reasoning: number;
  /** Input tokens read from the prompt cache. */
  cacheRead: number;
  /** Input tokens written to the prompt cache (all of them, one-hour writes included). */
  cacheWrite: number;
  /** Of `cacheWrite`, those written to Anthropic's one-hour cache (priced apart); absent when none were reported. */
  cacheWriteLong?: number;
  /** The model the provider says answered, when it says. */
  model?: string;
}

/** A line longer than this is not a usage report; it is dropped instead of growing the buffer. */
const MAX_LINE = 1024 * 1024;

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
/** A count the report gives (a number), or undefined when it leaves it out or sends null. */
const given = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * Anthropic's usage object (message_start's, a JSON body's): input excludes the cache; writes to the
 * one-hour cache are in `cache_creation` (and in `cache_creation_input_tokens`, the sum of both caches).
 */
function anthropicUsage(u: any): Partial<CallUsage> {
  const long = given(u.cache_creation?.ephemeral_1h_input_tokens);
  return {
    input: num(u.input_tokens),
    output: num(u.output_tokens),
    cacheRead: num(u.cache_read_input_tokens),
    cacheWrite: num(u.cache_creation_input_tokens),
    ...(long ? { cacheWriteLong: long } : {}),
  };
}

/**
 * An OpenAI-shaped input count with its cache parts inside (`cached_tokens` read, and `cache_write_tokens`
 * written where a server reports them, as OpenRouter and Azure do), split as they are billed. A part
 * larger than the whole (a confused server) is cut to it: the three always add up to the reported count.
 */
function splitCached(total: number, details: any, extraRead?: unknown): { input: number; cacheRead: number; cacheWrite: number } {
  const cacheRead = Math.min(given(details?.cached_tokens) ?? num(extraRead), total);
  const cacheWrite = Math.min(num(details?.cache_write_tokens), total - cacheRead);
  return { input: total - cacheRead - cacheWrite, cacheRead, cacheWrite };
}

export function createUsageTap() {
  let usage: CallUsage | null = null;
  let pending = '';
  let skipping = false;
  let json = '';
  let jsonTooLong = false;
  let sawSse = false;

  const merge = (u: Partial<CallUsage>) => {
    usage = { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, ...usage, ...Object.fromEntries(Object.entries(u).filter(([, v]) => v !== undefined)) };
  };
  /** A running total only grows: a later report that leaves a count out (or sends less) keeps the one before. */
  const atLeast = (key: 'input' | 'cacheRead' | 'cacheWrite' | 'cacheWriteLong', v: number | undefined) => (v !== undefined && v > (usage?.[key] ?? 0) ? v : undefined);

  /** One JSON object: an SSE event's data, or a whole non-streamed body. */
  function read(obj: any) {
    if (!obj || typeof obj !== 'object') return;
    // Anthropic
    if (obj.type === 'message_start' && obj.message?.usage) {
      merge({ ...anthropicUsage(obj.message.usage), model: obj.message.model });
      return;
    }
    if (obj.type === 'message_delta' && obj.usage) {
      // Running totals: output always; input and cache tokens too where the stream read more meanwhile
      // (a server tool's results), and some servers send them here only.
      const u = obj.usage;
      merge({
        output: num(u.output_tokens),
        input: atLeast('input', given(u.input_tokens)),
        cacheRead: atLeast('cacheRead', given(u.cache_read_input_tokens)),
        cacheWrite: atLeast('cacheWrite', given(u.cache_creation_input_tokens)),
        cacheWriteLong: atLeast('cacheWriteLong', given(u.cache_creation?.ephemeral_1h_input_tokens)),
      });
      return;
    }
    // OpenAI responses: input_tokens include cached ones, output_tokens include reasoning (reported apart).
    const response = obj.type === 'response.completed' || obj.type === 'response.incomplete' ? obj.response : obj.object === 'response' ? obj : null;
    if (response?.usage) {
      const u = response.usage;
      const reasoning = Math.min(num(u.output_tokens_details?.reasoning_tokens), num(u.output_tokens));
      merge({ ...splitCached(num(u.input_tokens), u.input_tokens_details), output: num(u.output_tokens) - reasoning, reasoning, model: response.model });
      return;
    }
    const u = obj.usage;
    if (!u || typeof u !== 'object') return;
    if ('input_tokens' in u) {
      // Anthropic's non-streamed body
      merge({ ...anthropicUsage(u), model: obj.model });
      return;
    }
    // OpenAI chat completions: prompt_tokens include the cached ones (prompt_tokens_details, or DeepSeek's
    // prompt_cache_hit_tokens), completion_tokens include reasoning.
    const reasoning = Math.min(num(u.completion_tokens_details?.reasoning_tokens), num(u.completion_tokens));
    merge({ ...splitCached(num(u.prompt_tokens), u.prompt_tokens_details, u.prompt_cache_hit_tokens), output: num(u.completion_tokens) - reasoning, reasoning, model: obj.model });
  }

  function line(l: string) {
    if (!l.startsWith('data:')) return;
    const data = l.slice(l.startsWith('data: ') ? 6 : 5).trim();
    if (!data || data === '[DONE]' || !data.includes('usage')) return;
    try {
      read(JSON.parse(data));
    } catch {
      // not JSON: not ours to judge
    }
  }

  return {
    /** Feeds the next chunk of the response body (as forwarded). */
    push(chunk: Buffer | string) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      if (!sawSse && !jsonTooLong) {
        // Until a line starts with "data:" the body may be a plain JSON answer: keep it (bounded).
        json += text;
        if (json.length > MAX_LINE) {
          jsonTooLong = true;
          json = '';
        }
      }
      pending += text;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const l = pending.slice(0, nl).replace(/\r$/, '');
        pending = pending.slice(nl + 1);
        if (skipping) {
          skipping = false;
          continue;
        }
        if (l.startsWith('data:') || l.startsWith('event:')) sawSse = true;
        line(l);
      }
      if (pending.length > MAX_LINE) {
        pending = '';
        skipping = true;
      }
    },
    /** The usage once the body has ended (null: the provider reported none). */
    end(): CallUsage | null {
      if (pending) line(pending.replace(/\r$/, ''));
      pending = '';
      if (!sawSse && !jsonTooLong && json.trim().startsWith('{')) {
        try {
          read(JSON.parse(json));
        } catch {
          // not a JSON answer
        }
      }
      json = '';
      return usage;
    },
  };
}

export const totalTokens = (u: CallUsage) => u.input + u.output + u.reasoning + u.cacheRead + u.cacheWrite;
