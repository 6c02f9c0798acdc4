import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/** A whole agent turn through the API, on the real runtime with the scripted model (both databases). */
describe('agent sessions: a full turn', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
  }, 120_000);
  afterAll(async () => r?.close());

  it('refuses prompts with runtime_not_ready until a provider and default model are applied, and queues nothing', async () => {
    const { tokens } = people;
    const created = await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'before apply' } });
    expect(created.status).toBe(201);
    const res = await api(r.t, 'POST', `/v1/sessions/${created.json.sessionId}/prompt`, { token: tokens.member, body: { text: 'hi', agent: 'build' } });
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({ error: 'runtime_not_ready', detail: expect.stringContaining('no runtime configuration') });
    const { rows } = await r.t.opened.db.query(`select count(*)::int as n from agent_turns`);
    expect(rows[0].n).toBe(0);
    const status = await api(r.t, 'GET', '/v1/admin/runtime', { token: tokens.owner });
    expect(status.json).toMatchObject({ ready: false, runtime: { sandbox: 'on', running: 0 } });
    // Nothing to prepare either: said plainly, and no runtime started.
    const prepare = await api(r.t, 'POST', '/v1/sessions/prepare', { token: tokens.member });
    expect(prepare.status).toBe(409);
    expect(prepare.json).toMatchObject({ error: 'runtime_not_ready' });
  });

  it('opening the stream of a new session starts its owner\'s runtime before any prompt (the cold start passes while they type)', async () => {
    const { tokens, ids } = people;
    const running = async () => (await r.t.opened.db.query(`select count(*)::int as n from agent_runtimes where user_id = $1`, [ids.owner])).rows[0].n;
    const created = await api(r.t, 'POST', '/v1/sessions', { token: tokens.owner, body: { title: 'about to type' } });
    expect(created.status).toBe(201);
    expect(await running()).toBe(0);
    const sse = await openSse(`${r.t.url}/v1/sessions/${created.json.sessionId}/events`, { authorization: `Bearer ${tokens.owner}` });
    expect(sse.status).toBe(200);
    await expect.poll(running, { timeout: 30_000, interval: 100 }).toBe(1);
    await sse.close();
  });

  it('streams the turn (deltas, running, idle), returns the transcript, and records usage and audit', async () => {
    const { tokens, ids } = people;
    await applyScriptedProvider(r.t, tokens.owner, r.llm);
    const created = await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'first turn' } });
    const sessionId = created.json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    expect(sse.status, (sse as any).body).toBe(200);
    expect(sse.headers.get('content-type')).toMatch(/text\/event-stream/);

    r.llm.script([{ text: 'Hello from the scripted model', usage: { prompt: 1000, completion: 500 } }]);
    const prompt = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'say hello', agent: 'build' } });
    expect(prompt.status).toBe(202);
    expect(prompt.json).toEqual({ jobId: expect.any(String), sessionId, turnId: expect.any(String), messageId: expect.any(String) });

    await sse.until((e) => e.data.type === 'session.idle');
    const events = sse.events.map((e) => e.data);
    expect(sse.events.every((e) => typeof e.id === 'string' && e.id.length > 0)).toBe(true);
    expect(events.every((e) => e.properties.sessionID === sessionId)).toBe(true);
    expect(events.filter((e) => e.type === 'message.part.delta').map((e) => e.properties.delta).join('')).toBe('Hello from the scripted model');
    const statuses = events.filter((e) => e.type === 'session.status').map((e) => e.properties.status.type);
    expect(statuses).toContain('running');
    expect(statuses).not.toContain('busy');
    expect(statuses.at(-1)).toBe('idle');
    await sse.close();

    const messages = await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member });
    expect(messages.status).toBe(200);
    const [user, assistant] = messages.json.messages;
    expect(user.info).toMatchObject({ role: 'user', time: { created: expect.any(Number) } });
    expect(assistant.info).toMatchObject({ role: 'assistant', time: { created: expect.any(Number), completed: expect.any(Number) } });
    expect(assistant.info.path).toBeUndefined();
    const text = assistant.parts.find((p: any) => p.type === 'text');
    expect(text).toMatchObject({ id: expect.any(String), messageID: assistant.info.id, sessionID: sessionId, type: 'text', text: 'Hello from the scripted model' });

    // The model saw our prompt, and the model was the tenant's default.
    const main = r.llm.requests.filter((q) => !q.title);
    expect(JSON.stringify(main.at(-1)!.body.messages)).toContain('say hello');
    expect(main.at(-1)!.body.model).toBe('fake-model');

    // 1000 input tokens at $2/M + 500 output at $8/M = $0.006.
    await expect
      .poll(async () => (await api(r.t, 'GET', '/v1/admin/usage', { token: tokens.owner })).json, { timeout: 20_000, interval: 250 })
      .toMatchObject({ totalTokens: 1500, byModel: { 'fake-model': { tokens: 1500, cost: 0.006 } }, byUser: { [ids.mia]: { tokens: 1500 } } });
    const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=agent.prompt', { token: tokens.owner });
    expect(audit.json.entries[0]).toMatchObject({ action: 'agent.prompt', userId: ids.mia, sessionId, channel: 'web' });
  }, 90_000);

  it('a cold prompt\'s stream says what the start is doing (starting, started, sent) before the answer', async () => {
    const { tokens, ids } = people;
    // The turn before is indexed for search from the running runtime as it ends (a stopped one is never
    // started for it): that read finishes before this stops the runtime (under load it once had not).
    const indexed = async () => (await r.t.opened.db.query(`select count(*)::int as n from session_search_entries where owner_id = $1 and role = 'assistant'`, [ids.mia])).rows[0].n;
    await expect.poll(indexed, { timeout: 20_000, interval: 100 }).toBeGreaterThan(0);
    await r.t.opened.core.pool.stopUser(ids.mia);
    const created = await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'cold' } });
    const sessionId = created.json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    r.llm.script([{ text: 'Warm now' }]);
    const prompt = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'hello again', agent: 'build' } });
    expect(prompt.status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
    const types = sse.events.map((e) => e.data.type as string);
    const at = (t: string) => types.indexOf(t);
    expect(at('runtime.starting')).toBeGreaterThanOrEqual(0);
    expect(at('runtime.starting')).toBeLessThan(at('runtime.started'));
    expect(at('runtime.started')).toBeLessThan(at('turn.sent'));
    expect(at('turn.sent')).toBeLessThan(at('message.part.delta'));
    const started = sse.events.find((e) => e.data.type === 'runtime.started')!.data;
    expect(started.properties).toMatchObject({ sessionID: sessionId, message: expect.any(String), startMs: expect.any(Number) });

    // Warm, the next turn's stream has none of them.
    const sse2 = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    r.llm.script([{ text: 'Again' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'once more', agent: 'build' } });
    await sse2.until((e) => e.data.type === 'session.idle' && sse2.events.some((x) => x.data.type === 'message.part.delta'));
    await sse2.close();
    expect(sse2.events.filter((e) => /^(runtime\.|turn\.sent)/.test(e.data.type))).toEqual([]);
  }, 90_000);

  it('prepares a person\'s runtime ahead of their first prompt (the dashboard asks as it opens); only for those who may prompt', async () => {
    const { tokens, ids } = people;
    const running = async (userId: string) => (await r.t.opened.db.query(`select count(*)::int as n from agent_runtimes where user_id = $1`, [userId])).rows[0].n;
    await r.t.opened.core.pool.stopUser(ids.owner);
    expect(await running(ids.owner)).toBe(0);
    const res = await api(r.t, 'POST', '/v1/sessions/prepare', { token: tokens.owner });
    expect(res.status).toBe(202);
    expect(res.json).toEqual({ preparing: true });
    await expect.poll(() => running(ids.owner), { timeout: 30_000, interval: 100 }).toBe(1);
    const viewer = await api(r.t, 'POST', '/v1/sessions/prepare', { token: tokens.viewer });
    expect(viewer.status).toBe(403);
    expect(await running(ids.vic)).toBe(0);
  }, 60_000);

  it('the ended turn is searchable by its owner only and exported with its answer; the index-sessions job fills in a session never indexed', async () => {
    const { tokens } = people;
    // The session of the turn above: indexed in the background as its turn ended.
    const listed = (await api(r.t, 'GET', '/v1/sessions', { token: tokens.member })).json.sessions.find((s: any) => s.title === 'first turn');
    const search = async (q: string, token = tokens.member) => (await api(r.t, 'GET', `/v1/sessions/search?q=${encodeURIComponent(q)}`, { token })).json.results;
    await expect.poll(() => search('scripted model'), { timeout: 20_000, interval: 100 }).toEqual([expect.objectContaining({ sessionId: listed.sessionId, role: 'assistant', snippet: 'Hello from the scripted model' })]);
    expect(await search('say hello')).toEqual([expect.objectContaining({ sessionId: listed.sessionId, role: 'user' })]);
    expect(await search('scripted model', tokens.owner)).toEqual([]);
    const messages = (await api(r.t, 'GET', `/v1/sessions/${listed.sessionId}/messages`, { token: tokens.member })).json.messages;
    expect((await search('scripted'))[0].messageId).toBe(messages[1].info.id);

    const md = await api(r.t, 'GET', `/v1/sessions/${listed.sessionId}/export`, { token: tokens.member });
    expect(md.text).toContain('### You');
    expect(md.text).toContain('say hello');
    expect(md.text).toContain('Hello from the scripted model');
    const json = (await api(r.t, 'GET', `/v1/sessions/${listed.sessionId}/export?format=json`, { token: tokens.member })).json;
    expect(json.messages.map((m: any) => m.info.id)).toEqual(messages.map((m: any) => m.info.id));

    // As before the index existed: the job reads the transcript again, with its progress on the job.
    await r.t.opened.db.query(`delete from session_search_entries where session_id = $1`, [listed.sessionId]);
    await r.t.opened.db.query(`update agent_sessions set search_through = null where id = $1`, [listed.sessionId]);
    expect(await search('scripted')).toEqual([]);
    const job = await api(r.t, 'POST', '/v1/jobs', { token: tokens.owner, body: { kind: 'index-sessions' } });
    expect(job.status, job.text).toBe(202);
    await expect
      .poll(async () => (await api(r.t, 'GET', `/v1/jobs/${job.json.job.id}`, { token: tokens.owner })).json.job, { timeout: 30_000, interval: 200 })
      .toMatchObject({ status: 'completed', result: { total: 1, indexed: 1, failed: 0, remaining: 0 } });
    expect(await search('scripted')).toEqual([expect.objectContaining({ sessionId: listed.sessionId })]);
  }, 90_000);
});
