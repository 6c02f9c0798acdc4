import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * A turn whose runtime goes away while it runs (issue 26: measured before, the cut answer stayed an empty
 * assistant message and nobody was told): it ends with a clear session.error, and the next prompt works.
 */
describe('a turn lost with its runtime', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => r?.close());

  it('kill -9 of the runtime mid-turn ends the turn with session.error (turn_lost), once, and the next turn runs', async () => {
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'lost' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo started; sleep 60', description: 'wait' } } }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'wait a minute', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'message.part.updated' && e.data.properties.part?.type === 'tool' && e.data.properties.part?.state?.status === 'running', 60_000);
    const { rows } = await r.t.opened.db.query<{ pid: number }>(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia]);
    process.kill(rows[0].pid, 'SIGKILL');
    await sse.until((e) => e.data.type === 'session.error', 30_000);
    const errors = sse.events.filter((e) => e.data.type === 'session.error');
    expect(errors).toHaveLength(1);
    expect(errors[0].data.properties.error).toMatchObject({ name: 'TurnLost', code: 'turn_lost', message: expect.stringContaining('Send the prompt again') });
    const turn = await r.t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1`, [sessionId]);
    expect(turn.rows.map((t) => t.status)).toEqual(['lost']);
    // The runtime is restarted; the next prompt is answered.
    r.llm.script([{ text: 'back again' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'again', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle' && sse.events.some((x) => x.data.type === 'message.part.delta' && x.data.properties.delta?.includes('back')), 60_000);
    await new Promise((res) => setTimeout(res, 500));
    expect(sse.events.filter((e) => e.data.type === 'session.error')).toHaveLength(1);
    const ended = await r.t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1 order by created_at`, [sessionId]);
    expect(ended.rows.map((t) => t.status)).toEqual(['lost', 'done']);
    await sse.close();
  }, 180_000);
});
