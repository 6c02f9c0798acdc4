import { describe, expect, it } from 'vitest';
import { createUsageTap, totalTokens } from '../../src/core/llm-gateway/usage-tap.js';

const feed = (chunks: string[]) => {
  const tap = createUsageTap();
  for (const c of chunks) tap.push(Buffer.from(c));
  return tap.end();
};
const sse = (objs: unknown[]) => objs.map((o) => `data: ${JSON.stringify(o)}\n\n`).join('') + 'data: [DONE]\n\n';

describe('usage tap', () => {
  it('reads the usage chunk of an OpenAI chat-completions stream, however the chunks are cut', () => {
    const body = sse([
      { choices: [{ delta: { content: 'hi' } }] },
      { choices: [], usage: { prompt_tokens: 1000, completion_tokens: 500, prompt_tokens_details: { cached_tokens: 200 }, completion_tokens_details: { reasoning_tokens: 100 } }, model: 'gpt-x' },
    ]);
    for (const size of [1, 7, 64, body.length]) {
      const chunks = body.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!;
      expect(feed(chunks)).toEqual({ input: 800, cacheRead: 200, output: 400, reasoning: 100, cacheWrite: 0, model: 'gpt-x' });
    }
  });

  it('reads Anthropic message_start and message_delta (a running output total)', () => {
    const u = feed([
      'event: message_start\n',
      `data: ${JSON.stringify({ type: 'message_start', message: { model: 'claude-x', usage: { input_tokens: 300, output_tokens: 1, cache_read_input_tokens: 50, cache_creation_input_tokens: 20 } } })}\n\n`,
      `event: message_delta\ndata: ${JSON.stringify({ type: 'message_delta', usage: { output_tokens: 40 } })}\n\n`,
      `event: message_delta\ndata: ${JSON.stringify({ type: 'message_delta', usage: { output_tokens: 77 } })}\n\n`,
    ]);
    expect(u).toEqual({ input: 300, output: 77, reasoning: 0, cacheRead: 50, cacheWrite: 20, model: 'claude-x' });
  });

  it('reads OpenAI responses (response.completed) and plain JSON answers', () => {
    // output_tokens include the reasoning ones (output_tokens_details says how many): counted once.
    expect(feed([sse([{ type: 'response.completed', response: { model: 'gpt-r', usage: { input_tokens: 10, output_tokens: 5, input_tokens_details: { cached_tokens: 4 }, output_tokens_details: { reasoning_tokens: 2 } } } }])])).toEqual({
      input: 6, cacheRead: 4, output: 3, reasoning: 2, cacheWrite: 0, model: 'gpt-r',
    });
    expect(feed([JSON.stringify({ model: 'm', usage: { prompt_tokens: 7, completion_tokens: 3 } })])).toMatchObject({ input: 7, output: 3 });
    expect(feed([JSON.stringify({ model: 'c', usage: { input_tokens: 9, output_tokens: 1 } })])).toMatchObject({ input: 9, output: 1 });
    expect(feed(['{"error":{"message":"nope"}}'])).toBeNull();
    expect(feed([sse([{ choices: [{ delta: { content: 'no usage asked for' } }] }])])).toBeNull();
  });

  it('never holds an endless line: a giant chunk without newlines is dropped, later usage still read', () => {
    const u = feed(['data: ' + 'x'.repeat(2 * 1024 * 1024), '\n\n', sse([{ choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } }])]);
    expect(u).toMatchObject({ input: 1, output: 2 });
  });

  it('counts every token once: input, output, reasoning, cache reads and writes', () => {
    expect(totalTokens({ input: 800, cacheRead: 200, output: 400, reasoning: 100, cacheWrite: 50, cacheWriteLong: 20 })).toBe(1550);
  });
});

