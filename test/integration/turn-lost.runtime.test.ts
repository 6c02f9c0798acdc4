import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProcessAlive } from '../../src/lib/process-state.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { startServe, type ServeProcess } from '../helpers/cli.js';
import { descendantsOf } from '../helpers/process-tree.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp, type SseEvent } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * A turn whose runtime goes away while it runs (measured before, the cut answer stayed an empty
 * assistant message and nobody was told): it ends with a clear session.error, once, the transcript says
 * so to whoever reads it later, and the next prompt works. A turn not yet handed over is not lost: it
 * runs once a runtime is there again.
 */

type Message = { info: Record<string, any>; parts: Array<Record<string, any>> };

/** The assistant messages answering the user message that holds `text`. */
function answersTo(messages: Message[], text: string): Message[] {
  const asked = messages.find((m) => m.info.role === 'user' && m.parts.some((p) => p.type === 'text' && p.text === text));
  if (!asked) throw new Error(`no prompt "${text}" in ${JSON.stringify(messages.map((m) => m.info.role))}`);
  return messages.filter((m) => m.info.role === 'assistant' && m.info.parentID === asked.info.id);
}

const toolRunning = (e: SseEvent) => e.data.type === 'message.part.updated' && e.data.properties.part?.type === 'tool' && e.data.properties.part?.state?.status === 'running';
const deltas = (events: SseEvent[]) => events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');

