import { describe, expect, it } from 'vitest';
import {
  asksLongCache,
  callCost,
  callFormat,
  chargeCall,
  DEFAULT_MAX_OUTPUT,
  estimateInputTokens,
  IMAGE_TOKENS,
  maxOutputTokens,
  withMaxOutput,
  withUsageReport,
  worstInputPerMTok,
} from '../../src/core/llm-gateway/model-call-fns.js';
import { modelPrices } from '../../src/core/providers/providers-fns.js';

describe('callFormat', () => {
  it('tells billed model answers from free calls, per provider kind', () => {
    expect(callFormat('openai-compatible', '/chat/completions')).toBe('chat');
    expect(callFormat('openai', '/completions')).toBe('completions');
    expect(callFormat('openai', '/responses')).toBe('responses');
    expect(callFormat('openai', '/embeddings')).toBe('embeddings');
    expect(callFormat('anthropic', '/messages')).toBe('messages');
    expect(callFormat('anthropic', '/messages/count_tokens')).toBe('free');
    expect(callFormat('openai', '/models')).toBe('free');
  });
});

describe('withUsageReport', () => {
  it('asks a streamed chat or completions call for its usage, keeping the client\'s other stream options', () => {
    expect(withUsageReport('chat', { model: 'm', stream: true })).toEqual({ model: 'm', stream: true, stream_options: { include_usage: true } });
    expect(withUsageReport('completions', { stream: true, stream_options: { include_usage: false, continuous_usage_stats: true } })).toEqual({
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
  });
  it('leaves alone what reports its usage anyway (same object)', () => {
    for (const [format, body] of [
      ['chat', { stream: false }],
      ['chat', {}],
      ['chat', { stream: true, stream_options: { include_usage: true } }],
      ['responses', { stream: true }],
      ['messages', { stream: true }],
    ] as const) {
      const b = { ...body };
      expect(withUsageReport(format, b)).toBe(b);
    }
  });
  it('replaces stream options that are not an object', () => {
    expect(withUsageReport('chat', { stream: true, stream_options: 'x' })).toEqual({ stream: true, stream_options: { include_usage: true } });
  });
});

describe('maxOutputTokens / withMaxOutput', () => {
  it('reads the output limit of each wire format, times the answers asked for', () => {
    expect(maxOutputTokens('chat', { max_tokens: 500 })).toBe(500);
    expect(maxOutputTokens('chat', { max_completion_tokens: 700, max_tokens: 500 })).toBe(700);
    expect(maxOutputTokens('chat', { max_tokens: 500, n: 3 })).toBe(1500);
    expect(maxOutputTokens('completions', { best_of: 4, n: 2, max_tokens: 10 })).toBe(40);
    expect(maxOutputTokens('responses', { max_output_tokens: 900 })).toBe(900);
    expect(maxOutputTokens('messages', { max_tokens: 1024 })).toBe(1024);
    expect(maxOutputTokens('embeddings', { max_tokens: 1024 })).toBe(0);
  });
  it('falls back to the model\'s registered output limit, else a high default (legacy completions: 16)', () => {
    expect(maxOutputTokens('chat', {}, 4096)).toBe(4096);
    expect(maxOutputTokens('chat', {})).toBe(DEFAULT_MAX_OUTPUT);
    expect(maxOutputTokens('chat', { max_tokens: -5 })).toBe(DEFAULT_MAX_OUTPUT);
    expect(maxOutputTokens('completions', {}, 4096)).toBe(16);
  });
  it('lowers the limit in the field the request uses, shared among its answers, never raising it', () => {
    expect(withMaxOutput('chat', { max_tokens: 4000 }, 1000)).toEqual({ max_tokens: 1000 });
    expect(withMaxOutput('chat', { max_completion_tokens: 4000 }, 1000)).toEqual({ max_completion_tokens: 1000 });
    expect(withMaxOutput('chat', {}, 1000)).toEqual({ max_tokens: 1000 });
    expect(withMaxOutput('chat', { n: 4 }, 1000)).toEqual({ n: 4, max_tokens: 250 });
    expect(withMaxOutput('responses', {}, 300)).toEqual({ max_output_tokens: 300 });
    expect(withMaxOutput('messages', { max_tokens: 8000 }, 300)).toEqual({ max_tokens: 300 });
    const small = { max_tokens: 100 };
    expect(withMaxOutput('chat', small, 1000)).toBe(small);
    expect(withMaxOutput('embeddings', { input: 'x' }, 10)).toEqual({ input: 'x' });
  });
});

describe('estimateInputTokens', () => {
  it('counts the text of every value, on the high side for ASCII, one token for any other character', () => {
    const ascii = estimateInputTokens({ model: 'gpt', messages: [{ role: 'user', content: 'x'.repeat(3000) }] });
    // 3,004 characters ('user' and the content) at 3 a token, plus one for each of the two values.
    expect(ascii).toBe(Math.ceil(3004 / 3) + 2);
    expect(estimateInputTokens({ messages: [{ role: 'user', content: '日本語'.repeat(100) }] })).toBeGreaterThanOrEqual(300);
  });
  it('counts an image or other inline payload as IMAGE_TOKENS, whatever its size', () => {
    const image = `data:image/png;base64,${'A'.repeat(2_000_000)}`;
    const t = estimateInputTokens({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }, { type: 'text', text: 'what is this?' }] }] });
    expect(t).toBeGreaterThanOrEqual(IMAGE_TOKENS);
    expect(t).toBeLessThan(IMAGE_TOKENS + 50);
    const raw = estimateInputTokens({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', data: 'iVBORw0KGgo+'.repeat(1_000) } }] }] });
    expect(raw).toBeLessThan(IMAGE_TOKENS + 50);
  });
  it('does not count the model name or the stream settings, and survives deep nesting', () => {
    expect(estimateInputTokens({ model: 'x'.repeat(300), stream: true })).toBe(0);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(() => estimateInputTokens(deep)).not.toThrow();
  });
});

