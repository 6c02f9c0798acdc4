import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.js';
import { createManagedRuntime, type ManagedRuntime, type RuntimeEndpoint } from '../../src/core/runtime/opencode-process.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Pins down what the sessions capability will build on: a real opencode turn against the scripted model,
 * through the managed runtime. Runs once (it does not touch our database).
 */
describe.runIf(DB_MODE === 'postgres')('an agent turn on the real runtime with the scripted model', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'aws-turn-'));
  const workspace = join(dataDir, 'ws');
  let llm: FakeLlm;
  let runtime: ManagedRuntime;
  let rt: RuntimeEndpoint;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${rt.url}${path}${path.includes('?') ? '&' : '?'}directory=${encodeURIComponent(workspace)}`, {
      method,
      headers: { authorization: rt.authorization, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };

  beforeAll(async () => {
    mkdirSync(workspace, { recursive: true });
    llm = await startFakeLlm();
    runtime = createManagedRuntime({ dataDir, log: silentLogger });
    rt = await runtime.start();
    const provider = {
      provider: { scripted: { npm: '@ai-sdk/openai-compatible', name: 'Scripted', options: { baseURL: `${llm.url}/v1`, apiKey: 'sk-test' }, models: { 'fake-model': { name: 'Fake', limit: { context: 32000, output: 4096 } } } } },
      model: 'scripted/fake-model',
      small_model: 'scripted/fake-model',
      enabled_providers: ['scripted'],
    };
    const res = await fetch(`${rt.url}/global/config`, { method: 'PATCH', headers: { authorization: rt.authorization, 'content-type': 'application/json' }, body: JSON.stringify(provider) });
    expect(res.status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await runtime?.stop();
    await llm?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('streams deltas, goes busy then idle, and records tokens on the assistant message', async () => {
    llm.script([{ text: 'Hello from the scripted model', usage: { prompt: 120, completion: 7 } }]);
    const session = await call('POST', '/session', { title: 'probe' });
    expect(session.status).toBe(200);
    const id = session.json.id as string;

    // The instance-wide event stream: one connection, events of every session in the directory.
    const events: Array<{ type: string; properties: any }> = [];
    const ac = new AbortController();
    const stream = await fetch(`${rt.url}/event?directory=${encodeURIComponent(workspace)}`, { headers: { authorization: rt.authorization }, signal: ac.signal });
    const reader = stream.body!.getReader();
    const done = (async () => {
      let buf = '';
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) return;
        buf += Buffer.from(value).toString();
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('');
          if (data) events.push(JSON.parse(data));
          if (events.at(-1)?.type === 'session.idle') return;
        }
      }
    })();
    await expect.poll(() => events.some((e) => e.type === 'server.connected'), { timeout: 10_000 }).toBe(true);

    const prompt = await call('POST', `/session/${id}/prompt_async`, { parts: [{ type: 'text', text: 'say hello' }] });
    expect(prompt.status).toBe(204);
    await Promise.race([done, new Promise((_, reject) => setTimeout(() => reject(new Error('no session.idle in 45 s')), 45_000))]);
    ac.abort();

    const mine = events.filter((e) => e.properties?.sessionID === id || e.properties?.info?.sessionID === id || e.properties?.part?.sessionID === id);
    const deltas = mine.filter((e) => e.type === 'message.part.delta').map((e) => e.properties.delta).join('');
    expect(deltas).toBe('Hello from the scripted model');
    const statuses = mine.filter((e) => e.type === 'session.status').map((e) => e.properties.status.type);
    expect(statuses).toContain('busy');
    expect(statuses.at(-1)).toBe('idle');

    const messages = await call('GET', `/session/${id}/message`);
    const assistant = messages.json.find((m: { info: { role: string } }) => m.info.role === 'assistant');
    expect(assistant.info).toMatchObject({ providerID: 'scripted', modelID: 'fake-model', tokens: { input: 120, output: 7 } });
    expect(assistant.parts.find((p: { type: string }) => p.type === 'text').text).toBe('Hello from the scripted model');
    // The model saw our prompt; the session had a title, so no title request was made.
    expect(llm.requests.filter((r) => !r.title)).toHaveLength(1);
    expect(JSON.stringify(llm.requests[0].body.messages)).toContain('say hello');
  }, 90_000);
});
