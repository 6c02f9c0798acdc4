import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createRunnerAgent, type RunnerAgent } from '../../src/runner/runner-agent.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { startFakeLlm, type FakeLlm, type FakeStep } from '../fixtures/fake-llm.js';
import { readSseFrames } from '../fixtures/sse-frames.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from './app.js';
import type { TestEnv } from './test-env.js';
import type { Clock } from '../../src/lib/clock.js';

export interface RuntimeApp {
  t: TestApp;
  llm: FakeLlm;
  worker: Worker;
  /** With `runner: true`: the runner host that runs every runtime (the control plane runs none). */
  runner?: { agent: RunnerAgent; dataDir: string; token: string; tokenId: string };
  close(): Promise<void>;
}

/**
 * The app with what a serve process adds for agent sessions: the managed runtime (the real opencode
 * binary), the session streams and an in-process worker; the model is the scripted server on loopback.
 * With `runner: true` the control plane runs no runtime (AGENTWS_LOCAL_RUNNER=off) and a runner host
 * dials it (in this process, with a data dir of its own: runner-remote.runtime.test.ts) and runs them all.
 */
export async function startRuntimeApp(options: { vars?: Record<string, string>; worker?: boolean; runner?: boolean; env?: TestEnv; clock?: Clock } = {}): Promise<RuntimeApp> {
  const llm = await startFakeLlm();
  const t = await startTestApp({ env: options.env, clock: options.clock, vars: { AGENTWS_RUNTIME_ASK_TOOLS: 'bash', ...options.vars, ...(options.runner ? { AGENTWS_LOCAL_RUNNER: 'off' } : {}) } });
  await t.opened.core.startRuntime();
  const runner = options.runner ? await startRunnerFor(t) : undefined;
  const worker = await startWorker(t.opened.core, t.opened.boss, silentLogger, { concurrency: 2 });
  return {
    t,
    llm,
    worker,
    runner,
    async close() {
      await worker.stop(2000).catch(() => {});
      await runner?.agent.stop().catch(() => {});
      if (runner) rmSync(runner.dataDir, { recursive: true, force: true });
      await t.opened.core.stopRuntime().catch(() => {});
      await t.close();
      await llm.close();
    },
  };
}

