import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { median, percentile, pinned, report, scratchDatabase, startServe } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { treeCpuMs } from '../helpers/process-tree.js';
import {
  apiOf,
  applyScriptedModel,
  configValue,
  dumpLogs,
  loadAvg,
  onCpu1,
  processTree,
  removeDir,
  rssKb,
  runtimesOf,
  startOpencode,
  stopAll,
  track,
  treeMemoryKb,
  waitAgentsAvailable,
} from './agent-bench-utils.js';
import { benchMembers, call, modelFirstWordMs, personTurn, type TurnTimes } from './bench-members.js';

const USERS = Number(process.env.BENCH_RUNTIME_USERS ?? 20);
/** Further users whose dashboard opens (POST /v1/sessions/prepare) TYPING_MS before their first prompt. */
const PREPARED = Number(process.env.BENCH_RUNTIME_PREPARED ?? 5);
const TYPING_MS = 5000;
/** Users (of the first USERS) who take a second turn once their runtime is frozen. */
const WARM = Math.min(USERS - 1, Number(process.env.BENCH_RUNTIME_WARM ?? 5));
/** Targets. */
const COLD_TEXT_TARGET_MS = 3000;
const COLD_EVENT_TARGET_MS = 1500;
const PREPARED_TEXT_TARGET_MS = 800;
const WARM_OVER_MODEL_TARGET_MS = 300;
const PSS_TARGET_KB = 250 * 1024;
const BASELINE_STARTS = Number(process.env.BENCH_RUNTIME_BASELINE_STARTS ?? 5);
/**
 * How long the runtimes sit idle before their memory and CPU are read (their first turn's garbage
 * collected; and frozen, which serve does after 10 s idle by default).
 */
const SETTLE_MS = Number(process.env.BENCH_RUNTIME_SETTLE_MS ?? 15_000);
/** An awake runtime's idle CPU is read over this window right after its turn, before it is frozen. */
const AWAKE_MS = 7000;
/** How long idle runtimes' CPU is measured (after SETTLE_MS). */
const IDLE_MS = Number(process.env.BENCH_RUNTIME_IDLE_MS ?? 60_000);
/** Target: an idle runtime uses at most this share of one core. */
const IDLE_CPU_TARGET = 0.01;

