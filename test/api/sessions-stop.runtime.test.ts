import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/** A long answer the scripted model writes word by word (~3 s at 30 ms a word): a stop lands mid-answer. */
const WORDS = 100;
const LONG = Array.from({ length: WORDS }, (_, i) => `word${i}`).join(' ');
const LAST = `word${WORDS - 1}`;

type Messages = Array<{ info: any; parts: Array<Record<string, any>> }>;

/** Stopping a running turn and withdrawing a queued one, on real runtimes with the scripted model. */
describe('stopping a turn', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let memberSession: string;
  const db = () => r.t.opened.db;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // Members have cost limits: each model call holds its worst case until it is recorded.
    const member = (await r.t.opened.db.query<{ id: string }>(`select id from roles where tenant_id = $1 and name = 'member'`, [people.tenantId])).rows[0].id;
    const limited = await api(r.t, 'PATCH', `/v1/admin/roles/${member}`, { token: people.tokens.owner, body: { permissions: { cost: { monthly_limit_usd: 100, per_request_limit_usd: 10 } } } });
    expect(limited.status, limited.text).toBe(200);
  }, 120_000);
  afterAll(async () => r?.close());

  const newSession = async (token: string, title = 'stop') => (await api(r.t, 'POST', '/v1/sessions', { token, body: { title } })).json.sessionId as string;
  const messagesOf = async (token: string, id: string) => (await api(r.t, 'GET', `/v1/sessions/${id}/messages`, { token })).json.messages as Messages;
  const texts = (messages: Messages) => messages.filter((m) => m.info.role === 'assistant').flatMap((m) => m.parts.filter((p) => p.type === 'text').map((p) => String(p.text)));

  it('stops a turn mid-answer: the stream says who, the partial answer stays, its model call is charged, the next prompt is answered', async () => {
    const { tokens, ids } = people;
    const sessionId = (memberSession = await newSession(tokens.member));
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    r.llm.script([{ text: LONG, chunkDelayMs: 30, usage: { prompt: 1000, completion: 800 } }]);
    const prompt = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'write a long answer', agent: 'build' } });
    expect(prompt.status).toBe(202);
    const turnId = prompt.json.turnId as string;
    await sse.until((e) => e.data.type === 'message.part.delta' && /word1\b/.test(JSON.stringify(e.data.properties)));
    await new Promise((res) => setTimeout(res, 300));
    const holds = async () => (await db().query(`select count(*)::int as n from model_call_holds where user_id = $1`, [ids.mia])).rows[0].n as number;
    expect(await holds()).toBeGreaterThan(0);

    const stop = await api(r.t, 'POST', `/v1/sessions/${sessionId}/stop`, { token: tokens.member });
    expect(stop.status, stop.text).toBe(200);
    expect(stop.json).toEqual({ stopped: true, turnId, withdrawn: false, message: expect.any(String) });
    await sse.until((e) => e.data.type === 'session.idle', 10_000);
    const types = sse.events.map((e) => e.data.type);
    const stopped = sse.events.find((e) => e.data.type === 'turn.stopped')!;
    expect(stopped.data.properties).toMatchObject({ turnId, by: { userId: ids.mia }, sessionID: sessionId });
    // Said before the runtime's own end of the turn.
    expect(types.indexOf('turn.stopped')).toBeLessThan(types.lastIndexOf('session.idle'));
    // The model stopped writing: no word near the end of the answer reached the stream.
    expect(JSON.stringify(sse.events.map((e) => e.data))).not.toContain(LAST);

    // The partial answer stays in the transcript, cut where it was stopped.
    const after = await messagesOf(tokens.member, sessionId);
    const answer = texts(after).join(' ');
    expect(answer).toMatch(/^word0 word1\b/);
    expect(answer).not.toContain(LAST);
    expect(after.filter((m) => m.info.role === 'assistant').at(-1)!.info.error).toMatchObject({ name: 'MessageAbortedError' });

    // What was spent is recorded: the gateway charges the cut call (its hold settles).
    await expect.poll(async () => (await db().query(`select count(*)::int as n from usage_records where session_id = $1 and cost_usd > 0`, [sessionId])).rows[0].n, { timeout: 15_000, interval: 200 }).toBeGreaterThan(0);
    // ...and the call's hold against the member's limits is settled with that record.
    await expect.poll(holds, { timeout: 5_000, interval: 100 }).toBe(0);

    const audit = await db().query(`select user_id as "userId", details from audit_log where action = 'session.stop' and session_id = $1`, [sessionId]);
    expect(audit.rows).toEqual([{ userId: ids.mia, details: expect.objectContaining({ turnId, running: true }) }]);

    // Idempotent: nothing runs now.
    const again = await api(r.t, 'POST', `/v1/sessions/${sessionId}/stop`, { token: tokens.member });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ stopped: false, turnId: null });

    // The runtime takes the next prompt at once.
    const from = sse.events.length;
    r.llm.script([{ text: 'Answered after the stop.' }]);
    const t0 = Date.now();
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'go on', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => sse.events.indexOf(e) >= from && e.data.type === 'session.idle', 30_000);
    expect(Date.now() - t0).toBeLessThan(10_000);
    await sse.close();
    expect(texts(await messagesOf(tokens.member, sessionId))).toContain('Answered after the stop.');
  });

  it('a prompt sent while the turn ran (the runtime holds it behind the turn) goes next after the stop, once', async () => {
    const { tokens } = people;
    const sessionId = await newSession(tokens.member);
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    r.llm.script([{ text: LONG, chunkDelayMs: 30 }, { text: 'The second prompt answered.' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'first', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'message.part.delta');
    const second = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'SECOND-PROMPT', agent: 'build' } });
    // Handed to the runtime, which holds it until the running turn ends.
    await expect.poll(async () => (await db().query(`select status from agent_turns where id = $1`, [second.json.turnId])).rows[0].status, { timeout: 10_000, interval: 50 }).toBe('sent');
    const stop = await api(r.t, 'POST', `/v1/sessions/${sessionId}/stop`, { token: tokens.member });
    expect(stop.json).toMatchObject({ stopped: true, message: expect.stringContaining('goes next') });
    await sse.until((e) => e.data.type === 'message.part.updated' && e.data.properties.part?.text === 'The second prompt answered.', 30_000);
    const answered = sse.events.findIndex((e) => e.data.type === 'message.part.updated' && e.data.properties.part?.text === 'The second prompt answered.');
    await sse.until((e) => e.data.type === 'session.idle' && sse.events.indexOf(e) > answered, 30_000);
    await sse.close();
    const messages = await messagesOf(tokens.member, sessionId);
    expect(messages.filter((m) => m.info.role === 'user' && JSON.stringify(m.parts).includes('SECOND-PROMPT'))).toHaveLength(1);
    expect(texts(messages)).toContain('The second prompt answered.');
  });

  it('stops a turn waiting on a permission request: the request is gone', async () => {
    const { tokens } = people;
    const sessionId = await newSession(tokens.member);
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo no > never.txt', description: 'x' } } }, { text: 'should not run' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'run it', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'permission.asked');
    expect((await api(r.t, 'GET', `/v1/sessions/${sessionId}/permissions`, { token: tokens.member })).json.permissions).toHaveLength(1);
    const stop = await api(r.t, 'POST', `/v1/sessions/${sessionId}/stop`, { token: tokens.member });
    expect(stop.json).toMatchObject({ stopped: true });
    await sse.until((e) => e.data.type === 'session.idle', 10_000);
    expect((await api(r.t, 'GET', `/v1/sessions/${sessionId}/permissions`, { token: tokens.member })).json.permissions).toEqual([]);
    expect(sse.events.some((e) => e.data.type === 'permission.replied')).toBe(true);
    await sse.close();
    const dir = (await db().query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory as string;
    const { existsSync } = await import('node:fs');
    expect(existsSync(`${dir}/never.txt`)).toBe(false);
    expect(texts(await messagesOf(tokens.member, sessionId))).not.toContain('should not run');
  });

  it("is the owner's alone: another user's session is 404, a viewer is refused", async () => {
    const { tokens } = people;
    const stopOther = await api(r.t, 'POST', `/v1/sessions/${memberSession}/stop`, { token: tokens.owner });
    expect(stopOther.status).toBe(404);
    const withdrawOther = await api(r.t, 'DELETE', `/v1/sessions/${memberSession}/turns/00000000-0000-4000-8000-000000000000`, { token: tokens.owner });
    expect(withdrawOther.status).toBe(404);
    const viewer = await api(r.t, 'POST', `/v1/sessions/${memberSession}/stop`, { token: tokens.viewer });
    expect(viewer.status).toBe(403);
    expect(viewer.json).toMatchObject({ error: 'forbidden', message: expect.stringContaining('agents.create') });
    const unknownTurn = await api(r.t, 'DELETE', `/v1/sessions/${memberSession}/turns/00000000-0000-4000-8000-000000000000`, { token: tokens.member });
    expect(unknownTurn.status).toBe(404);
  });
});

