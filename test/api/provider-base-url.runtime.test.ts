import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/** And on the real runtime: after a move without a key, the new host never sees the old one (PostgreSQL run only). */
describe.runIf(DB_MODE === 'postgres')('providers: what the new host receives after a base-URL change', () => {
  let r: RuntimeApp;
  let other: FakeLlm;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp();
    other = await startFakeLlm();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => {
    await r?.close();
    await other?.close();
  });

  async function turn(text: string) {
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: text } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text, agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
  }

  it('sends no request carrying the stored key to the new host', async () => {
    const token = people.tokens.owner;
    r.llm.script([{ text: 'from the old host' }]);
    await turn('before the move');
    expect(r.llm.requests.filter((q) => !q.title).map((q) => q.authorization)).toEqual(['Bearer sk-scripted-secret']);

    const newUrl = `${other.url}/v1`;
    expect((await api(r.t, 'PATCH', '/v1/admin/providers/scripted', { token, body: { baseUrl: newUrl } })).status).toBe(400);
    expect((await api(r.t, 'PATCH', '/v1/admin/providers/scripted', { token, body: { baseUrl: newUrl, apiKey: null } })).status).toBe(200);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token, body: {} })).json).toMatchObject({ pushed: true });
    const before = r.llm.requests.length;
    other.script([{ text: 'from the new host' }]);
    await turn('after the move');
    expect(other.requests.filter((q) => !q.title).length).toBeGreaterThan(0);
    for (const q of other.requests) expect(q.authorization ?? '').not.toContain('sk-scripted-secret');
    expect(r.llm.requests.length).toBe(before);
  }, 120_000);
});
