import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { AGENT_TURN_JOB } from '../../src/core/sessions/session-turns.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople } from '../helpers/runtime.js';

/**
 * A session's turns reach its runtime in the order they were accepted, whatever held an
 * earlier one up (a frozen runner, a runtime starting, a worker that died). Here nothing works the job
 * queue: the test runs each turn's job itself, in the order that broke it (the later prompt's job first),
 * against the real runtime; and the turns a dead worker's job leaves behind are handed on.
 */
describe('turns run in the order their session accepted them', () => {
  let llm: FakeLlm;
  let t: TestApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  const ctx = systemCtx(silentLogger, { name: 'test' });

  beforeAll(async () => {
    llm = await startFakeLlm();
    llm.respond((req) => {
      const m = /^say (.+)$/.exec(String(req.lastUser ?? '').trim());
      return m ? { text: `said ${m[1]}` } : undefined;
    });
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    await t.opened.core.startRuntime();
    people = await seedPeople(t, 'acme');
    await applyScriptedProvider(t, people.tokens.owner, llm);
  }, 120_000);
  afterAll(async () => {
    await t?.opened.core.stopRuntime().catch(() => {});
    await t?.close();
    await llm?.close();
  });

  const token = () => people.tokens.member;
  const newSession = async (title: string) => (await api(t, 'POST', '/v1/sessions', { token: token(), body: { title } })).json.sessionId as string;
  const prompt = async (sessionId: string, text: string) => {
    expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: token(), body: { text, agent: 'build' } })).status).toBe(202);
    return (await t.opened.db.query<{ id: string }>(`select id from agent_turns where session_id = $1 order by created_at desc limit 1`, [sessionId])).rows[0].id;
  };
  const turns = async (sessionId: string) =>
    (await t.opened.db.query<{ status: string; parked: boolean }>(`select status, parked_at is not null as parked from agent_turns where session_id = $1 order by created_at`, [sessionId])).rows.map((r) => [r.status, r.parked]);
  const jobsOf = async (turnId: string) => (await t.opened.db.query(`select state from pgboss.job where name = $1 and data->>'turnId' = $2 and state in ('created', 'retry')`, [AGENT_TURN_JOB, turnId])).rowCount;
  const userPrompts = async (sessionId: string) =>
    ((await api(t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: token() })).json.messages as Array<{ info: any; parts: any[] }>)
      .filter((m) => m.info.role === 'user')
      .map((m) => m.parts.find((p) => p.type === 'text')?.text);

  it('a later prompt whose job runs first waits for the earlier one (and is told why), then follows it', async () => {
    const sessionId = await newSession('order');
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token()}` });
    // The first prompt's job is held up (as by a frozen runner): the second's runs first.
    const first = await prompt(sessionId, 'say first');
    const second = await prompt(sessionId, 'say second');
    await t.opened.core.turns.runTurn(ctx, { turnId: second });
    expect(await turns(sessionId)).toEqual([
      ['queued', false],
      ['queued', true],
    ]);
    await sse.until((e) => e.data.type === 'turn.waiting' && e.data.properties.why === 'earlier_turn', 10_000);
    expect(await userPrompts(sessionId)).toEqual([]);
    // The first goes; once the runtime has it, the second is queued again (a job of its own).
    await t.opened.core.turns.runTurn(ctx, { turnId: first });
    expect(await turns(sessionId)).toEqual([
      [expect.stringMatching(/^(sent|done)$/), false],
      ['queued', false],
    ]);
    expect(await jobsOf(second)).toBe(2); // the one from its prompt, never run here, and the new one
    await t.opened.core.turns.runTurn(ctx, { turnId: second });
    await sse.until((e) => e.data.type === 'session.idle' && sse.events.filter((x) => x.data.type === 'message.part.delta').map((x) => x.data.properties.delta).join('').includes('said second'), 60_000);
    expect(await userPrompts(sessionId)).toEqual(['say first', 'say second']);
    // Its first job, run late, finds it handed over already: nothing is sent twice.
    await t.opened.core.turns.runTurn(ctx, { turnId: second });
    expect(await userPrompts(sessionId)).toEqual(['say first', 'say second']);
    await sse.close();
  }, 120_000);

  it('a turn given up (its job failed for good, its worker dead) hands on to the next; a parked turn nobody handed on is found by the sweep', async () => {
    const sessionId = await newSession('handed on');
    const first = await prompt(sessionId, 'say one');
    const second = await prompt(sessionId, 'say two');
    const third = await prompt(sessionId, 'say three');
    await t.opened.core.turns.runTurn(ctx, { turnId: second });
    await t.opened.core.turns.runTurn(ctx, { turnId: third });
    expect(await turns(sessionId)).toEqual([
      ['queued', false],
      ['queued', true],
      ['queued', true],
    ]);
    // The first's job failed for good (the dead-letter queue): it is given up, the second goes next.
    await t.opened.core.turns.jobLost(ctx, { turnId: first });
    expect(await turns(sessionId)).toEqual([
      ['failed', false],
      ['queued', false],
      ['queued', true],
    ]);
    await t.opened.core.turns.runTurn(ctx, { turnId: second });
    expect((await turns(sessionId))[1][0]).toMatch(/^(sent|done)$/);
    // As if the process that handed the second over had died before it could hand on: the sweep does.
    await t.opened.db.query(`update agent_turns set parked_at = now(), error = 'waiting for an earlier turn of its session' where id = $1`, [third]);
    expect(await t.opened.core.turns.unstick()).toBe(1);
    expect((await turns(sessionId))[2]).toEqual(['queued', false]);
    expect(await t.opened.core.turns.unstick()).toBe(0);
    await t.opened.core.turns.runTurn(ctx, { turnId: third });
    await expect.poll(() => userPrompts(sessionId), { timeout: 30_000 }).toEqual(['say two', 'say three']);
  }, 120_000);
});