describe('a turn lost with its runtime', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  /** The idle-stop case's turn, run first on the owner's runtime (see that case). */
  let idle: { sessionId: string; sse: Awaited<ReturnType<typeof openSse>>; endedAt: number };

  beforeAll(async () => {
    r = await startRuntimeApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // The idle-stop case needs a runtime unused for longer than the host's idle bound (5 s) when it is
    // stopped: its one turn runs here, on a runtime of its own (the owner's), so the cases between
    // are that wait instead of a sleep.
    const token = people.tokens.owner;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'idle stop' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ text: 'quick answer' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'quick', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle', 60_000);
    // (expect.poll is for tests only.)
    const status = async () => (await r.t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1`, [sessionId])).rows[0]?.status;
    for (const until = Date.now() + 10_000; (await status()) !== 'done'; ) {
      if (Date.now() > until) throw new Error(`the idle case's turn did not end: ${await status()}`);
      await new Promise((res) => setTimeout(res, 50));
    }
    idle = { sessionId, sse, endedAt: Date.now() };
  }, 120_000);
  afterAll(async () => {
    await idle?.sse.close();
    await r?.close();
  });

  /** Mia's runtime killed as the OOM killer or a crash would: the whole tree at once (the sandbox, the runtime, a tool's shell). */
  const killMiasRuntime = async () => {
    const { rows } = await r.t.opened.db.query<{ pid: number }>(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia]);
    for (const pid of [rows[0].pid, ...descendantsOf(rows[0].pid)]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone with its parent already
      }
    }
  };

  it('kill -9 of the runtime\'s processes mid-turn ends the turn with session.error (turn_lost), once, the transcript says so, and the next turn runs', async () => {
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'lost' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo started; sleep 60', description: 'wait' } } }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'wait a minute', agent: 'build' } })).status).toBe(202);
    await sse.until(toolRunning, 60_000);
    await killMiasRuntime();
    await sse.until((e) => e.data.type === 'session.error', 30_000);
    const errors = sse.events.filter((e) => e.data.type === 'session.error');
    expect(errors).toHaveLength(1);
    expect(errors[0].data.properties.error).toMatchObject({ name: 'TurnLost', code: 'turn_lost', message: expect.stringContaining('Send the prompt again') });
    expect(errors[0].data.properties.error.message).toContain('the answer above may be cut short');
    // The session is idle again (the dashboard stops its "working" state).
    await sse.until((e) => e.data.type === 'session.status' && e.data.properties.status?.type === 'idle' && sse.events.indexOf(e) > sse.events.indexOf(errors[0]), 5000);
    const turn = await r.t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1`, [sessionId]);
    expect(turn.rows.map((t) => t.status)).toEqual(['lost']);

    // Whoever reads the transcript later (a reload, another device) reads it too: on the cut answer.
    const read = await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token });
    expect(read.status).toBe(200);
    const cut = answersTo(read.json.messages, 'wait a minute');
    expect(cut.length).toBeGreaterThan(0);
    expect(cut.at(-1)!.info.error).toMatchObject({ name: 'TurnLost', data: { code: 'turn_lost', message: expect.stringContaining('Send the prompt again') } });

    // The runtime is restarted; the next prompt is answered.
    r.llm.script([{ text: 'back again' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'again', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle' && deltas(sse.events).includes('back again'), 60_000);
    // A fixed time on purpose: what is checked is that no second report follows.
    await new Promise((res) => setTimeout(res, 500));
    expect(sse.events.filter((e) => e.data.type === 'session.error')).toHaveLength(1);
    await expect
      .poll(async () => (await r.t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1 order by created_at`, [sessionId])).rows.map((t) => t.status), { timeout: 10_000 })
      .toEqual(['lost', 'done']);
    const after = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token })).json.messages as Message[];
    expect(answersTo(after, 'wait a minute').at(-1)!.info.error?.name).toBe('TurnLost');
    expect(answersTo(after, 'again').every((m) => !m.info.error)).toBe(true);
    await sse.close();
  }, 180_000);

  it('a runtime killed while the model streams: its model call is aborted at once and charged the estimate, and what streamed stays in the transcript', async () => {
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'cut mid-answer' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    // 40 words a quarter of a second apart: ten seconds of answer the provider bills while it runs.
    r.llm.script([{ text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '), chunkDelayMs: 250 }]);
    const before = r.llm.requests.length;
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'a long answer', agent: 'build' } })).status).toBe(202);
    await sse.until(() => deltas(sse.events).includes('w3 '), 60_000);
    const call = r.llm.requests.slice(before).find((q) => !q.title)!;
    await killMiasRuntime();
    await sse.until((e) => e.data.type === 'session.error', 30_000);
    // The gateway hung up on the provider as soon as the turn was lost, rather than reading the rest.
    await expect.poll(() => call.hungUp, { interval: 50 }).toBe(true);
    expect(call.chunks).toBeLessThan(35);
    // ...and charged it (the gateway's estimate: it cannot know what the provider billed of the rest).
    const charged = async () => (await r.t.opened.db.query<{ output: number }>(`select tokens_output::int as output from usage_records where session_id = $1 and estimated`, [sessionId])).rows;
    await expect.poll(charged).toEqual([{ output: 4096 }]);
    // What the person read of the cut answer is what the transcript keeps (the runtime stored none of it).
    const streamed = deltas(sse.events);
    const cut = answersTo((await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token })).json.messages, 'a long answer');
    const kept = cut.flatMap((m) => m.parts.filter((p) => p.type === 'text').map((p) => String(p.text))).join('');
    expect(kept).toContain('w0 w1 w2 w3');
    expect(streamed.startsWith(kept)).toBe(true);
    expect(cut.at(-1)!.info.error).toMatchObject({ name: 'TurnLost' });
    await sse.close();
  }, 120_000);

  it('a runtime stopped while idle reports nothing: a turn whose end went unseen is marked ended, not lost', async () => {
    const { sessionId, sse, endedAt } = idle;
    // As if its end had been missed (an event stream cut at that moment).
    await r.t.opened.db.query(`update agent_turns set status = 'sent' where session_id = $1`, [sessionId]);
    // Unused long enough to count as idle (the cases before took that long already, as a rule).
    await new Promise((res) => setTimeout(res, Math.max(0, endedAt + 6500 - Date.now())));
    await r.t.opened.core.pool.stopUser(people.ids.owner);
    await expect.poll(async () => (await r.t.opened.db.query(`select status from agent_turns where session_id = $1`, [sessionId])).rows[0]?.status, { timeout: 10_000 }).toBe('done');
    // A fixed time on purpose: what is checked is that no report follows.
    await new Promise((res) => setTimeout(res, 300));
    expect(sse.events.filter((e) => e.data.type === 'session.error')).toHaveLength(0);
  }, 120_000);

  it('a runtime stopped on purpose mid-turn (an operator, a shutdown) ends the turn the same way', async () => {
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'stopped' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo started; sleep 60', description: 'wait' } } }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'wait again', agent: 'build' } })).status).toBe(202);
    await sse.until(toolRunning, 60_000);
    await r.t.opened.core.pool.stopUser(people.ids.mia);
    await sse.until((e) => e.data.type === 'session.error', 30_000);
    expect(sse.events.filter((e) => e.data.type === 'session.error').map((e) => e.data.properties.error)).toEqual([
      expect.objectContaining({ code: 'turn_lost', message: expect.stringContaining('it was stopped: stopped on request') }),
    ]);
    expect((await r.t.opened.db.query(`select status from agent_turns where session_id = $1`, [sessionId])).rows.map((x) => x.status)).toEqual(['lost']);
    await sse.close();
  }, 120_000);
});

/**
 * The serve hosting the runtimes killed (SIGKILL: its runtimes die with it) mid-turn and started again, on
 * PostgreSQL with real `aws serve` processes: the new serve finds the turn its predecessor left in flight
 * and ends it (session.error for a client still following the session, and in the transcript for one that
 * reads it after the restart); a turn queued while no serve ran is not lost but runs.
 */
