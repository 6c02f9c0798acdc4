import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { seedPeople } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

const KEY = 'sk-good-key-0123456789abcdef';
const BAD = 'sk-bad-key-9876543210fedcba';

/**
 * POST /v1/admin/providers/:name/test: one tiny call to the provider through the service's
 * own provider-calling code, reporting the provider's own error or success with latency; and GET
 * /v1/setup, the first-run state the sessions screen shows.
 */
describe(`providers: the test call and the setup state (${DB_MODE})`, () => {
  let t: TestApp;
  let llm: FakeLlm;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    llm = await startFakeLlm();
    // A provider's refusal of a key it does not know, quoting the key back as some do.
    llm.respond((req) => (req.authorization === `Bearer ${KEY}` ? undefined : { error: { status: 401, message: `Incorrect API key provided: ${req.authorization?.slice(7)}` } }));
    t = await startTestApp();
    people = await seedPeople(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  const add = (name: string, body: Record<string, unknown>) =>
    api(t, 'POST', '/v1/admin/providers', { token: people.tokens.owner, body: { name, kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, models: [{ id: 'fake-model', outputLimit: 4096 }, { id: 'fake-other' }], ...body } });
  const test = (name: string, body: unknown = {}, token = people.tokens.owner) => api(t, 'POST', `/v1/admin/providers/${name}/test`, { token, body });

  it('answers ok with the latency and the reply, asking for a handful of tokens of the first model', async () => {
    expect((await add('good', { apiKey: KEY })).status).toBe(201);
    llm.script([{ text: 'ok' }]);
    const before = llm.requests.length;
    const r = await test('good');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ provider: 'good', model: 'fake-model', ok: true, reply: 'ok', latencyMs: expect.any(Number) });
    const sent = llm.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ path: '/v1/chat/completions', authorization: `Bearer ${KEY}` });
    expect(sent[0].body).toMatchObject({ model: 'fake-model', max_tokens: 16, stream: false });
    // Another of its models, when named.
    llm.script([{ text: 'ok' }]);
    expect((await test('good', { model: 'fake-other' })).json).toMatchObject({ ok: true, model: 'fake-other' });
  });

  it("reports the provider's own refusal (status and message), the key cut out", async () => {
    expect((await add('bad', { apiKey: BAD })).status).toBe(201);
    const r = await test('bad');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ provider: 'bad', model: 'fake-model', ok: false, status: 401, message: 'Incorrect API key provided: [key]', latencyMs: expect.any(Number) });
    expect(r.text).not.toContain(BAD);
    // A scripted server error is reported as it is, too.
    llm.script([{ error: { status: 429, message: 'Rate limit reached for requests' } }]);
    expect((await test('good')).json).toMatchObject({ ok: false, status: 429, message: 'Rate limit reached for requests' });
  });

  it('reports a provider that cannot be reached with status null', async () => {
    const closed = await startFakeLlm();
    const url = closed.url;
    await closed.close();
    expect((await api(t, 'POST', '/v1/admin/providers', { token: people.tokens.owner, body: { name: 'gone', kind: 'openai-compatible', baseUrl: `${url}/v1`, models: [{ id: 'm' }] } })).status).toBe(201);
    const r = await test('gone');
    expect(r.json).toMatchObject({ ok: false, status: null, message: expect.stringMatching(/cannot be reached/) });
  });

  it('is refused without admin.manage_providers, names a missing provider or model, and is audited', async () => {
    expect((await test('good', undefined, people.tokens.member)).status).toBe(403);
    expect((await test('good', undefined, people.tokens.viewer)).status).toBe(403);
    expect((await test('nope')).status).toBe(404);
    const wrong = await test('good', { model: 'gpt-9' });
    expect(wrong.status).toBe(400);
    expect(wrong.json).toMatchObject({ error: 'validation_failed', message: expect.stringMatching(/^model: /), details: { field: 'model' } });
    expect((await test('good', { extra: 1 })).status).toBe(400);
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=provider.test', { token: people.tokens.owner });
    expect(audit.json.entries.map((e: any) => e.target)).toEqual(expect.arrayContaining(['provider:good', 'provider:bad', 'provider:gone']));
    expect(audit.text).not.toContain(BAD);
    expect(audit.text).not.toContain(KEY);
  });

  it('aws provider test: the same call, exit 1 with the provider\'s words when it refuses', async () => {
    llm.script([{ text: 'ok' }]);
    const ok = await runCommand(['provider', 'test', 'good', '--tenant', 'acme', '--json'], { env: t.env });
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ provider: 'good', model: 'fake-model', ok: true, reply: 'ok' });
    const refused = await runCommand(['provider', 'test', 'bad', '--tenant', 'acme'], { env: t.env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^failed: bad\/fake-model answered 401 after \d+ ms: Incorrect API key provided: \[key\]$/m);
    expect(refused.stdout + refused.stderr).not.toContain(BAD);
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=provider.test', { token: people.tokens.owner });
    expect(audit.json.entries.filter((e: any) => e.actor === 'system:cli')).toHaveLength(2);
  }, 60_000);

  it('GET /v1/setup: the steps, whether the caller can do them, and who to ask', async () => {
    const member = await api(t, 'GET', '/v1/setup', { token: people.tokens.member });
    expect(member.status).toBe(200);
    expect(member.json).toMatchObject({ ready: false, detail: expect.any(String), steps: { provider: true, defaultModel: false, applied: false }, canSetUp: false, ask: [{ name: 'owner', email: 'owner@acme.example' }] });
    const owner = await api(t, 'GET', '/v1/setup', { token: people.tokens.owner });
    expect(owner.json).toMatchObject({ ready: false, canSetUp: true, ask: [] });
    expect((await api(t, 'POST', '/v1/admin/runtime/apply', { token: people.tokens.owner, body: { defaultModel: 'good/fake-model' } })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/setup', { token: people.tokens.viewer })).json).toEqual({ ready: true, steps: { provider: true, defaultModel: true, applied: true }, canSetUp: false, ask: [] });
    expect((await api(t, 'GET', '/v1/setup')).status).toBe(401);
  });
});