describe('usage tap: prompt caching, as each provider reports it', () => {
  const anthropicStart = (usage: Record<string, unknown>) => `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { model: 'claude-x', usage } })}\n\n`;
  const anthropicDelta = (usage: Record<string, unknown>) => `event: message_delta\ndata: ${JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage })}\n\n`;

  it('Anthropic: input_tokens leave the cache out; writes to the one-hour cache are kept apart', () => {
    const u = feed([
      anthropicStart({ input_tokens: 12, output_tokens: 1, cache_read_input_tokens: 40_000, cache_creation_input_tokens: 3000, cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 2000 } }),
      anthropicDelta({ output_tokens: 300 }),
    ]);
    expect(u).toEqual({ input: 12, cacheRead: 40_000, cacheWrite: 3000, cacheWriteLong: 2000, output: 300, reasoning: 0, model: 'claude-x' });
    // No one-hour writes: no such field (the writes are all at the 5-minute price).
    expect(feed([anthropicStart({ input_tokens: 5, cache_creation_input_tokens: 7, cache_creation: { ephemeral_5m_input_tokens: 7, ephemeral_1h_input_tokens: 0 } })])).toEqual({
      input: 5, cacheRead: 0, cacheWrite: 7, output: 0, reasoning: 0, model: 'claude-x',
    });
  });

  it('Anthropic: message_delta carries running totals; a larger input or cache count there wins, a missing or null one keeps message_start\'s', () => {
    // A server tool (web search) read more input after message_start: the final delta says so.
    const grown = feed([
      anthropicStart({ input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 5000, cache_creation_input_tokens: 0 }),
      anthropicDelta({ output_tokens: 50, input_tokens: 900, cache_read_input_tokens: 9000, cache_creation_input_tokens: 200 }),
    ]);
    expect(grown).toMatchObject({ input: 900, cacheRead: 9000, cacheWrite: 200, output: 50 });
    const kept = feed([
      anthropicStart({ input_tokens: 100, cache_read_input_tokens: 5000, cache_creation_input_tokens: 10 }),
      anthropicDelta({ output_tokens: 50, input_tokens: null, cache_read_input_tokens: null }),
      // A server that sends zeros in its delta does not take back what message_start counted.
      anthropicDelta({ output_tokens: 60, input_tokens: 0, cache_creation_input_tokens: 0 }),
    ]);
    expect(kept).toEqual({ input: 100, cacheRead: 5000, cacheWrite: 10, output: 60, reasoning: 0, model: 'claude-x' });
  });

  it('Anthropic: a non-streamed message body, cache tokens and one-hour writes included', () => {
    expect(feed([JSON.stringify({ type: 'message', model: 'claude-x', usage: { input_tokens: 3, output_tokens: 9, cache_read_input_tokens: 70, cache_creation_input_tokens: 20, cache_creation: { ephemeral_1h_input_tokens: 20 } } })])).toEqual({
      input: 3, output: 9, reasoning: 0, cacheRead: 70, cacheWrite: 20, cacheWriteLong: 20, model: 'claude-x',
    });
  });

  it('OpenAI-shaped: cached_tokens (and cache_write_tokens, as OpenRouter reports them) come out of prompt_tokens', () => {
    expect(feed([sse([{ choices: [], usage: { prompt_tokens: 10_000, completion_tokens: 20, prompt_tokens_details: { cached_tokens: 8000, cache_write_tokens: 1500 } } }])])).toMatchObject({
      input: 500, cacheRead: 8000, cacheWrite: 1500, output: 20,
    });
    // DeepSeek says it as prompt_cache_hit_tokens (prompt_tokens = hits + misses).
    expect(feed([sse([{ choices: [], usage: { prompt_tokens: 1000, completion_tokens: 5, prompt_cache_hit_tokens: 600, prompt_cache_miss_tokens: 400 } }])])).toMatchObject({ input: 400, cacheRead: 600 });
    // Responses: input_tokens_details.
    expect(feed([JSON.stringify({ object: 'response', model: 'gpt-r', usage: { input_tokens: 100, output_tokens: 10, input_tokens_details: { cached_tokens: 64 } } })])).toMatchObject({ input: 36, cacheRead: 64 });
  });

  it('a confused server\'s parts never exceed its whole: the split always adds up to what it reported', () => {
    expect(feed([sse([{ choices: [], usage: { prompt_tokens: 100, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 250, cache_write_tokens: 9 } } }])])).toMatchObject({ input: 0, cacheRead: 100, cacheWrite: 0 });
    expect(feed([sse([{ choices: [], usage: { prompt_tokens: 100, completion_tokens: 5, completion_tokens_details: { reasoning_tokens: 50 } } }])])).toMatchObject({ output: 0, reasoning: 5 });
  });
});