describe('what a call costs (prompt caching priced as the provider bills it)', () => {
  // Claude Sonnet's prices ($3 in, $15 out): Anthropic's cache rule gives reads $0.30, writes $3.75, one-hour writes $6.
  const sonnet = modelPrices('anthropic', { id: 'claude-sonnet', inputCostPerMTok: 3, outputCostPerMTok: 15 });
  // gpt-4.1 as OpenAI prices it: $2 in, $0.50 cached, $8 out.
  const gpt = modelPrices('openai', { id: 'gpt-4.1', inputCostPerMTok: 2, outputCostPerMTok: 8, cacheReadCostPerMTok: 0.5 });
  const usage = (u: Partial<Parameters<typeof callCost>[0]>) => ({ input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0, ...u });

  it('prices each kind of token at its own price: an Anthropic agent step that mostly reads its cache', () => {
    // 12 fresh tokens, 40,000 read from the cache, 3,000 written (2,000 of them to the one-hour cache), 300 out.
    const u = usage({ input: 12, cacheRead: 40_000, cacheWrite: 3000, cacheWriteLong: 2000, output: 300 });
    expect(callCost(u, sonnet)).toBeCloseTo((12 * 3 + 40_000 * 0.3 + 1000 * 3.75 + 2000 * 6 + 300 * 15) / 1e6, 15);
    expect(callCost(u, sonnet)).toBeCloseTo(0.032286, 15);
    // The old rule (every input token at the input price) said $0.133536: four times the bill.
    expect(callCost(u, sonnet) * 4).toBeLessThan(((12 + 40_000 + 3000) * 3 + 300 * 15) / 1e6);
  });

  it('prices an OpenAI call with cached input, and reasoning at the output price', () => {
    const u = usage({ input: 2000, cacheRead: 8000, output: 15, reasoning: 5 });
    expect(callCost(u, gpt)).toBeCloseTo((2000 * 2 + 8000 * 0.5 + 20 * 8) / 1e6, 15);
    // No prices: free, whatever the tokens.
    expect(callCost(u, modelPrices('openai-compatible', undefined))).toBe(0);
    // One-hour writes never count for more than the writes they are part of.
    expect(callCost(usage({ cacheWrite: 10, cacheWriteLong: 50 }), sonnet)).toBeCloseTo((10 * 6) / 1e6, 15);
  });

  it('the worst an input token may cost before the provider says: the highest input price, the one-hour one only when asked for', () => {
    expect(worstInputPerMTok(sonnet, false)).toBe(3.75);
    expect(worstInputPerMTok(sonnet, true)).toBe(6);
    expect(worstInputPerMTok(gpt, false)).toBe(2);
    expect(worstInputPerMTok(gpt, true)).toBe(4);
    // A cache write price below the input price: plain input is the worst.
    expect(worstInputPerMTok(modelPrices('openai-compatible', { id: 'm', inputCostPerMTok: 1, cacheReadCostPerMTok: 0.1, cacheWriteCostPerMTok: 0.5 }), false)).toBe(1);
  });

  it('tells an Anthropic call that asks for the one-hour cache, wherever it asks', () => {
    const block = (ttl?: string) => ({ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ...(ttl ? { ttl } : {}) } });
    expect(asksLongCache('messages', { system: [block()], messages: [{ role: 'user', content: [block('5m')] }] })).toBe(false);
    expect(asksLongCache('messages', { system: [block('1h')], messages: [] })).toBe(true);
    expect(asksLongCache('messages', { messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, block('1h')] }] })).toBe(true);
    expect(asksLongCache('messages', { tools: [{ name: 't', input_schema: {}, cache_control: { type: 'ephemeral', ttl: '1h' } }], messages: [] })).toBe(true);
    // The request-wide switch, and any TTL longer than the default.
    expect(asksLongCache('messages', { cache_control: { type: 'ephemeral', ttl: '24h' }, messages: [] })).toBe(true);
    // Text that merely mentions it is not asking; other formats have no such cache.
    expect(asksLongCache('messages', { messages: [{ role: 'user', content: '"cache_control": {"ttl": "1h"}' }] })).toBe(false);
    expect(asksLongCache('chat', { cache_control: { ttl: '1h' } })).toBe(false);
    let deep: unknown = block('1h');
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(() => asksLongCache('messages', { messages: deep as never })).not.toThrow();
  });

  describe('chargeCall', () => {
    const estimate = { input: 50_000, output: 4000, longCache: false };

    it('answered with a usage report: exactly what the provider bills', () => {
      const reported = usage({ input: 12, cacheRead: 40_000, cacheWrite: 1000, output: 300, model: 'claude-sonnet' });
      expect(chargeCall('answered', reported, estimate, sonnet)).toEqual({ usage: reported, costUsd: callCost(reported, sonnet), estimated: false });
    });

    it('no report: the estimate at its worst case, which is what the call held', () => {
      const c = chargeCall('answered', null, estimate, sonnet);
      expect(c).toMatchObject({ estimated: true, usage: { input: 50_000, output: 4000, cacheRead: 0, cacheWrite: 0, reasoning: 0 } });
      // Its input as if all of it were written to the cache (the most Anthropic could bill), its whole output limit.
      expect(c.costUsd).toBeCloseTo((50_000 * 3.75 + 4000 * 15) / 1e6, 15);
      expect(chargeCall('cut', null, { ...estimate, longCache: true }, sonnet).costUsd).toBeCloseTo((50_000 * 6 + 4000 * 15) / 1e6, 15);
      expect(chargeCall('cut', null, estimate, gpt).costUsd).toBeCloseTo((50_000 * 2 + 4000 * 8) / 1e6, 15);
    });

    it('cut off after Anthropic counted the input: its input as counted (cache reads at their price, never the estimate on top), the output limit', () => {
      // message_start came (input and cache counted), the stream broke before message_delta.
      const reported = usage({ input: 12, cacheRead: 40_000, cacheWrite: 1000, output: 1, model: 'claude-sonnet' });
      const c = chargeCall('cut', reported, estimate, sonnet);
      expect(c).toMatchObject({ usage: { ...reported, output: 4000 }, estimated: true });
      expect(c.costUsd).toBeCloseTo((12 * 3 + 40_000 * 0.3 + 1000 * 3.75 + 4000 * 15) / 1e6, 15);
      // More output reported than the limit assumed (reasoning apart): what was reported.
      expect(chargeCall('cut', usage({ input: 5, output: 4500, reasoning: 100 }), estimate, sonnet).usage).toMatchObject({ input: 5, output: 4500, reasoning: 100 });
    });

    it('cut off with a report that counts no input: the estimated input at the worst price, the reported output if more', () => {
      const c = chargeCall('cut', usage({ output: 9000 }), estimate, sonnet);
      expect(c.usage).toMatchObject({ input: 50_000, output: 9000, cacheRead: 0, cacheWrite: 0 });
      expect(c.costUsd).toBeCloseTo((50_000 * 3.75 + 9000 * 15) / 1e6, 15);
    });
  });
});
