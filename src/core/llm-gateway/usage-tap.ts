/**
 * Reads the provider's own usage report from a model call's response as it streams past, without holding
 * the stream back: the gateway forwards every chunk as it arrives and feeds a copy here. Understands the
 * wire formats providers are registered with:
 *  - OpenAI chat completions (and OpenAI-compatible servers): `usage` in the last SSE chunk when the
 *    request asks for it (`stream_options.include_usage`; opencode does), or in the JSON body;
 *  - OpenAI responses: `response.usage` of the `response.completed` event, or of the JSON body;
 *  - Anthropic messages: `message_start` (input and cache tokens) and `message_delta` (output tokens, a
 *    running total), or `usage` of the JSON body.
 */
export interface CallUsage {
  input: number;
  output: number;
  reasoning: number;
  cacheRead: number;
  cacheWrite: number;
  /** The model the provider says answered, when it says. */
  model?: string;
}

/** A line longer than this is not a usage report; it is dropped instead of growing the buffer. */
const MAX_LINE = 1024 * 1024;

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);

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

  /** One JSON object: an SSE event's data, or a whole non-streamed body. */
  function read(obj: any) {
    if (!obj || typeof obj !== 'object') return;
    // Anthropic
    if (obj.type === 'message_start' && obj.message?.usage) {
      const u = obj.message.usage;
      merge({ input: num(u.input_tokens), output: num(u.output_tokens), cacheRead: num(u.cache_read_input_tokens), cacheWrite: num(u.cache_creation_input_tokens), model: obj.message.model });
      return;
    }
    if (obj.type === 'message_delta' && obj.usage) {
      merge({ output: num(obj.usage.output_tokens), ...(obj.usage.input_tokens ? { input: num(obj.usage.input_tokens) } : {}) });
      return;
    }
    // OpenAI responses
    const response = obj.type === 'response.completed' || obj.type === 'response.incomplete' ? obj.response : obj.object === 'response' ? obj : null;
    if (response?.usage) {
      const u = response.usage;
      const cached = num(u.input_tokens_details?.cached_tokens);
      merge({ input: num(u.input_tokens) - cached, cacheRead: cached, output: num(u.output_tokens), reasoning: num(u.output_tokens_details?.reasoning_tokens), model: response.model });
      return;
    }
    const u = obj.usage;
    if (!u || typeof u !== 'object') return;
    if ('input_tokens' in u) {
      // Anthropic's non-streamed body
      merge({ input: num(u.input_tokens), output: num(u.output_tokens), cacheRead: num(u.cache_read_input_tokens), cacheWrite: num(u.cache_creation_input_tokens), model: obj.model });
      return;
    }
    // OpenAI chat completions: prompt_tokens include cached ones, completion_tokens include reasoning.
    const cached = num(u.prompt_tokens_details?.cached_tokens);
    const reasoning = num(u.completion_tokens_details?.reasoning_tokens);
    merge({ input: num(u.prompt_tokens) - cached, cacheRead: cached, output: num(u.completion_tokens) - reasoning, reasoning, model: obj.model });
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

/** USD of a call at a model's prices per million tokens (cache reads and writes at the input price). */
export function callCost(u: CallUsage, price: { inputPerMTok?: number; outputPerMTok?: number }): number {
  const input = (u.input + u.cacheRead + u.cacheWrite) * (price.inputPerMTok ?? 0);
  const output = (u.output + u.reasoning) * (price.outputPerMTok ?? 0);
  return (input + output) / 1e6;
}

export const totalTokens = (u: CallUsage) => u.input + u.output + u.reasoning + u.cacheRead + u.cacheWrite;
