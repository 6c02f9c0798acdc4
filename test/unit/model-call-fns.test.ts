import { describe, expect, it } from 'vitest';
import { callFormat, DEFAULT_MAX_OUTPUT, estimateInputTokens, IMAGE_TOKENS, maxOutputTokens, withMaxOutput, withUsageReport } from '../../src/core/llm-gateway/model-call-fns.js';

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
