import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { startServe, type ServeProcess } from '../helpers/cli.js';
import { descendantsOf } from '../helpers/process-tree.js';
import { applyScriptedProvider, openSse, seedPeople, type SseEvent } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Crashes and restarts that lose nothing, as an operator would meet them: real `aws serve`
 * processes (the job worker in them, as on the embedded database), real sandboxed runtimes, the scripted
 * model streaming slowly, on both databases. This process holds the database and the API client only.
 *
 * - kill -9 of serve while a turn streams, one prompt on its way to the runtime (which was frozen: it never
 *   answers) and four more queued behind it: after the restart the cut model call is charged
 *   (the gateway's estimate), the streamed part of the answer is in the transcript, the turn ends with
 *   turn_lost on a stream resumed with Last-Event-ID, and the five prompts run within seconds, in the
 *   order they were accepted, each once.
 * - SIGTERM while a turn streams: exit 0 after the turns' grace (AGENTWS_SHUTDOWN_TURN_GRACE_SECONDS), the
 *   turn's turn_lost on the stream before it closes and on a stream resumed after the restart, the call
 *   charged; SIGTERM while a turn that ends within the grace runs: it ends normally, then exit 0.
 */

/** Sends a signal to a process and all its descendants (a runtime's sandbox, its bridge, opencode, its tools). */
function signalTree(pid: number, signal: NodeJS.Signals): void {
  for (const p of [pid, ...descendantsOf(pid)]) {
    try {
      process.kill(p, signal);
    } catch {
      // gone already
    }
  }
}

const deltas = (events: SseEvent[]) => events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');
const lostEvent = (e: SseEvent) => e.data.type === 'session.error' && e.data.properties.error?.code === 'turn_lost';
/** The scripted model's slow answer: 40 words, 250 ms apart (10 s), long enough to be cut mid-way. */
const SLOW_WORDS = Array.from({ length: 40 }, (_, i) => `w${i}`);

describe(`crashes and restarts of serve lose nothing (${DB_MODE})`, () => {
  let llm: FakeLlm;
  let t: TestApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let sessionId = '';
  const serves: ServeProcess[] = [];
  // The turns' grace is short here (2 s): the SIGTERM cases decide it themselves where it matters.
  const serveEnv = { AGENTWS_PORT: '0', AGENTWS_SERVE_RUNS_WORKER: 'true', AGENTWS_SHUTDOWN_TURN_GRACE_SECONDS: '2' };
  const auth = () => ({ authorization: `Bearer ${people.tokens.member}` });

  beforeAll(async () => {
    llm = await startFakeLlm();
    // "slow <x>": the long answer, streamed slowly; "quick <x>": "answer to <x>" at once.
    llm.respond((req) => {
      const m = /^(slow|quick) (.+)$/.exec(String(req.lastUser ?? '').trim());
      if (!m) return undefined;
      if (m[1] === 'slow') return { text: SLOW_WORDS.join(' '), chunkDelayMs: 250 };
      // "quick last" takes a moment: it is still running when serve is told to stop.
      return { text: `answer to ${m[2]}`, ...(m[2] === 'last' ? { delayMs: 1500 } : {}) };
    });
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    people = await seedPeople(t, 'acme');
    await applyScriptedProvider(t, people.tokens.owner, llm);
  }, 120_000);
  afterAll(async () => {
    for (const s of serves) if (s.child.exitCode === null && s.child.signalCode === null) await s.stop('SIGKILL').catch(() => {});
    await t?.close();
    await llm?.close();
  });

  const call = async (base: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers: { ...auth(), ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
  const prompt = async (base: string, text: string) => expect((await call(base, 'POST', `/v1/sessions/${sessionId}/prompt`, { text, agent: 'build' })).status).toBe(202);
  const turns = async () =>
    (await t.opened.db.query<{ text: string; status: string; parked: boolean }>(
      `select parts->0->>'text' as text, status, parked_at is not null as parked from agent_turns where session_id = $1 order by created_at`,
      [sessionId],
    )).rows;
  const startOne = async (extra: Record<string, string> = {}) => {
    const s = await startServe(t.env, { extraEnv: { ...serveEnv, ...extra } });
    serves.push(s);
    return s;
  };
  /** The model's requests of this session's turns, by the last prompt each answers (title requests left out). */
  const asked = () =>
    llm.requests
      .filter((q) => !q.title)
      .map((q) => {
        const content = (q.body.messages as Array<{ role: string; content: unknown }>).filter((m) => m.role === 'user').at(-1)?.content;
        return typeof content === 'string' ? content : Array.isArray(content) ? content.map((c: { text?: string }) => c?.text ?? '').join('\n') : '';
      });

  it('kill -9 of serve mid-answer, with prompts queued: the cut call is charged, the partial answer kept, the end on the resumed stream, the queue runs within seconds, in order, once', async () => {
    const first = await startOne();
    sessionId = (await call(first.url, 'POST', '/v1/sessions', { title: 'crash' })).json.sessionId;
    const sse = await openSse(`${first.url}/v1/sessions/${sessionId}/events`, auth());
    await prompt(first.url, 'slow one');
    await sse.until((e) => e.data.type === 'message.part.delta' && /w4/.test(deltas(sse.events)), 90_000);
    // The runtime freezes (SIGSTOP, as a host under pressure or a frozen runner): the next prompt is on its
    // way to it when serve dies, its job still active.
    const { rows } = await t.opened.db.query<{ pid: number }>(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia]);
    const runtimePid = rows[0].pid;
    signalTree(runtimePid, 'SIGSTOP');
    await prompt(first.url, 'quick q2');
    const handing = async () => (await t.opened.db.query(`select 1 from agent_turns where session_id = $1 and status = 'sending' and handing_at is not null`, [sessionId])).rowCount;
    await expect.poll(handing, { timeout: 20_000, interval: 100 }).toBe(1);
    for (const q of ['q3', 'q4', 'q5', 'q6']) await prompt(first.url, `quick ${q}`);
    // The four behind it wait for it (turns run in the order they were accepted), and are told why.
    await expect.poll(async () => (await turns()).map((x) => [x.status, x.parked]), { timeout: 20_000 }).toEqual([
      ['sent', false],
      ['sending', false],
      ['queued', true],
      ['queued', true],
      ['queued', true],
      ['queued', true],
    ]);
    await sse.until((e) => e.data.type === 'turn.waiting' && e.data.properties.why === 'earlier_turn', 10_000);
    const streamed = deltas(sse.events);
    const lastSeen = sse.events.at(-1)!.id!;

    await first.stop('SIGKILL');
    // Its runtime dies with it (the sandbox dies with its parent); stopped, it is made sure of.
    signalTree(runtimePid, 'SIGKILL');
    signalTree(runtimePid, 'SIGCONT');
    await sse.close();
    expect(await t.opened.db.query(`select 1 from usage_records where session_id = $1 and estimated`, [sessionId]).then((r) => r.rowCount)).toBe(0);
    const before = asked().length;

    const second = await startOne();
    const restarted = Date.now();
    const resumed = await openSse(`${second.url}/v1/sessions/${sessionId}/events`, { ...auth(), 'last-event-id': lastSeen });
    // The interrupted turn ends on the resumed stream.
    await resumed.until(lostEvent, 30_000);
    expect(resumed.events.filter(lostEvent)).toHaveLength(1);
    // The queued prompts run, in order, within seconds of the restart (not after the job queue's two minutes).
    const handed = async () => (await turns()).map((x) => (x.status === 'done' ? 'sent' : x.status));
    await expect.poll(handed, { timeout: 60_000, interval: 250 }).toEqual(['lost', 'sent', 'sent', 'sent', 'sent', 'sent']);
    const allSentMs = Date.now() - restarted;
    await resumed.until((e) => e.data.type === 'session.idle' && /answer to q6/.test(deltas(resumed.events)), 60_000);
    expect(allSentMs).toBeLessThan(45_000);
    console.log(`[crash-recovery ${DB_MODE}] restart → the five queued prompts handed over: ${allSentMs} ms`);
    // Each once, in the order they were accepted: the model was asked in that order, never twice for one
    // (the runtime may answer prompts that arrived while it worked in one step), and so says the transcript.
    const after = asked().slice(before);
    expect(after[0]).toBe('quick q2');
    expect(after.at(-1)).toBe('quick q6');
    expect(new Set(after).size).toBe(after.length);
    expect([...after].sort()).toEqual(after);
    const messages = (await call(second.url, 'GET', `/v1/sessions/${sessionId}/messages`)).json.messages as Array<{ info: any; parts: any[] }>;
    expect(messages.filter((m) => m.info.role === 'user').map((m) => m.parts.find((p) => p.type === 'text')?.text)).toEqual(['slow one', 'quick q2', 'quick q3', 'quick q4', 'quick q5', 'quick q6']);
    // What the person read of the cut answer is kept (saved at most a second behind the stream).
    const cut = messages.filter((m) => m.info.role === 'assistant' && m.info.parentID === messages[0].info.id);
    const kept = cut.flatMap((m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text)).join('');
    expect(cut.at(-1)!.info.error).toMatchObject({ name: 'TurnLost' });
    expect(kept.length).toBeGreaterThan(0);
    expect(streamed.startsWith(kept.trim()) || kept.startsWith(streamed.trim().split(' ').slice(0, 3).join(' '))).toBe(true);
    expect(kept).toContain('w0 w1 w2');
    // The cut call is charged, at the gateway's estimate, once.
    const charged = await t.opened.db.query<{ estimated: boolean; output: number }>(`select estimated, tokens_output::int as output from usage_records where session_id = $1 and estimated`, [sessionId]);
    expect(charged.rows).toEqual([{ estimated: true, output: 4096 }]);
    expect(second.logs()).toContain('model calls left in flight by a process that died were recorded');
    await resumed.close();
  }, 300_000);

  it('SIGTERM mid-answer: exit 0 after the grace, turn_lost on the stream before it closes and on one resumed after the restart, the call charged; a turn that ends within the grace ends normally', async () => {
    const second = serves.at(-1)!;
    const sse = await openSse(`${second.url}/v1/sessions/${sessionId}/events`, auth());
    await prompt(second.url, 'slow seven');
    await sse.until(() => deltas(sse.events).includes('w2 '), 90_000);
    const beforeEnd = sse.events.at(-1)!.id!;
    const stopped = await second.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    // The grace (2 s), the runtime's stop and the rest (the old serve hung until it gave up after 12 s, exit 1).
    expect(stopped.ms).toBeLessThan(20_000);
    console.log(`[crash-recovery ${DB_MODE}] SIGTERM mid-answer, grace 2 s → exit 0 after ${stopped.ms} ms`);
    await sse.until(() => sse.ended, 5000).catch(() => {});
    // The end reached the stream before it closed.
    const ends = sse.events.filter(lostEvent);
    expect(ends).toHaveLength(1);
    expect(sse.events.indexOf(ends[0])).toBeGreaterThan(sse.events.findIndex((e) => e.id === beforeEnd));
    expect(second.logs()).toMatch(/turns still running at the end of the grace/);
    expect(second.logs()).not.toContain('shutdown took too long');
    const charged = await t.opened.db.query(`select 1 from usage_records where session_id = $1 and estimated`, [sessionId]);
    expect(charged.rowCount).toBe(2);

    // A client that missed it (it reconnects after the restart from before the end) is told.
    const third = await startOne({ AGENTWS_SHUTDOWN_TURN_GRACE_SECONDS: '30' });
    const resumed = await openSse(`${third.url}/v1/sessions/${sessionId}/events`, { ...auth(), 'last-event-id': beforeEnd });
    await resumed.until(lostEvent, 15_000);
    expect(resumed.events.filter(lostEvent).map((e) => e.id)).toEqual([ends[0].id]);

    // A turn that ends within the grace: it ends as it would have, then serve exits 0.
    await prompt(third.url, 'quick last');
    await resumed.until((e) => e.data.type === 'session.status' && e.data.properties.status?.type === 'running' && resumed.events.indexOf(e) > resumed.events.findIndex(lostEvent), 60_000);
    const done = await third.stop('SIGTERM');
    expect(done.code).toBe(0);
    await resumed.until(() => resumed.ended, 5000).catch(() => {});
    expect(deltas(resumed.events)).toContain('answer to last');
    expect(resumed.events.some((e) => e.data.type === 'session.idle')).toBe(true);
    expect((await turns()).at(-1)!.status).toBe('done');
  }, 300_000);
});