/** A runner host for the app's control plane, connected. */
async function startRunnerFor(t: TestApp): Promise<NonNullable<RuntimeApp['runner']>> {
  const created = await t.opened.core.runners.createToken(systemCtx(silentLogger, { name: 'test' }), { name: 'test-runner' });
  const dataDir = mkdtempSync(join(tmpdir(), 'agentws-runner-'));
  const agent = createRunnerAgent({
    controlUrl: t.url,
    token: created.token,
    info: { name: 'r1', address: null, capacity: 4, labels: { zone: 'test' }, version: 'test', sharedStorage: false },
    dataDir,
    sandbox: true,
    nice: 10,
    idleMs: 600_000,
    freezeAfterMs: 0,
    log: silentLogger,
  });
  await agent.start();
  const deadline = Date.now() + 10_000;
  while (!agent.connected && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
  if (!agent.connected) throw new Error('the runner did not connect');
  return { agent, dataDir, token: created.token, tokenId: created.id };
}

/**
 * One turn as `token` in a new session (or `sessionId`): the scripted model takes `steps`, every permission
 * the turn asks is answered `once`; resolves when the turn ended, with its session's transcript, tool parts,
 * their outputs and errors joined, and the model requests it made (title requests left out).
 * `toolsEnded`: instead of a fixed 300 ms after the end, the transcript is read until each of its tool
 * parts has ended (completed or error; 10 s at most), for a suite of many short turns.
 */
export async function agentTurn(r: RuntimeApp, token: string, steps: FakeStep[], o: { text?: string; sessionId?: string; title?: string; model?: string; toolsEnded?: boolean } = {}) {
  const sessionId = o.sessionId ?? ((await api(r.t, 'POST', '/v1/sessions', { token, body: { title: o.title ?? 'turn' } })).json.sessionId as string);
  const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
  r.llm.script(steps);
  const before = r.llm.requests.length;
  const sent = await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: o.text ?? 'do it', agent: 'build', ...(o.model ? { model: o.model } : {}) } });
  if (sent.status !== 202) throw new Error(`prompt: ${sent.status} ${sent.text}`);
  const answered = new Set<string>();
  const deadline = Date.now() + 90_000;
  while (!sse.events.some((e) => e.data.type === 'session.idle')) {
    for (const e of sse.events.filter((e) => e.data.type === 'permission.asked' && !answered.has(e.data.properties.id))) {
      answered.add(e.data.properties.id);
      await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${e.data.properties.id}`, { token, body: { response: 'once' } });
    }
    if (Date.now() > deadline) throw new Error(`turn did not end: ${sse.events.map((e) => e.data.type).join(', ')}`);
    await new Promise((res) => setTimeout(res, 50));
  }
  if (!o.toolsEnded) await new Promise((res) => setTimeout(res, 300));
  await sse.close();
  const transcript = async () => (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token })).json.messages as Array<{ info: any; parts: Array<Record<string, any>> }>;
  let messages = await transcript();
  const ended = (m: typeof messages) => m.flatMap((x) => x.parts).every((p) => p.type !== 'tool' || p.state?.status === 'completed' || p.state?.status === 'error');
  for (const until = Date.now() + 10_000; o.toolsEnded && !ended(messages) && Date.now() < until; ) {
    await new Promise((res) => setTimeout(res, 100));
    messages = await transcript();
  }
  const tools = messages.flatMap((m) => m.parts).filter((p) => p.type === 'tool');
  const output = tools.map((p) => `${p.state?.output ?? ''}${p.state?.error ?? ''}`).join('\n');
  const requests = r.llm.requests.slice(before).filter((q) => !q.title);
  return { sessionId, messages, tools, output, requests };
}

/** Registers the scripted model as a provider of the tenant and applies it as the default model. */
export async function applyScriptedProvider(t: TestApp, token: string, llm: FakeLlm, name = 'scripted') {
  const add = await api(t, 'POST', '/v1/admin/providers', {
    token,
    body: { name, kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: 'sk-scripted-secret', models: [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096, inputCostPerMTok: 2, outputCostPerMTok: 8 }] },
  });
  if (add.status !== 201) throw new Error(`provider: ${add.status} ${add.text}`);
  const apply = await api(t, 'POST', '/v1/admin/runtime/apply', { token, body: { defaultModel: `${name}/fake-model` } });
  if (apply.status !== 200) throw new Error(`apply: ${apply.status} ${apply.text}`);
  return apply.json;
}

/** A tenant with an owner, a member and a viewer, and tokens for each. */
export async function seedPeople(t: TestApp, slug: string) {
  const { tenantId, ids } = await seedTenant(t, slug, [
    { handle: 'mia', roles: ['member'] },
    { handle: 'vic', roles: ['viewer'] },
  ]);
  const tokens = {
    owner: await signToken(t, { sub: ids.owner, tid: tenantId, roles: ['owner'] }),
    member: await signToken(t, { sub: ids.mia, tid: tenantId, roles: ['member'] }),
    viewer: await signToken(t, { sub: ids.vic, tid: tenantId, roles: ['viewer'] }),
  };
  return { tenantId, ids, tokens };
}

export interface SseEvent {
  id?: string;
  data: any;
  /** When it arrived (performance.now()): what the benchmarks measure latencies from. */
  at: number;
}

/** A real SSE client: collects the messages of a stream (with their ids) until closed. */
export async function openSse(url: string, headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal });
  if (res.status !== 200) {
    const body = await res.text();
    return { status: res.status, body, headers: res.headers, events: [] as SseEvent[], comments: [] as string[], ended: true, until: async () => [] as SseEvent[], quiet: async () => {}, close: async () => {} };
  }
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let ended = false;
  // until() sleeps until the next frame (or the end) rather than on a timer.
  let waiters: Array<() => void> = [];
  let lastArrival = Date.now();
  const wake = () => {
    lastArrival = Date.now();
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const done = (async () => {
    if (!res.body) return;
    await readSseFrames(res.body as unknown as AsyncIterable<Uint8Array>, (f) => {
      comments.push(...f.comments);
      if (f.data !== null) events.push({ id: f.id, data: JSON.parse(f.data), at: performance.now() });
      wake();
    });
    ended = true;
    wake();
  })();
  return {
    status: res.status,
    headers: res.headers,
    events,
    comments,
    get ended() {
      return ended;
    },
    /** Resolves with the events once one matches (rejects after timeoutMs). */
    async until(pred: (e: SseEvent) => boolean, timeoutMs = 45_000): Promise<SseEvent[]> {
      const deadline = Date.now() + timeoutMs;
      while (!events.some(pred)) {
        const left = deadline - Date.now();
        if (left < 0) throw new Error(`no matching event in ${timeoutMs} ms; got: ${events.map((e) => e.data.type).join(', ')}`);
        if (ended) throw new Error(`stream ended; got: ${events.map((e) => e.data.type).join(', ')}`);
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((r) => {
          waiters.push(r);
          // Also now and then: a predicate may read more than the events.
          timer = setTimeout(r, Math.min(left + 1, 250));
        });
        clearTimeout(timer);
      }
      return events;
    },
    /** Resolves once no event has come for quietMs (or after timeoutMs): what a runtime sends after a turn's end has arrived. */
    async quiet(quietMs = 500, timeoutMs = 10_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const wait = Math.min(lastArrival + quietMs, deadline) - Date.now();
        if (wait <= 0 || ended) return;
        await new Promise((r) => setTimeout(r, wait));
      }
    },
    close() {
      ac.abort();
      return done;
    },
  };
}
