import http from 'node:http';
import { renameSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ORCHESTRATE_STEP_JOB } from '../../src/core/orchestrator/orchestrator.service.js';
import { AGENT_TURN_JOB } from '../../src/core/sessions/turn-runner.js';
import { processStatFields } from '../../src/lib/process-state.js';
import { startFakeLlm } from '../fixtures/fake-llm.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { startServe, type ServeProcess } from '../helpers/cli.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';
import { descendantsOf } from '../helpers/process-tree.js';

/** A process's niceness (NaN once it is gone). */
const niceOf = (pid: number) => Number(processStatFields(pid)?.[16]);

/**
 * Puts a proxy in front of a user's running runtime, on its recorded socket path: it counts prompts
 * reaching the runtime and can keep their responses from the caller (to kill a worker mid-send).
 */
async function interpose(socketPath: string) {
  const real = `${socketPath}.real`;
  renameSync(socketPath, real);
  const proxy = { prompts: 0, hold: false };
  const server = http.createServer((req, res) => {
    const isPrompt = req.method === 'POST' && /\/prompt_async/.test(req.url ?? '');
    const up = http.request({ socketPath: real, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      if (isPrompt) proxy.prompts++;
      if (isPrompt && proxy.hold) {
        upRes.resume(); // delivered to the runtime; the caller never hears back
        return;
      }
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(socketPath, r));
  return {
    proxy,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe.runIf(DB_MODE === 'postgres')('sessions: crashes, restarts and several processes', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  /**
   * The app the cases with worker processes share (serve's part: the API and the runtimes), a tenant and
   * a scripted model each. No worker runs in it but the case's own, ended with its case.
   */
  let t: TestApp;
  const workers: ServeProcess[] = [];
  const startWorkerProcess = async () => {
    const w = await startServe(t.env, { command: ['worker'], readyMsg: 'worker started' });
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: 'bash' } });
    await t.opened.core.startRuntime();
  }, 120_000);
  afterEach(async () => {
    // (One killed already has no exit to wait for.)
    for (const w of workers.splice(0)) if (w.child.exitCode === null && w.child.signalCode === null) await w.stop('SIGKILL').catch(() => {});
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await t?.opened.core.stopRuntime().catch(() => {});
    await t?.close();
  });

  it('does not send a turn twice when the worker dies after sending it and the job is retried', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    const people = await seedPeople(t, 'acme');
    await applyScriptedProvider(t, people.tokens.owner, llm);
    // The member's runtime runs (serve hosts it); the worker, another process, finds it by its row.
    const handle = await t.opened.core.pool.acquire({ tenantId: people.tenantId, userId: people.ids.mia });
    const ext = await interpose(handle.endpoint.socketPath!);
    cleanups.push(() => ext.close());
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'crash' } })).json.sessionId;
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());

    let worker = await startWorkerProcess();
    ext.proxy.hold = true;
    llm.script([{ text: 'Only once' }]);
    expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'once please', agent: 'build' } })).status).toBe(202);
    await expect.poll(() => ext.proxy.prompts, { timeout: 20_000 }).toBe(1);
    await worker.stop('SIGKILL');
    await sse.until((e) => e.data.type === 'session.idle');

    ext.proxy.hold = false;
    // The job is still active, its worker dead: the new worker takes it back as it starts (not after the
    // job queue's expiry, TURN_EXPIRE_S), finds the turn already in the runtime and answered there, and
    // records it ended, without sending it again.
    const active = `select 1 from pgboss.job where name = $1 and state = 'active' and data->>'turnId' in (select id::text from agent_turns where session_id = $2)`;
    expect((await t.opened.db.query(active, [AGENT_TURN_JOB, sessionId])).rowCount).toBe(1);
    worker = await startWorkerProcess();
    const restarted = Date.now();
    await expect
      .poll(async () => (await t.opened.db.query(`select status, attempts from agent_turns where session_id = $1`, [sessionId])).rows[0], { timeout: 30_000, interval: 250 })
      .toEqual({ status: 'done', attempts: 2 });
    expect(Date.now() - restarted).toBeLessThan(30_000);
    expect(ext.proxy.prompts).toBe(1);
    expect(llm.requests.filter((q) => !q.title)).toHaveLength(1);
    expect(worker.logs()).toContain('a turn job\'s worker died mid-attempt: queued again');
    expect(worker.logs()).toContain('turn already reached the runtime');
    const messages = await api(t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: people.tokens.member });
    expect(messages.json.messages.filter((m: any) => m.info.role === 'user')).toHaveLength(1);
  }, 150_000);

  it('a worker killed while a turn is on its way to a frozen runtime: its restart sends it on at once, once, and the turns queued behind it follow in order', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    llm.respond((req) => {
      const m = /^quick (.+)$/.exec(String(req.lastUser ?? '').trim());
      return m ? { text: `answer to ${m[1]}` } : undefined;
    });
    const people = await seedPeople(t, 'frozen');
    await applyScriptedProvider(t, people.tokens.owner, llm);
    await t.opened.core.pool.acquire({ tenantId: people.tenantId, userId: people.ids.mia });
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'frozen' } })).json.sessionId;
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());
    const statuses = async () => (await t.opened.db.query<{ status: string; parked: boolean }>(`select status, parked_at is not null as parked from agent_turns where session_id = $1 order by created_at`, [sessionId])).rows;

    let worker = await startWorkerProcess();
    // The runtime freezes (SIGSTOP): the first prompt is on its way to it when the worker dies.
    const pid = (await t.opened.db.query<{ pid: number }>(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia])).rows[0].pid;
    const tree = [pid, ...descendantsOf(pid)];
    const signal = (sig: NodeJS.Signals) => tree.forEach((p) => { try { process.kill(p, sig); } catch { /* gone */ } });
    signal('SIGSTOP');
    cleanups.push(async () => signal('SIGCONT'));
    for (const q of ['q1', 'q2', 'q3']) expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: `quick ${q}`, agent: 'build' } })).status).toBe(202);
    await expect.poll(async () => (await statuses()).map((x) => [x.status, x.parked]), { timeout: 20_000 }).toEqual([
      ['sending', false],
      ['queued', true],
      ['queued', true],
    ]);
    await worker.stop('SIGKILL');
    // The runtime goes on; what the dead worker had written to it is its to take, or not.
    signal('SIGCONT');

    worker = await startWorkerProcess();
    const restarted = Date.now();
    await expect.poll(async () => (await statuses()).every((x) => x.status === 'sent' || x.status === 'done'), { timeout: 30_000, interval: 250 }).toBe(true);
    const ms = Date.now() - restarted;
    expect(ms).toBeLessThan(20_000);
    console.log(`[sessions-resilience] worker restart → three queued prompts handed over: ${ms} ms`);
    await sse.until((e) => e.data.type === 'turn.waiting' && e.data.properties.why === 'worker_restarted', 10_000);
    await sse.until((e) => e.data.type === 'session.idle' && sse.events.filter((x) => x.data.type === 'message.part.delta').map((x) => x.data.properties.delta).join('').includes('answer to q3'), 60_000);
    // Once each, in the order they were accepted.
    const messages = (await api(t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: people.tokens.member })).json.messages as Array<{ info: any; parts: any[] }>;
    expect(messages.filter((m) => m.info.role === 'user').map((m) => m.parts.find((p) => p.type === 'text')?.text)).toEqual(['quick q1', 'quick q2', 'quick q3']);
  }, 150_000);

  it('restarts a managed runtime that died, and the open stream carries on with the next turn', async () => {
    const r = await startRuntimeApp();
    cleanups.push(() => r.close());
    const people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'survivor' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());
    r.llm.script([{ text: 'before the crash' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'one', agent: 'build' } });
    await sse.until((e) => e.data.type === 'session.idle');
    const seen = sse.events.length;

    const pidOf = async () => (await r.t.opened.db.query<{ pid: number }>(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia])).rows[0]?.pid;
    const pid = (await pidOf())!;
    // The runtime runs at AGENTWS_RUNTIME_NICE (default 10) below serve, before and after a restart.
    expect(niceOf(pid)).toBe(10);
    process.kill(pid, 'SIGKILL');
    await expect.poll(async () => { const now = await pidOf(); return now !== undefined && now !== pid; }, { timeout: 30_000, interval: 200 }).toBe(true);
    expect(niceOf((await pidOf())!)).toBe(10);

    r.llm.script([{ text: 'after the crash' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'two', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => sse.events.indexOf(e) >= seen && e.data.type === 'session.idle', 60_000);
    const after = sse.events.slice(seen).map((e) => e.data);
    expect(after.filter((e) => e.type === 'message.part.delta').map((e) => e.properties.delta).join('')).toBe('after the crash');
    expect(sse.ended).toBe(false);
  }, 150_000);
  it('a plan survives its worker being killed mid-plan: nothing lost, no subtask run twice', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    const people = await seedPeople(t, 'planner');
    await applyScriptedProvider(t, people.tokens.owner, llm);
    const prompts: Record<string, number> = {};
    llm.respond((req) => {
      if (/You are planning how to carry out a task/.test(req.allText) && !/You are doing subtask/.test(req.lastUser)) {
        return { text: JSON.stringify({ subtasks: [{ description: 'first part' }, { description: 'second part', dependencies: [0] }] }) };
      }
      const m = /You are doing subtask #(\d+)/.exec(req.lastUser);
      if (m) {
        prompts[m[1]] = (prompts[m[1]] ?? 0) + 1;
        // The first subtask takes its time: the worker is killed while it runs.
        return { text: `part ${m[1]} done`, delayMs: m[1] === '0' ? 4000 : 100 };
      }
      if (/A plan split the task below/.test(req.lastUser)) return { text: 'both parts joined' };
      return undefined;
    });
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'plan' } })).json.sessionId;
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());

    let worker = await startWorkerProcess();
    const post = await api(t, 'POST', '/v1/orchestrate', { token: people.tokens.member, body: { parentSessionId: sessionId, taskDescription: 'Two parts' } });
    expect(post.status).toBe(202);
    await expect.poll(() => prompts['0'] ?? 0, { timeout: 60_000 }).toBe(1);
    // The first subtask's model call is under way: the worker dies. Its end is heard by serve, which
    // queues the plan's step; nobody runs it until a worker is back.
    await worker.stop('SIGKILL');
    // (Nothing of that reaches the parent's stream while no worker runs: what is waited for below is the
    // step in the queue. Waiting here for the subtask's end on this stream ran into its 30 s bound.)
    const planId = (await sse.until((e) => e.data.type === 'orchestration.plan.created')).find((e) => e.data.type === 'orchestration.plan.created')!.data.properties.planId;
    // The step serve queued when the subtask's turn ended waits in the queue, no worker to take it.
    const queuedStep = async () => (await t.opened.db.query(`select 1 from pgboss.job where name = $1 and data->>'planId' = $2 and data->>'reason' = 'turn-ended' and state = 'created'`, [ORCHESTRATE_STEP_JOB, planId])).rowCount;
    await expect.poll(queuedStep, { timeout: 30_000, interval: 200 }).toBeGreaterThan(0);
    worker = await startWorkerProcess();
    await sse.until((e) => e.data.type === 'orchestration.plan.updated' && e.data.properties.planId === planId && e.data.properties.status === 'completed', 120_000);
    const got = (await api(t, 'GET', `/v1/orchestrate/${planId}`, { token: people.tokens.member })).json;
    expect(got.subtasks.map((s: any) => [s.status, s.attempt, s.result])).toEqual([
      ['completed', 1, 'part 0 done'],
      ['completed', 1, 'part 1 done'],
    ]);
    expect(prompts).toEqual({ '0': 1, '1': 1 });
    const turns = (await t.opened.db.query(`select t.status, count(*)::int as n from agent_turns t join agent_sessions s on s.id = t.session_id where s.plan_id = $1 group by t.status`, [planId])).rows;
    expect(turns).toEqual([{ status: 'done', n: 3 }]); // planning and the two subtasks, each sent once, each ended
  }, 240_000);
});
