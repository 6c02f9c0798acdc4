import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { median, percentile, pinned, report, scratchDatabase, spawnUntil, startServe } from './bench-utils.js';
import {
  apiOf,
  applyScriptedModel,
  configValue,
  createSessions,
  dumpLogs,
  loadAvg,
  onCpu1,
  openStream,
  removeDir,
  startOpencode,
  startRuntimeProxy,
  startWorkerProcess,
  stopAll,
  track,
  waitRuntimeReachable,
  type RuntimeProxy,
} from './agent-bench-utils.js';

const PROMPTS = Number(process.env.BENCH_PROMPTS ?? 200);
const SESSIONS = Number(process.env.BENCH_PROMPT_SESSIONS ?? 10);
/** Which set-ups to measure: pg-worker (PostgreSQL, separate `aws worker`), pg-serve (PostgreSQL, worker in serve), embedded. */
const SETUPS = (process.env.BENCH_PROMPT_SETUPS ?? 'pg-worker,embedded').split(',');
/** The worker's backstop poll (src/jobs/worker.ts BACKSTOP_POLL_S): the dispatch delay without the event-bus wake-up. */
const BACKSTOP_POLL_MS = 10_000;

type Setup = 'pg-worker' | 'pg-serve' | 'embedded';
const LABEL: Record<Setup, string> = {
  'pg-worker': 'PostgreSQL, serve + separate `aws worker`',
  'pg-serve': 'PostgreSQL, worker inside serve (AGENTWS_SERVE_RUNS_WORKER=true)',
  embedded: 'embedded database, worker inside serve',
};

interface Runtime {
  url: string;
  password: string;
  authorization: string;
  proxy: RuntimeProxy;
  /** session.idle events seen per runtime session id. */
  idles: Map<string, number>;
}

const until = async (what: string, cond: () => boolean, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
};

const stats = (xs: number[]) => `${median(xs).toFixed(1)} / ${percentile(xs, 99).toFixed(1)} / ${Math.max(...xs).toFixed(1)}`;

/**
 * One set-up: serve (and its worker) in external-runtime mode against the proxy; SESSIONS sessions get a
 * warm-up turn each (it also creates their runtime sessions), then PROMPTS sequential prompts round-robin,
 * each sent only once that session's previous turn is idle. For each: request sent, 202 received, and the
 * proxy's arrival of the runtime's `POST /session/:id/prompt_async`.
 */
async function measure(setup: Setup, rt: Runtime & { llmUrl: string }, root: string, dir: string) {
  const bin = join(root, 'bin', 'run.js');
  const db = setup === 'embedded' ? null : await scratchDatabase('agentws_bench_prompt');
  const started: ChildProcess[] = [];
  try {
    const env = {
      AGENTWS_RUNTIME_URL: rt.proxy.url,
      AGENTWS_RUNTIME_PASSWORD: rt.password,
      ...(setup === 'pg-serve' ? { AGENTWS_SERVE_RUNS_WORKER: 'true' } : {}),
    };
    const serveDir = join(dir, setup);
    const serve = await startServe(bin, serveDir, db?.url, env);
    started.push(track('aws serve', serve.child));
    if (setup === 'pg-worker') started.push(await startWorkerProcess(bin, serveDir, env));
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitRuntimeReachable(api);
    await applyScriptedModel(api, rt.llmUrl);
    const ids = await createSessions(api, SESSIONS, setup);

    const upstreamOf = new Map<string, string>();
    const sent = new Map<string, number>();
    const prompt = async (sessionId: string) => {
      const before = rt.proxy.prompts.length;
      const up = upstreamOf.get(sessionId);
      if (up) await until('the previous turn of the session to end', () => (rt.idles.get(up) ?? 0) >= (sent.get(up) ?? 0));
      const tSent = performance.now();
      const res = await fetch(`${api.base}/v1/sessions/${sessionId}/prompt`, {
        method: 'POST',
        headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'Say hello.', agent: 'build' }),
      });
      const tAccepted = performance.now();
      const body = await res.text();
      if (res.status !== 202) throw new Error(`prompt: ${res.status} ${body}`);
      await until('prompt_async at the runtime', () => rt.proxy.prompts.length > before);
      const arrival = rt.proxy.prompts[before];
      const upstream = /\/session\/([^/]+)\/prompt_async/.exec(arrival.path)![1];
      upstreamOf.set(sessionId, upstream);
      sent.set(upstream, (sent.get(upstream) ?? 0) + 1);
      return { tSent, tAccepted, tArrived: arrival.t };
    };

    for (const id of ids) await prompt(id); // warm-up: first turn of each session creates its runtime session
    const fromSent: number[] = [];
    const fromAccepted: number[] = [];
    const api202: number[] = [];
    for (let i = 0; i < PROMPTS; i++) {
      const r = await prompt(ids[i % ids.length]);
      fromSent.push(r.tArrived - r.tSent);
      fromAccepted.push(r.tArrived - r.tAccepted);
      api202.push(r.tAccepted - r.tSent);
    }
    // Let the last turns end before this serve (and its streams) stop.
    await until('the last turns to end', () => [...sent].every(([up, n]) => (rt.idles.get(up) ?? 0) >= n)).catch(() => {});
    return { fromSent, fromAccepted, api202 };
  } catch (err) {
    dumpLogs([join(dir, setup, 'serve.log'), join(dir, setup, 'worker.log')]);
    throw err;
  } finally {
    await stopAll(started);
    await db?.drop();
  }
}

