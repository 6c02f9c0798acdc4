import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatCallError, createChatClient, MAX_CHAT_RESPONSE_BYTES, type ChatRequest } from '../../src/core/llm-gateway/chat-client.js';
import type { ProviderRow } from '../../src/core/providers/providers.repo.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { json, startScriptedServer, type ScriptedServer } from '../fixtures/scripted-server.js';

const KEY = 'sk-real-secret-key';

const provider = (over: Partial<ProviderRow>): ProviderRow => ({
  id: 'p1',
  tenantId: 't1',
  name: 'chat',
  kind: 'openai-compatible',
  baseUrl: null,
  apiKeySealed: `sealed:${KEY}`,
  models: [],
  enabled: true,
  createdAt: new Date(),
  updatedAt: new Date(),
  ...over,
});
const client = createChatClient({ openKey: (s) => s.replace(/^sealed:/, '') });
const request = (over: Partial<ChatRequest> = {}): ChatRequest => ({
  system: 'You write skills.',
  messages: [
    { role: 'user', content: 'Summarise the work.' },
    { role: 'assistant', content: 'Which part?' },
    { role: 'user', content: 'All of it.' },
  ],
  maxTokens: 256,
  timeoutMs: 5000,
  temperature: 0.2,
  ...over,
});
/** The error a call fails with, checked to carry no key. */
const failure = async (p: Promise<unknown>): Promise<ChatCallError> => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ChatCallError);
  expect(String((err as Error).message)).not.toContain(KEY);
  expect(JSON.stringify(err)).not.toContain(KEY);
  return err as ChatCallError;
};