const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`;

/** The share of a core each process tree (by its root pid) used over the same `ms`. */
async function cpuShare(pids: number[], ms: number): Promise<number[]> {
  const tree = processTree();
  const before = pids.map((p) => treeCpuMs(p, tree));
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const took = performance.now() - t0;
  return pids.map((p, i) => (treeCpuMs(p, tree) - before[i]) / took);
}
const idleCpu = (pids: number[]) => cpuShare(pids, IDLE_MS);
const stats = (xs: number[]) => `${median(xs).toFixed(0)} / ${percentile(xs, 90).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;

/**
 * Per-user runtimes on PostgreSQL, from a person's side (the targets above):
 *  - cold: USERS users one after another, each prompting with nothing running (an API client): prompt ->
 *    the first event they see (the service's own `runtime.starting` included), the runtime's first event,
 *    and the first streamed word of the answer;
 *  - idle: the first runtime alone after its turn, awake (AWAKE_MS right after it) and then frozen, and all
 *    USERS idle runtimes: CPU over IDLE_MS, RSS and PSS of each sandbox's process tree (bwrap, socat,
 *    opencode; PSS divides shared pages, which is what the host really pays);
 *  - warm: WARM of them take a second turn once their runtime is frozen: prompt -> first word, against the
 *    scripted model's own first word;
 *  - prepared: PREPARED more users whose dashboard opens (POST /v1/sessions/prepare) TYPING_MS before they
 *    prompt in a new session.
 * serve runs its worker and is pinned to CPU 0 with the runtimes it starts; this process and the scripted
 * model to CPU 1. Baselines in the same run: a bare opencode (same binary and environment, no sandbox, no
 * service) from exec to its health check, its idle CPU and memory; the scripted model's first word.
 */
export async function runtimePool(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-runtime-'));
  const db = await scratchDatabase('agentws_bench_runtime');
  try {
    // Baseline first, on a quiet host: a bare opencode from exec to health, BASELINE_STARTS times; the
    // last one's idle memory and CPU (no turn, no sandbox, no service).
    const bare: number[] = [];
    let bareMem = { rss: 0, pss: 0, processes: 0 };
    let bareCpu = 0;
    for (let i = 0; i < BASELINE_STARTS; i++) {
      const t0 = performance.now();
      const oc = await startOpencode(join(dir, `bare-${i}`), pinned);
      bare.push(performance.now() - t0);
      if (i === BASELINE_STARTS - 1) {
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        bareMem = treeMemoryKb(oc.child.pid!);
        process.stderr.write(`  [runtime-pool] bare opencode idle for ${IDLE_MS / 1000} s\n`);
        bareCpu = (await idleCpu([oc.child.pid!]))[0];
      }
      await stopAll([oc.child]);
    }

    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const modelFirst = median(await modelFirstWordMs(llm.value, 20));
    const serve = await startServe(bin, join(dir, 'serve'), db.url, { AGENTWS_SERVE_RUNS_WORKER: 'true', AGENTWS_RUNTIME_MAX: String(USERS + PREPARED) });
    track('aws serve', serve.child);
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    await applyScriptedModel(api, llm.value);
    const users = await benchMembers(db.url, serve.config, serve.init.tenant.id, USERS + PREPARED);
    const serveIdleKb = rssKb(serve.child.pid!);

    const cold: Array<TurnTimes & { sessionId: string }> = [];
    const awake: TurnTimes[] = [];
    let alone = { awake: 0, frozen: 0, rss: 0, pss: 0 };
    try {
      for (const [i, m] of users.slice(0, USERS).entries()) {
        process.stderr.write(`  [runtime-pool] user ${i + 1} of ${USERS}: first turn, cold\n`);
        cold.push(await personTurn(serve.url, m));
        // The next turn at once, the runtime awake (resident, just used).
        if (i > 0 && i <= WARM) awake.push(await personTurn(serve.url, m, { sessionId: cold[i].sessionId }));
        if (i === 0) {
          // One runtime, alone on the host, idle after its turn: awake, then frozen.
          process.stderr.write(`  [runtime-pool] one runtime idle for ${(1000 + AWAKE_MS + SETTLE_MS + IDLE_MS) / 1000} s\n`);
          const [rt] = runtimesOf(serve.child.pid!);
          await new Promise((r) => setTimeout(r, 1000));
          const awake = await cpuShare([rt.sandboxPid], AWAKE_MS);
          await new Promise((r) => setTimeout(r, SETTLE_MS));
          const mem = treeMemoryKb(rt.sandboxPid);
          alone = { awake: awake[0], frozen: (await idleCpu([rt.sandboxPid]))[0], rss: mem.rss, pss: mem.pss };
        }
      }
    } catch (err) {
      dumpLogs([join(dir, 'serve', 'serve.log')]);
      throw err;
    }
    const running = runtimesOf(serve.child.pid!);
    if (running.length !== USERS) throw new Error(`serve runs ${running.length} runtimes after ${USERS} users' turns`);

    process.stderr.write(`  [runtime-pool] ${USERS} runtimes idle for ${SETTLE_MS / 1000} s\n`);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const tree = processTree();
    const each = running.map((rt) => treeMemoryKb(rt.sandboxPid, tree));
    const total = each.reduce((a, b) => ({ rss: a.rss + b.rss, pss: a.pss + b.pss, processes: a.processes + b.processes }), { rss: 0, pss: 0, processes: 0 });
    const serveKb = rssKb(serve.child.pid!);
    process.stderr.write(`  [runtime-pool] ${USERS} runtimes: CPU over ${IDLE_MS / 1000} s\n`);
    const cpus = await idleCpu(running.map((rt) => rt.sandboxPid));
    const load = loadAvg();

    // A second turn of a person whose runtime sits frozen (resident, idle): thawed by the turn.
    const warm: TurnTimes[] = [];
    for (const [i, m] of users.slice(1, WARM + 1).entries()) {
      process.stderr.write(`  [runtime-pool] user ${i + 2}: another turn, runtime frozen\n`);
      warm.push(await personTurn(serve.url, m, { sessionId: cold[i + 1].sessionId }));
    }

    // A person's usual first turn: the dashboard opens (and asks for their runtime), they pick a new
    // session and type; the prompt goes TYPING_MS after the dashboard opened.
    const prepared: TurnTimes[] = [];
    for (const [i, m] of users.slice(USERS).entries()) {
      process.stderr.write(`  [runtime-pool] user ${USERS + i + 1}: dashboard opened, prompt ${TYPING_MS / 1000} s later\n`);
      const res = await call(serve.url, m.token, 'POST', '/v1/sessions/prepare');
      if (res.status !== 202) throw new Error(`prepare: ${res.status} ${JSON.stringify(res.json)}`);
      prepared.push(await personTurn(serve.url, m, { typingMs: TYPING_MS }));
    }

    const coldText = median(cold.map((c) => c.toText));
    const coldSeen = median(cold.map((c) => c.toAnyEvent));
    const preparedText = median(prepared.map((c) => c.toText));
    const warmOver = median(warm.map((c) => c.toText)) - modelFirst;
    const pss = median(each.map((e) => e.pss));
    const verdicts = {
      cold: coldText <= COLD_TEXT_TARGET_MS,
      seen: coldSeen <= COLD_EVENT_TARGET_MS,
      prepared: preparedText <= PREPARED_TEXT_TARGET_MS,
      warm: warmOver <= WARM_OVER_MODEL_TARGET_MS,
      idle: alone.frozen <= IDLE_CPU_TARGET && median(cpus) <= IDLE_CPU_TARGET,
      pss: pss <= PSS_TARGET_KB,
    };
    const ok = Object.values(verdicts).every(Boolean);
    const mark = (v: boolean) => (v ? 'met' : 'NOT met');
    const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
    return report(
      `per-user sandboxed runtimes: a person's first answer, cold, prepared and warm, and what idle runtimes cost (${USERS} users one after another, PostgreSQL, worker in serve)`,
      {
        'cold: prompt -> first streamed text p50/p90/max': `${stats(cold.map((c) => c.toText))} ms  ${mark(verdicts.cold)} (<= ${COLD_TEXT_TARGET_MS})`,
        'cold: prompt -> first event the person sees p50/p90/max': `${stats(cold.map((c) => c.toAnyEvent))} ms  ${mark(verdicts.seen)} (<= ${COLD_EVENT_TARGET_MS}; runtime.starting)`,
        'cold: prompt -> the runtime\'s first event p50/p90/max': `${stats(cold.map((c) => c.toEvent))} ms`,
        'cold: first 5 users, first text': cold.slice(0, 5).map((c) => `${c.toText.toFixed(0)} ms`).join(', '),
        'cold: prompt -> 202 p50/max': `${median(cold.map((c) => c.to202)).toFixed(1)} / ${Math.max(...cold.map((c) => c.to202)).toFixed(1)} ms`,
        [`prepared: dashboard opened, prompt ${TYPING_MS / 1000} s later -> first event / first text p50/p90/max`]: `${stats(prepared.map((c) => c.toEvent))} / ${stats(prepared.map((c) => c.toText))} ms  ${mark(verdicts.prepared)} (<= ${PREPARED_TEXT_TARGET_MS})`,
        'warm: a turn, runtime frozen -> first text p50/p90/max': `${stats(warm.map((c) => c.toText))} ms; ${warmOver.toFixed(0)} ms over the model's own  ${mark(verdicts.warm)} (<= ${WARM_OVER_MODEL_TARGET_MS})`,
        'warm: a turn right after the first, runtime awake -> first text p50/p90/max': `${stats(awake.map((c) => c.toText))} ms; ${(median(awake.map((c) => c.toText)) - modelFirst).toFixed(0)} ms over the model's own`,
        'baseline: the scripted model\'s first word p50': `${modelFirst.toFixed(1)} ms`,
        'baseline: bare opencode exec -> health': `p50 ${median(bare).toFixed(0)} ms (of ${BASELINE_STARTS}); cold first text is ${(coldText / median(bare)).toFixed(2)}x`,
        [`one runtime alone after its turn: CPU awake (${AWAKE_MS / 1000} s) / frozen (${IDLE_MS / 1000} s)`]: `${pct(alone.awake)} / ${pct(alone.frozen)} of a core  ${mark(alone.frozen <= IDLE_CPU_TARGET)}`,
        'one runtime alone after its turn: RSS / PSS': `${mb(alone.rss)} / ${mb(alone.pss)}`,
        [`${USERS} idle runtimes (frozen): CPU per runtime median / max, all together`]: `${pct(median(cpus))} / ${pct(Math.max(...cpus))} of a core ${mark(median(cpus) <= IDLE_CPU_TARGET)}, ${pct(cpus.reduce((a, b) => a + b, 0))}`,
        [`${USERS} idle runtimes: RSS / PSS per runtime (median), all together`]: `${mb(median(each.map((e) => e.rss)))} / ${mb(pss)} (${each[0].processes} processes) ${mark(verdicts.pss)} (PSS <= ${mb(PSS_TARGET_KB)}), ${mb(total.rss)} / ${mb(total.pss)}`,
        'baseline: bare opencode idle (no turn, no sandbox) CPU / RSS / PSS': `${pct(bareCpu)} of a core / ${mb(bareMem.rss)} / ${mb(bareMem.pss)}`,
        'aws serve RSS before / with the runtimes': `${mb(serveIdleKb)} / ${mb(serveKb)}`,
        'load average 1/5/15 min (2 cores)': load,
      },
      { ok, target: `cold first text p50 <= 3 s, seen <= 1.5 s; prepared <= 800 ms; warm <= model + 300 ms; idle <= ${pct(IDLE_CPU_TARGET)} of a core; PSS <= 250 MB` },
    );
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
  }
}