/**
 * Prompt dispatch latency: from the prompt API call to the runtime receiving the turn
 * (`POST /session/:id/prompt_async`), on a real opencode runtime behind a timestamping loopback proxy
 * (external-runtime mode). Servers (serve, worker, opencode) are pinned to CPU 0; this process (client,
 * proxy) and the scripted model to CPU 1. Targets (from 202 received): p50 < 50 ms, p99 < 250 ms.
 * Baseline in the same run: the proxy's own loopback hop (a bare client's request through the proxy to
 * the runtime), the least any dispatch can cost; and, stated, the 10 s backstop poll that would be the
 * dispatch delay (5 s on average) without the event-bus wake-up.
 */
export async function promptLatency(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-prompt-'));
  let proxy: RuntimeProxy | null = null;
  let events: { close(): void } | null = null;
  try {
    // Short replies at once: the turn itself is not what is measured, only its dispatch.
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const oc = await startOpencode(join(dir, 'runtime'), pinned);
    proxy = await startRuntimeProxy(oc.url);
    const idles = new Map<string, number>();
    events = await openStream(`${oc.url}/global/event`, { authorization: oc.authorization }, (data) => {
      const p = JSON.parse(data).payload;
      if (p?.type === 'session.idle') idles.set(p.properties.sessionID, (idles.get(p.properties.sessionID) ?? 0) + 1);
    });
    const rt: Runtime & { llmUrl: string } = { ...oc, proxy, idles, llmUrl: llm.value };

    // Baseline: a bare client's request to the runtime through the proxy, sent -> arrival at the proxy.
    const hop: number[] = [];
    for (let i = 0; i < 220; i++) {
      const before = proxy.all.length;
      const t = performance.now();
      const res = await fetch(`${proxy.url}/global/health`, { headers: { authorization: oc.authorization } });
      await res.arrayBuffer();
      if (i >= 20) hop.push(proxy.all[before].t - t);
    }

    const results: Partial<Record<Setup, Awaited<ReturnType<typeof measure>>>> = {};
    for (const s of SETUPS as Setup[]) {
      process.stderr.write(`  [prompt-latency] ${LABEL[s]}: ${SESSIONS} warm-up + ${PROMPTS} measured prompts\n`);
      results[s] = await measure(s, rt, root, dir);
    }

    const rows: Record<string, string> = {};
    let ok = true;
    for (const s of SETUPS as Setup[]) {
      const r = results[s]!;
      const p50 = median(r.fromAccepted);
      const p99 = percentile(r.fromAccepted, 99);
      ok = ok && p50 < 50 && p99 < 250;
      rows[`${s}: 202 -> runtime p50/p99/max`] = `${stats(r.fromAccepted)} ms  ${p50 < 50 && p99 < 250 ? 'met' : 'NOT met'}`;
      rows[`${s}: sent -> runtime p50/p99/max`] = `${stats(r.fromSent)} ms`;
      rows[`${s}: API call sent -> 202 p50/p99`] = `${median(r.api202).toFixed(1)} / ${percentile(r.api202, 99).toFixed(1)} ms`;
      rows[`${s}: p50 vs the 5 s average poll wait`] = `${((p50 / (BACKSTOP_POLL_MS / 2)) * 100).toFixed(2)}%`;
    }
    rows['baseline: proxy hop p50/p99 (ms)'] = `${median(hop).toFixed(2)} / ${percentile(hop, 99).toFixed(2)}`;
    rows['baseline: backstop poll (no wake-up)'] = `every ${BACKSTOP_POLL_MS / 1000} s: 0-${BACKSTOP_POLL_MS / 1000} s, 5 s on average`;
    rows['load average 1/5/15 min (2 cores)'] = loadAvg();
    return report(
      `prompt dispatch: prompt API -> runtime POST prompt_async (${PROMPTS} sequential prompts over ${SESSIONS} sessions, real opencode behind a timestamping proxy; ${SETUPS.map((s) => LABEL[s as Setup]).join('; ')})`,
      rows,
      { ok, target: 'from 202: p50 < 50 ms and p99 < 250 ms, every set-up' },
    );
  } finally {
    events?.close();
    await stopAll();
    await proxy?.close();
    removeDir(dir);
  }
}
