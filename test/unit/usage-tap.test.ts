import { describe, expect, it } from 'vitest';
import { callCost, createUsageTap, totalTokens } from '../../src/core/llm-gateway/usage-tap.js';

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
    expect(feed([sse([{ type: 'response.completed', response: { model: 'gpt-r', usage: { input_tokens: 10, output_tokens: 5, input_tokens_details: { cached_tokens: 4 }, output_tokens_details: { reasoning_tokens: 2 } } } }])])).toEqual({
      input: 6, cacheRead: 4, output: 5, reasoning: 2, cacheWrite: 0, model: 'gpt-r',
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

  it('prices a call at the model costs per million tokens', () => {
    const u = { input: 800, cacheRead: 200, output: 400, reasoning: 100, cacheWrite: 0 };
    expect(callCost(u, { inputPerMTok: 2, outputPerMTok: 8 })).toBeCloseTo(0.006, 10);
    expect(callCost(u, {})).toBe(0);
    expect(totalTokens(u)).toBe(1500);
  });
});