describe('chat client against the scripted OpenAI-compatible model', () => {
  let llm: FakeLlm;
  beforeAll(async () => {
    llm = await startFakeLlm();
  });
  afterAll(() => llm.close());
  const p = () => provider({ baseUrl: `${llm.url}/v1/` });

  it('posts <base>/chat/completions unstreamed, with the system message first and the opened key, and reads the JSON answer', async () => {
    llm.script([{ text: 'A skill, written.', usage: { prompt: 42, completion: 7 } }]);
    const r = await client.complete(p(), 'fake-model', request());
    expect(r).toEqual({ text: 'A skill, written.', usage: { input: 42, output: 7 }, model: 'fake-model', finishReason: 'stop' });
    expect(JSON.stringify(r)).not.toContain(KEY);
    const seen = llm.requests.at(-1)!;
    expect(seen.path).toBe('/v1/chat/completions');
    expect(seen.authorization).toBe(`Bearer ${KEY}`);
    expect(seen.body).toEqual({
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'You write skills.' },
        { role: 'user', content: 'Summarise the work.' },
        { role: 'assistant', content: 'Which part?' },
        { role: 'user', content: 'All of it.' },
      ],
      max_tokens: 256,
      temperature: 0.2,
      stream: false,
    });
    // Without a system prompt, a temperature or a key: none of them is sent.
    llm.script([{ text: 'ok' }]);
    await client.complete(provider({ baseUrl: `${llm.url}/v1`, apiKeySealed: null }), 'fake-model', request({ system: undefined, temperature: undefined }));
    const bare = llm.requests.at(-1)!;
    expect(bare.authorization).toBeNull();
    expect(bare.body.messages[0]).toEqual({ role: 'user', content: 'Summarise the work.' });
    expect(bare.body).not.toHaveProperty('temperature');
  });

  it('fails with the provider\'s status and message on a refusal', async () => {
    llm.script([{ error: { status: 429, message: 'Rate limit reached for fake-model' } }]);
    const err = await failure(client.complete(p(), 'fake-model', request()));
    expect(err.status).toBe(429);
    expect(err.message).toBe('provider "chat" answered 429: Rate limit reached for fake-model');
  });

  it('a step that is too slow runs out the bounded wait (status null)', async () => {
    llm.script([{ text: 'late', delayMs: 2000 }]);
    const err = await failure(client.complete(p(), 'fake-model', request({ timeoutMs: 200 })));
    expect(err.status).toBeNull();
    expect(err.message).toBe('provider "chat" did not answer within 0.2 s');
  });

  it('the scripted model answers stream:false with one chat.completion object (text and tool calls), and still streams otherwise', async () => {
    const post = async (body: unknown) => {
      const res = await fetch(`${llm.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { type: res.headers.get('content-type'), text: await res.text() };
    };
    const messages = [{ role: 'user', content: 'hi' }];
    llm.script([
      { text: 'Hello there.', usage: { prompt: 3, completion: 2 } },
      { toolCalls: [{ name: 'read', arguments: { path: 'a.ts' } }, { name: 'glob', arguments: { pattern: '*.md' } }] },
      { text: 'streamed' },
    ]);
    const text = await post({ model: 'm', messages, stream: false });
    expect(text.type).toBe('application/json');
    const t = JSON.parse(text.text);
    expect(t).toMatchObject({
      object: 'chat.completion',
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    });
    expect(t.id).toMatch(/^chatcmpl-/);
    expect(typeof t.created).toBe('number');
    expect(t.choices[0].message).not.toHaveProperty('tool_calls');

    const tool = JSON.parse((await post({ model: 'm', messages, stream: false })).text);
    expect(tool.choices).toEqual([
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: expect.stringMatching(/^call_\d+$/), type: 'function', function: { name: 'read', arguments: '{"path":"a.ts"}' } },
            { id: expect.stringMatching(/^call_\d+_1$/), type: 'function', function: { name: 'glob', arguments: '{"pattern":"*.md"}' } },
          ],
        },
        finish_reason: 'tool_calls',
      },
    ]);
    expect(tool.usage).toEqual({ prompt_tokens: 50, completion_tokens: 5, total_tokens: 55 });

    // No `stream` field: the SSE stream as before.
    const streamed = await post({ model: 'm', messages });
    expect(streamed.type).toBe('text/event-stream');
    expect(streamed.text.trim().endsWith('data: [DONE]')).toBe(true);
  });
});

/** Servers that answer other shapes (Anthropic, an SSE answer to a stream:false request), scripted per test. */
describe('chat client against other loopback servers', () => {
  let s: ScriptedServer;
  beforeAll(async () => {
    s = await startScriptedServer();
  });
  afterAll(() => s.close());

  const openai = () => provider({ baseUrl: `${s.url}/v1` });
  const anthropic = () => provider({ kind: 'anthropic', name: 'claude', baseUrl: `${s.url}/v1` });
  const sse = (res: http.ServerResponse, contentType: string, model: string) => {
    const chunk = (c: object) => `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', model, ...c })}\n\n`;
    res.writeHead(200, { 'content-type': contentType });
    res.write(chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello ' }, finish_reason: null }], usage: null }));
    res.write(': a comment line\n\n');
    res.write(chunk({ choices: [{ index: 0, delta: { content: [{ type: 'text', text: 'streamed ' }] }, finish_reason: null }] }));
    res.write(chunk({ choices: [{ index: 0, delta: { content: 'world.' }, finish_reason: null }] }));
    res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }));
    res.write(chunk({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 1 } }));
    res.write(chunk({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 4 } }));
    res.write('data: [DONE]\n\n');
    res.end(chunk({ choices: [{ index: 0, delta: { content: ' after DONE' } }] }));
  };

  it('reads an SSE stream answered to a stream:false request (by its content-type, or a body starting with data:)', async () => {
    s.answer = (_b, _r, res) => sse(res, 'text/event-stream; charset=utf-8', 'served-model');
    const r = await client.complete(openai(), 'asked-model', request());
    expect(r).toEqual({ text: 'Hello streamed world.', usage: { input: 11, output: 4 }, model: 'served-model', finishReason: 'length' });
    expect(s.seen.at(-1)!.body.stream).toBe(false);

    s.answer = (_b, _r, res) => sse(res, 'application/json', 'served-model');
    expect((await client.complete(openai(), 'asked-model', request())).text).toBe('Hello streamed world.');
  });

  it('anthropic: posts <base>/messages with the system field, the version and x-api-key, and reads the text blocks', async () => {
    s.answer = (body, _r, res) =>
      json(res, 200, {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: body.model,
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 's' },
          { type: 'text', text: 'Part one. ' },
          { type: 'text', text: 'Part two.' },
        ],
        stop_reason: 'end_turn',
        usage: { input_tokens: 120, output_tokens: 30 },
      });
    const r = await client.complete(anthropic(), 'claude-x', request());
    expect(r).toEqual({ text: 'Part one. Part two.', usage: { input: 120, output: 30 }, model: 'claude-x', finishReason: 'end_turn' });
    const req = s.seen.at(-1)!;
    expect(req.path).toBe('/v1/messages');
    expect(req.headers['x-api-key']).toBe(KEY);
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
    expect(req.headers.authorization).toBeUndefined();
    expect(req.body).toEqual({
      model: 'claude-x',
      max_tokens: 256,
      system: 'You write skills.',
      messages: [
        { role: 'user', content: 'Summarise the work.' },
        { role: 'assistant', content: 'Which part?' },
        { role: 'user', content: 'All of it.' },
      ],
      temperature: 0.2,
    });

    s.answer = (_b, _r, res) => json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: must be at most 8192' } });
    const err = await failure(client.complete(anthropic(), 'claude-x', request()));
    expect(err.status).toBe(400);
    expect(err.message).toBe('provider "claude" answered 400: max_tokens: must be at most 8192');
  });

  it('estimates the usage (~4 characters a token) when the provider reports none', async () => {
    s.answer = (_b, _r, res) => json(res, 200, { choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(40) }, finish_reason: 'stop' }] });
    const r = await client.complete(openai(), 'm', request({ system: 'abcd', messages: [{ role: 'user', content: 'y'.repeat(21) }] }));
    expect(r.usage).toEqual({ input: 7, output: 10 });
    expect(r.model).toBe('m');
  });

  it('never lets the key out: a provider quoting it back has it cut from the error', async () => {
    s.answer = (_b, _r, res) => json(res, 401, { error: { message: `Incorrect API key provided: ${KEY}.` } });
    const err = await failure(client.complete(openai(), 'm', request()));
    expect(err.status).toBe(401);
    expect(err.message).toBe('provider "chat" answered 401: Incorrect API key provided: [key].');
  });

  it('says what is wrong with an answer it cannot use', async () => {
    const cases: Array<[(res: http.ServerResponse) => void, RegExp, number | null]> = [
      [(res) => res.writeHead(502).end('<html>  bad   gateway </html>'), /answered 502: <html> bad gateway <\/html>/, 502],
      [(res) => res.writeHead(200, { 'content-type': 'application/json' }).end('not json'), /answered something that is not JSON/, 200],
      [(res) => json(res, 200, { choices: [{ index: 0, message: { role: 'assistant', content: null }, finish_reason: 'tool_calls' }] }), /answered no text \(finish reason: tool_calls\)/, 200],
      [(res) => json(res, 200, { choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'length' }] }), /answered no text \(finish reason: length\)/, 200],
      [(res) => json(res, 200, { choices: [] }), /answered no text$/, 200],
      [(res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: {"error":{"message":"overloaded"}}\n\n'), /an error in its stream: overloaded/, 200],
      [(res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: [DONE]\n\n'), /answered an empty stream/, 200],
    ];
    for (const [reply, message, status] of cases) {
      s.answer = (_b, _r, res) => reply(res);
      const err = await failure(client.complete(openai(), 'm', request()));
      expect(err.message).toMatch(message);
      expect(err.status).toBe(status);
    }
    s.answer = (_b, _r, res) => json(res, 200, { type: 'message', content: [{ type: 'tool_use', id: 't', name: 'x', input: {} }], stop_reason: 'tool_use' });
    await expect(client.complete(anthropic(), 'm', request())).rejects.toThrow(/provider "claude" answered no text \(finish reason: tool_use\)/);
  });

  it('bounds the wait and the answer\'s size, and names an unreachable provider', async () => {
    s.answer = () => {}; // never answers
    const late = await failure(client.complete(openai(), 'm', request({ timeoutMs: 300 })));
    expect(late.status).toBeNull();
    expect(late.message).toBe('provider "chat" did not answer within 0.3 s');

    const down = await failure(client.complete(provider({ baseUrl: 'http://127.0.0.1:9/v1' }), 'm', request()));
    expect(down.status).toBeNull();
    expect(down.message).toMatch(/^provider "chat" cannot be reached: .*ECONNREFUSED/);

    s.answer = (_b, _r, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const piece = 'x'.repeat(256 * 1024);
      // Written while the client reads, up to well past the limit (the client hangs up on the way).
      let sent = 0;
      const more = () => {
        while (sent <= MAX_CHAT_RESPONSE_BYTES + piece.length * 4) {
          sent += piece.length;
          if (!res.write(piece)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('error', () => {});
      more();
    };
    const big = await failure(client.complete(openai(), 'm', request()));
    expect(big.status).toBe(200);
    expect(big.message).toBe(`provider "chat" answered more than ${MAX_CHAT_RESPONSE_BYTES} bytes: refused`);
  });
});