describe.runIf(DB_MODE === 'postgres')('a turn lost with the serve that hosted its runtime', () => {
  let llm: FakeLlm;
  let t: TestApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  const serves: ServeProcess[] = [];
  const serveEnv = { AGENTWS_PORT: '0', AGENTWS_SERVE_RUNS_WORKER: 'true' };

  beforeAll(async () => {
    llm = await startFakeLlm();
    // "sleep <s>": bash sleeps first; "answer <x>": "answer to <x>".
    llm.respond((req) => {
      const toolDone = (req.body.messages as Array<{ role: string }>).some((m) => m.role === 'tool');
      const m = /^(answer|sleep) (.+)$/.exec(String(req.lastUser ?? '').trim());
      if (!m) return undefined;
      if (m[1] === 'answer') return { text: `answer to ${m[2]}` };
      if (toolDone) return { text: `slept ${m[2]}` };
      return { toolCall: { name: 'bash', arguments: { command: `echo started; sleep ${m[2]}`, description: 'wait' } } };
    });
    // This process is the API and the database only: the serves below host the runtimes and run the jobs.
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    people = await seedPeople(t, 'acme');
    await applyScriptedProvider(t, people.tokens.owner, llm);
  }, 120_000);
  afterAll(async () => {
    // (One killed already has no exit to wait for.)
    for (const s of serves) if (s.child.exitCode === null && s.child.signalCode === null) await s.stop('SIGKILL').catch(() => {});
    await t?.close();
    await llm?.close();
  });

  const call = async (base: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${people.tokens.member}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
  const turns = async (sessionId: string) =>
    (await t.opened.db.query<{ status: string }>(`select status from agent_turns where session_id = $1 order by created_at`, [sessionId])).rows.map((x) => x.status);

  it('kill -9 of serve mid-turn, then a restart: the lost turn ends with session.error (turn_lost) and says so in the transcript; the session works again', async () => {
    const first = await startServe(t.env, { extraEnv: serveEnv });
    serves.push(first);
    const sessionId = (await call(first.url, 'POST', '/v1/sessions', { title: 'serve killed' })).json.sessionId as string;
    const sse = await openSse(`${first.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    expect((await call(first.url, 'POST', `/v1/sessions/${sessionId}/prompt`, { text: 'sleep 120', agent: 'build' })).status).toBe(202);
    await sse.until(toolRunning, 90_000);
    const lastSeen = sse.events.at(-1)!.id!;
    const runtime = (await t.opened.db.query<{ pid: number; hostPid: number }>(`select pid, host_pid as "hostPid" from agent_runtimes where user_id = $1`, [people.ids.mia])).rows[0];
    expect(runtime.hostPid).toBe(first.child.pid);
    expect(await turns(sessionId)).toEqual(['sent']);

    await first.stop('SIGKILL');
    await sse.close();
    // The runtime died with its serve (the sandbox dies with its parent).
    await expect.poll(() => isProcessAlive(runtime.pid), { timeout: 15_000, interval: 200 }).toBe(false);
    // Nobody is left to tell: the turn is still in flight as far as the database knows.
    expect(await turns(sessionId)).toEqual(['sent']);
    // The person sends another prompt while no serve runs: it waits in the queue (not handed over, not lost).
    expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'answer meanwhile', agent: 'build' } })).status).toBe(202);

    const second = await startServe(t.env, { extraEnv: serveEnv });
    serves.push(second);
    // A client that was following the session reconnects (as EventSource does, with the last id it saw).
    const resumed = await openSse(`${second.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}`, 'last-event-id': lastSeen });
    // One that connects afresh.
    const fresh = await openSse(`${second.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    await resumed.until((e) => e.data.type === 'session.error', 30_000);
    const errors = resumed.events.filter((e) => e.data.type === 'session.error');
    expect(errors).toHaveLength(1);
    expect(errors[0].data.properties.error).toMatchObject({ name: 'TurnLost', code: 'turn_lost', message: expect.stringContaining('the service hosting it stopped') });

    // The queued prompt runs on a new runtime of the new serve, and is answered.
    await fresh.until((e) => e.data.type === 'session.idle' && deltas(fresh.events).includes('answer to meanwhile'), 120_000);
    await expect.poll(() => turns(sessionId), { timeout: 10_000 }).toEqual(['lost', 'done']);

    // Read after the restart: the cut answer carries the error; the answer that followed does not.
    const messages = (await call(second.url, 'GET', `/v1/sessions/${sessionId}/messages`)).json.messages as Message[];
    expect(answersTo(messages, 'sleep 120').at(-1)!.info.error).toMatchObject({ name: 'TurnLost', data: { code: 'turn_lost' } });
    expect(answersTo(messages, 'answer meanwhile').every((m) => !m.info.error)).toBe(true);

    // And the session goes on.
    expect((await call(second.url, 'POST', `/v1/sessions/${sessionId}/prompt`, { text: 'answer again', agent: 'build' })).status).toBe(202);
    await fresh.until((e) => e.data.type === 'session.idle' && deltas(fresh.events).includes('answer to again'), 60_000);
    await expect.poll(() => turns(sessionId), { timeout: 10_000 }).toEqual(['lost', 'done', 'done']);
    // A fixed time on purpose: what is checked is that no second report follows.
    await new Promise((res) => setTimeout(res, 500));
    // Reported once: each client saw it at most once (the fresh one only if it connected before the report).
    expect(resumed.events.filter((e) => e.data.type === 'session.error')).toHaveLength(1);
    expect(fresh.events.filter((e) => e.data.type === 'session.error').length).toBeLessThanOrEqual(1);
    expect(second.logs()).toContain('a turn was lost with its runtime');
    await resumed.close();
    await fresh.close();
  }, 300_000);
});