describe('stopping a turn on a runner host', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp({ runner: true });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => r?.close());

  it('withdraws a prompt queued while the runtime starts (its model never sees it), stops the turn through the runner channel, takes the next prompt', async () => {
    const { tokens, ids } = people;
    const token = tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'runner stop' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ text: LONG, chunkDelayMs: 30 }, { text: 'Runner answered after the stop.' }]);
    // The runtime starts cold on the runner: the first prompt waits for it, the second behind the first.
    const first = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'long', agent: 'build' } });
    const second = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'SECOND-WITHDRAWN prompt', agent: 'build' } });
    expect(second.status).toBe(202);
    const withdraw = await api(r.t, 'DELETE', `/v1/sessions/${sessionId}/turns/${second.json.turnId}`, { token });
    expect(withdraw.status, withdraw.text).toBe(200);
    expect(withdraw.json).toEqual({ withdrawn: true, turnId: second.json.turnId });
    // Again: the same answer.
    expect((await api(r.t, 'DELETE', `/v1/sessions/${sessionId}/turns/${second.json.turnId}`, { token })).status).toBe(200);

    await sse.until((e) => e.data.type === 'message.part.delta', 60_000);
    // Sent: no longer withdrawn, stopped instead.
    const late = await api(r.t, 'DELETE', `/v1/sessions/${sessionId}/turns/${first.json.turnId}`, { token });
    expect(late.status).toBe(409);
    expect(late.json).toMatchObject({ error: 'turn_already_sent' });
    const stop = await api(r.t, 'POST', `/v1/sessions/${sessionId}/stop`, { token });
    expect(stop.json).toMatchObject({ stopped: true, turnId: first.json.turnId });
    await sse.until((e) => e.data.type === 'session.idle', 10_000);
    expect(sse.events.find((e) => e.data.type === 'turn.stopped')?.data.properties.by).toMatchObject({ userId: ids.mia });
    expect(sse.events.find((e) => e.data.type === 'turn.withdrawn')?.data.properties).toMatchObject({ turnId: second.json.turnId, by: { userId: ids.mia } });

    const from = sse.events.length;
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'again', agent: 'build' } })).status).toBe(202);
    // The next answer streams, then its turn ends (the stopped turn's own end may still arrive after `from`).
    const isDelta = (e: (typeof sse.events)[number]) => sse.events.indexOf(e) >= from && e.data.type === 'message.part.delta';
    await sse.until(isDelta, 30_000);
    const streamed = sse.events.findIndex(isDelta);
    await sse.until((e) => sse.events.indexOf(e) > streamed && e.data.type === 'session.idle', 30_000);
    await sse.close();
    await expect.poll(async () => JSON.stringify((await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token })).json.messages), { timeout: 15_000 }).toContain('Runner answered after the stop.');
    const messages = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token })).json.messages as Messages;
    expect(JSON.stringify(messages)).not.toContain(LAST);
    expect(JSON.stringify(messages)).not.toContain('SECOND-WITHDRAWN');
    expect(r.llm.requests.some((q) => JSON.stringify(q.body).includes('SECOND-WITHDRAWN'))).toBe(false);
    const audit = await r.t.opened.db.query(`select details from audit_log where action = 'turn.withdraw' and session_id = $1`, [sessionId]);
    expect(audit.rows).toEqual([{ details: expect.objectContaining({ turnId: second.json.turnId }) }]);
  });
});
