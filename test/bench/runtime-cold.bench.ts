import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { GATEWAY_HOST } from '../../src/core/runtime/host/egress-proxy.js';
import { MEMORY_MCP_PATH } from '../../src/core/runtime/host/agent-endpoints.js';
import { managedConfigDir, writeManagedConfig } from '../../src/core/runtime/host/managed-config.js';
import { createRuntimeLauncher, type LaunchedRuntime } from '../../src/core/runtime/host/runtime-launcher.js';
import { openRuntimeStream, requestRuntime } from '../../src/core/runtime/host/runtime-transport.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { median, percentile, report, scratchDatabase, startServe } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { descendantsOf, processTree, treeCpuMs } from '../helpers/process-tree.js';
import { apiOf, applyScriptedModel, configValue, envVariants, loadAvg, onCpu1, removeDir, runtimesOf, stopAll, track, treeMemoryKb, waitAgentsAvailable } from './agent-bench-utils.js';
import { benchMembers, personTurn, type TurnTimes } from './bench-members.js';

/**
 * A runtime's cold path, from exec to its first streamed text, per variant of its start (target:
 * cold API prompt -> first text <= 3 s p50). Each sample is one sandboxed runtime started as the service
 * starts it (createRuntimeLauncher: bwrap, the socat bridges, runtimeEnv), then what the service does at a
 * cold prompt: its managed configuration written (a provider on the gateway host, the memory MCP server,
 * as desiredConfig shapes them) and a reload, a session created, the prompt sent; the runtime's own event
 * stream read for the first text. Its model calls and MCP requests leave through a proxy on its proxy
 * socket, which forwards model calls to the scripted model (test/bench/fixtures/paced-llm.mjs) and
 * answers the MCP server's initialize and tools/list itself. Timed: exec -> health, -> the model request
 * (as the proxy sees it), -> the first text event; the runtime's CPU (all its processes and threads) to
 * health and to the first text, and its main thread's (the event loop's) share of it.
 *
 * Then each runtime sits idle: its CPU over IDLE_MS from SETTLE_MS after its turn (awake: serve freezes
 * it after 10 s idle, but this is what any setting costs an idle runtime that is not frozen, the house's
 * lesson), and its RSS / PSS at SETTLE_MS.
 *
 * Variants run interleaved: in each of ROUNDS rounds every variant once, their order rotating, one
 * runtime starting at a time while earlier ones idle (at most MAX_ALIVE alive). Medians per variant, set
 * against the baseline (the launcher as it is) of the same run.
 *
 * Then WARM_TURNS more turns in the same session, each answered with WORDS words (what a setting costs
 * every later turn): wall and CPU time, median.
 *
 * Usage: node --import tsx test/bench/run-all.ts runtime-cold   (BENCH_COLD_ROUNDS (6), BENCH_COLD_IDLE_MS
 *   (20000), BENCH_COLD_SETTLE_MS (5000), BENCH_COLD_WARM_TURNS (3), BENCH_COLD_WORDS (200),
 *   BENCH_COLD_VARIANTS (names, comma-separated; default baseline,with-ftl), BENCH_COLD_EXTRA
 *   ("name:K=V,K=V;name2:K=V": more environment variants))
 */
const ROUNDS = Number(process.env.BENCH_COLD_ROUNDS ?? 6);
const IDLE_MS = Number(process.env.BENCH_COLD_IDLE_MS ?? 20_000);
const SETTLE_MS = Number(process.env.BENCH_COLD_SETTLE_MS ?? 5000);
const MAX_ALIVE = 6;
/** Run unless BENCH_COLD_VARIANTS names others: the kept change against the runtime before it. */
const DEFAULT_VARIANTS = ['baseline', 'with-ftl'];
/** Between one runtime's first text and the next runtime's start: its turn's end and title are done. */
const GAP_MS = 1500;
/** Later turns per runtime, each answered with WORDS words by the scripted model. */
const WARM_TURNS = Number(process.env.BENCH_COLD_WARM_TURNS ?? 3);
const WORDS = Number(process.env.BENCH_COLD_WORDS ?? 200);

interface Variant {
  name: string;
  /** Added to (or overriding) the runtime's environment. */
  env?: Record<string, string>;
  /** Prepares the runtime's home (host path) before its start. */
  home?: (home: string) => void;
}

/** A copy of an opencode.db migrated by an earlier start (runtimeCold makes it when a variant asks). */
let preparedDb: string | null = null;

/**
 * The variants. JavaScriptCore's options are read from BUN_JSC_<name> (OptionsList.h). runtimeEnv turns
 * the FTL off: `with-ftl` is the runtime as it was before, the baseline of that change.
 *
 * Tried and not kept (figures in docs/developing/performance.md): without the DFG too (only the baseline JIT): the
 * start as fast as without the FTL, turns of 2000 words +57 %; the DFG later (10x its warm-up
 * thresholds): no faster start; the baseline JIT sooner (thresholdForJITAfterWarmUp 100, JITSoon 20) or
 * later (2000, 400) on top of no FTL: no better than no FTL alone; TZ set (a strace showed ICU reading
 * every file of /usr/share/zoneinfo at start, /etc/localtime being a bound file, not a link): no
 * measurable CPU; one DFG and one FTL compiler thread: what a 2-core host has already. `prepared-db`: the
 * runtime's home given an opencode.db migrated by an earlier start (opencode migrates a new one at its
 * first start): no measurable effect. A larger minimum heap per GC cycle (BUN_JSC_largeHeapSize 64 or
 * 128 MiB instead of 32: 11 collections during the start, ~0.46 s of their cycles, become 9): no clear
 * gain (-0.1 to -0.2 s, within the spread), +10 MB RSS with 128 MiB; a heap setting is what once made idle
 * runtimes collect without end, so not for so little.
 */
const VARIANTS: Variant[] = [
  { name: 'baseline' },
  { name: 'with-ftl', env: { BUN_JSC_useFTLJIT: '1' } },
  { name: 'no-dfg', env: { BUN_JSC_useDFGJIT: '0' } },
  { name: 'dfg-later', env: { BUN_JSC_thresholdForOptimizeAfterWarmUp: '10000', BUN_JSC_thresholdForOptimizeAfterLongWarmUp: '10000', BUN_JSC_thresholdForOptimizeSoon: '10000' } },
  { name: 'tz', env: { TZ: 'Etc/UTC' } },
  {
    name: 'prepared-db',
    home: (home: string) => {
      mkdirSync(join(home, '.local', 'share', 'opencode'), { recursive: true });
      copyFileSync(preparedDb!, join(home, '.local', 'share', 'opencode', 'opencode.db'));
    },
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The proxy on a runtime's proxy socket: model calls to the scripted model, the MCP server answered here. */
function startProxy(socketPath: string, llmUrl: string, seen: (what: 'model') => void): Promise<http.Server> {
  const target = new URL(llmUrl);
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', `http://${GATEWAY_HOST}`);
    if (u.pathname === MEMORY_MCP_PATH) {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        if (req.method !== 'POST') return void res.writeHead(405).end();
        const m = JSON.parse(raw) as { id?: number; method: string; params?: { protocolVersion?: string } };
        if (m.id === undefined) return void res.writeHead(202).end();
        const result =
          m.method === 'initialize' ? { protocolVersion: m.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'memory', version: '1' } } : m.method === 'tools/list' ? { tools: [] } : {};
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
      });
      return;
    }
    // The turn's own request, not the title's (which opencode sends first, beside it).
    if (u.pathname.endsWith('/chat/completions')) {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (!/title generator/i.test(body)) seen('model');
      });
    }
    const up = http.request({ host: target.hostname, port: target.port, path: u.pathname + u.search, method: req.method, headers: { ...req.headers, host: target.host } }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve(server));
  });
}

/** An opencode.db as a runtime's first start leaves it (migrated, empty), checkpointed into one file. */
async function migratedDb(dir: string): Promise<string> {
  const launcher = createRuntimeLauncher({ dataDir: join(dir, 'data'), sandbox: true, nice: 0, log: silentLogger });
  const root = join(dir, 'root');
  const rt = await launcher.launch({ workspace: join(dir, 'workspace'), root, tenant: join(dir, 'tenant') }, async () => ({}));
  await rt.stop();
  const file = join(root, 'home', '.local', 'share', 'opencode', 'opencode.db');
  const db = new DatabaseSync(file);
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
  return file;
}

/** The managed configuration desiredConfig writes, with the scripted model as the tenant's one provider. */
function managedConfig() {
  return {
    provider: {
      scripted: {
        npm: '@ai-sdk/openai-compatible',
        name: 'scripted',
        options: { baseURL: `http://${GATEWAY_HOST}/v1`, apiKey: 'sk-scripted' },
        models: { 'fake-model': { name: 'fake-model', limit: { context: 32_000, output: 4096 } } },
      },
    },
    enabled_providers: ['scripted'],
    snapshot: false,
    permission: { external_directory: 'deny', skill: { '*': 'deny' } },
    skills: { paths: [] },
    mcp: { memory: { type: 'remote', url: `http://${GATEWAY_HOST}${MEMORY_MCP_PATH}`, headers: { Authorization: 'Bearer bench' }, oauth: false, enabled: true, timeout: 15_000 } },
    share: 'disabled',
    autoupdate: false,
  };
}

/** Until the session's turn has ended (GET /session/status lists only busy sessions). */
async function waitIdle(rt: LaunchedRuntime, id: string, q: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const r = await requestRuntime(rt.endpoint, 'GET', `/session/status${q}`);
    if (r.status === 200 && !(JSON.parse(r.text) as Record<string, unknown>)[id]) return;
    await sleep(50);
  }
  throw new Error('the first turn did not end');
}

/** CPU (ms) of a process's threads by name (digits folded), from /proc/<pid>/task. */
function threadCpu(pid: number): Record<string, number> {
  const tick = 10; // USER_HZ 100
  const by: Record<string, number> = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')).replace(/\d+/g, '#');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      by[name] = (by[name] ?? 0) + (Number(f[11]) + Number(f[12])) * tick;
    } catch {
      // the thread ended
    }
  }
  return by;
}

function smaps(pid: number): { rss: number; pss: number } {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const f = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    return { rss: f('Rss'), pss: f('Pss') };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

interface Sample {
  variant: string;
  health: number;
  model: number;
  text: number;
  cpuHealth: number;
  cpuText: number;
  mainText: number;
  jitText: number;
  /** A warm turn (WORDS words), median of WARM_TURNS: wall and CPU ms. */
  warmMs: number;
  warmCpu: number;
  idleCpu: number;
  rss: number;
  pss: number;
}

/** One cold start and first turn; resolves the timings at once and the idle figures later. */
async function coldStart(dir: string, v: Variant, llmUrl: string): Promise<{ first: Omit<Sample, 'idleCpu' | 'rss' | 'pss'>; idle: Promise<{ idleCpu: number; rss: number; pss: number }> }> {
  const launcher = createRuntimeLauncher({ dataDir: join(dir, 'data'), sandbox: true, nice: 0, log: silentLogger, extraEnv: v.env });
  const root = join(dir, 'root');
  let proxy: http.Server | undefined;
  let modelAt = 0;
  let rt: LaunchedRuntime | undefined;
  v.home?.(join(root, 'home'));
  const t0 = performance.now();
  try {
    rt = await launcher.launch({ workspace: join(dir, 'workspace'), root, tenant: join(dir, 'tenant') }, async (at) => {
      if (!('path' in at)) throw new Error('expected a sandboxed launch');
      proxy = await startProxy(at.path, llmUrl, () => (modelAt ||= performance.now()));
      return {};
    });
    const health = performance.now() - t0;
    const opencode = descendantsOf(rt.pid).find((p) => readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'opencode');
    if (!opencode) throw new Error('no opencode process in the sandbox');
    const cpuHealth = treeCpuMs(rt.pid);
    // What the service does at a cold prompt (runtime.service configureStarted, then the turn).
    writeManagedConfig(managedConfigDir(root), managedConfig());
    const q = `?directory=${encodeURIComponent(rt.directory)}`;
    const r = await requestRuntime(rt.endpoint, 'POST', '/global/dispose', { timeoutMs: 30_000 });
    if (r.status !== 200) throw new Error(`reload: ${r.status}`);
    const ac = new AbortController();
    const events = await openRuntimeStream(rt.endpoint, '/global/event', ac.signal);
    let textAt = 0;
    const gotText = new Promise<void>((resolve) =>
      events.on('data', (c: Buffer) => {
        if (!textAt && c.toString().includes('word0')) {
          textAt = performance.now();
          resolve();
        }
      }),
    );
    events.on('error', () => {});
    const s = await requestRuntime(rt.endpoint, 'POST', `/session${q}`, { body: {} });
    if (s.status !== 200) throw new Error(`session: ${s.status} ${s.text.slice(0, 200)}`);
    const id = (JSON.parse(s.text) as { id: string }).id;
    const p = await requestRuntime(rt.endpoint, 'POST', `/session/${id}/prompt_async${q}`, { body: { parts: [{ type: 'text', text: 'Say three words.' }], model: { providerID: 'scripted', modelID: 'fake-model' } } });
    if (p.status !== 204) throw new Error(`prompt: ${p.status} ${p.text.slice(0, 200)}`);
    await Promise.race([gotText, sleep(60_000).then(() => Promise.reject(new Error('no text within 60 s')))]);
    const cpuText = treeCpuMs(rt.pid);
    const threads = threadCpu(opencode);
    ac.abort();
    // Warm turns in the same session once the first is done: what a setting costs every later turn.
    await waitIdle(rt, id, q);
    const warm: Array<{ ms: number; cpu: number }> = [];
    for (let i = 0; i < WARM_TURNS; i++) {
      const c0 = treeCpuMs(rt.pid);
      const w0 = performance.now();
      const r = await requestRuntime(rt.endpoint, 'POST', `/session/${id}/message${q}`, { body: { parts: [{ type: 'text', text: `Write a long answer, part ${i + 1}.` }], model: { providerID: 'scripted', modelID: 'fake-model' } }, timeoutMs: 60_000 });
      if (r.status !== 200 || !r.text.includes(`word${WORDS - 1}`)) throw new Error(`warm turn: ${r.status} ${r.text.slice(0, 300)}`);
      warm.push({ ms: performance.now() - w0, cpu: treeCpuMs(rt.pid) - c0 });
    }
    const first = {
      variant: v.name,
      health,
      model: modelAt - t0,
      text: textAt - t0,
      cpuHealth,
      cpuText,
      mainText: threads.opencode ?? 0,
      jitText: threads.JITWorker ?? 0,
      warmMs: median(warm.map((w) => w.ms)),
      warmCpu: median(warm.map((w) => w.cpu)),
    };
    const runtime = rt;
    const turnEnd = performance.now();
    const idle = (async () => {
      try {
        await sleep(SETTLE_MS - (performance.now() - turnEnd));
        const tree = processTree();
        const mem = [runtime.pid, ...descendantsOf(runtime.pid, tree)].map(smaps).reduce((a, b) => ({ rss: a.rss + b.rss, pss: a.pss + b.pss }), { rss: 0, pss: 0 });
        const before = treeCpuMs(runtime.pid, tree);
        const t1 = performance.now();
        await sleep(IDLE_MS);
        return { idleCpu: (treeCpuMs(runtime.pid, tree) - before) / (performance.now() - t1), ...mem };
      } finally {
        await runtime.stop();
        proxy?.close();
      }
    })();
    return { first, idle };
  } catch (err) {
    await rt?.stop();
    proxy?.close();
    throw err;
  }
}

export async function runtimeCold(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const wanted = process.env.BENCH_COLD_VARIANTS?.split(',').filter(Boolean);
  const variants = [...VARIANTS.filter((v) => (wanted ? wanted.includes(v.name) : DEFAULT_VARIANTS.includes(v.name))), ...envVariants(process.env.BENCH_COLD_EXTRA)];
  if (!variants.some((v) => v.name === 'baseline')) variants.unshift(VARIANTS[0]);
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-runtime-cold-'));
  const loads: string[] = [loadAvg()];
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: String(WORDS), WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    if (variants.some((v) => v.name === 'prepared-db')) preparedDb = await migratedDb(join(dir, 'prepared'));
    const samples: Sample[] = [];
    const pending = new Set<Promise<void>>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of variants.map((_, i) => variants[(i + round) % variants.length])) {
        while (pending.size >= MAX_ALIVE) await Promise.race(pending);
        process.stderr.write(`  [runtime-cold] round ${round + 1} of ${ROUNDS}: ${v.name}\n`);
        const runDir = join(dir, `${v.name}-${round}`);
        mkdirSync(runDir, { recursive: true });
        const { first, idle } = await coldStart(runDir, v, llm.value);
        const p: Promise<void> = idle.then((f) => void samples.push({ ...first, ...f })).finally(() => pending.delete(p));
        pending.add(p);
        await sleep(GAP_MS);
      }
      loads.push(loadAvg());
    }
    await Promise.all(pending);

    const rows: Record<string, string> = {
      variant: 'exec -> health / model request / first text ms (p50) | CPU ms to health / to text (main thread, JIT) | warm turn ms (CPU) | idle CPU % of a core | RSS / PSS MB',
    };
    const base = samples.filter((s) => s.variant === 'baseline');
    for (const v of variants) {
      const s = samples.filter((x) => x.variant === v.name);
      const m = (f: (x: Sample) => number) => median(s.map(f));
      const d = (f: (x: Sample) => number) => (v.name === 'baseline' ? '' : ` (${m(f) - median(base.map(f)) >= 0 ? '+' : ''}${(m(f) - median(base.map(f))).toFixed(0)})`);
      rows[v.name] = [
        `${m((x) => x.health).toFixed(0)} / ${m((x) => x.model).toFixed(0)} / ${m((x) => x.text).toFixed(0)}${d((x) => x.text)}`,
        `${m((x) => x.cpuHealth).toFixed(0)} / ${m((x) => x.cpuText).toFixed(0)}${d((x) => x.cpuText)} (${m((x) => x.mainText).toFixed(0)}, ${m((x) => x.jitText).toFixed(0)})`,
        `${m((x) => x.warmMs).toFixed(0)}${d((x) => x.warmMs)} (${m((x) => x.warmCpu).toFixed(0)}${d((x) => x.warmCpu)})`,
        `${(m((x) => x.idleCpu) * 100).toFixed(2)} (max ${(Math.max(...s.map((x) => x.idleCpu)) * 100).toFixed(2)})`,
        `${(m((x) => x.rss) / 1024).toFixed(0)} / ${(m((x) => x.pss) / 1024).toFixed(0)}`,
      ].join(' | ');
      rows[`  ${v.name}: first text each`] = s.map((x) => x.text.toFixed(0)).join(', ');
    }
    for (const v of variants) if (v.env) rows[`  ${v.name}: environment`] = Object.entries(v.env).map(([k, val]) => `${k}=${val}`).join(' ');
    rows['load average 1/5/15 min (2 cores), start and after each round'] = loads.join(' | ');
    const baseText = median(base.map((x) => x.text));
    return report(`a runtime's cold path per variant of its start (${ROUNDS} rounds, interleaved; sandboxed, as the service launches it; medians)`, rows, {
      ok: true,
      target: `measurement (baseline exec -> first text p50 ${baseText.toFixed(0)} ms)`,
    });
  } finally {
    await stopAll();
    removeDir(dir);
  }
}

/**
 * The cold path through the service, against a baseline build in the same run: two `aws serve` (this
 * tree's build and the one BENCH_COLD_BASELINE_BIN names, e.g. a worktree of main after `npm run build`),
 * each on its own PostgreSQL database with the scripted model applied, and USERS members each; members of
 * the two take their first turn alternately (an API client prompting with nothing running): prompt -> the
 * runtime's first event, -> the first streamed text. Then the runtimes of both, idle and awake (freezing
 * is off here: a frozen runtime would hide what a setting costs one that is not): CPU over 5 s, RSS / PSS
 * each; and serve's own account of each start (launch -> healthy, configuration written).
 *
 * Usage: BENCH_COLD_BASELINE_BIN=/work/wt-base/bin/run.js node --import tsx test/bench/run-all.ts runtime-cold-serve
 *   (BENCH_COLD_SERVE_USERS (8))
 */
export async function runtimeColdServe(): Promise<boolean> {
  const baselineBin = process.env.BENCH_COLD_BASELINE_BIN;
  if (!baselineBin) throw new Error('BENCH_COLD_BASELINE_BIN: the baseline build\'s bin/run.js');
  const users = Number(process.env.BENCH_COLD_SERVE_USERS ?? 8);
  const root = new URL('../..', import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), 'awc-')); // short: the runtimes' sockets live under it (108 bytes at most)
  const loads: string[] = [loadAvg()];
  const sides = [
    { name: 'baseline', bin: baselineBin },
    { name: 'this tree', bin: join(root, 'bin', 'run.js') },
  ];
  const dbs: Array<{ url: string; drop(): Promise<void> }> = [];
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const running = [];
    for (const [i, side] of sides.entries()) {
      const db = await scratchDatabase(`agentws_bench_cold_${i}`);
      dbs.push(db);
      const serve = await startServe(side.bin, join(dir, `s${i}`), db.url, { AGENTWS_SERVE_RUNS_WORKER: 'true', AGENTWS_RUNTIME_MAX: String(users + 1), AGENTWS_RUNTIME_FREEZE_SECONDS: '0' });
      track(`aws serve (${side.name})`, serve.child);
      const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
      await waitAgentsAvailable(api);
      await applyScriptedModel(api, llm.value);
      running.push({ ...side, serve, members: await benchMembers(db.url, serve.config, serve.init.tenant.id, users) });
    }
    const turns: TurnTimes[][] = sides.map(() => []);
    for (let u = 0; u < users; u++) {
      // Which side goes first alternates from member to member.
      for (const s of u % 2 ? [1, 0] : [0, 1]) {
        process.stderr.write(`  [runtime-cold-serve] member ${u + 1} of ${users}: ${sides[s].name}, cold\n`);
        const t = await personTurn(running[s].serve.url, running[s].members[u]);
        if (t.failed) throw new Error(`${sides[s].name}: the turn failed: ${t.failed}`);
        turns[s].push(t);
        await sleep(GAP_MS);
      }
      if (u % 2) loads.push(loadAvg());
    }
    const idle = await Promise.all(
      running.map(async (r) => {
        const rts = runtimesOf(r.serve.child.pid!);
        const tree = processTree();
        const mem = rts.map((rt) => treeMemoryKb(rt.sandboxPid, tree));
        const before = rts.map((rt) => treeCpuMs(rt.sandboxPid, tree));
        const t0 = performance.now();
        await sleep(5000);
        const cpu = rts.map((rt, i) => (treeCpuMs(rt.sandboxPid, tree) - before[i]) / (performance.now() - t0));
        return { cpu: median(cpu), rss: median(mem.map((m) => m.rss)), pss: median(mem.map((m) => m.pss)) };
      }),
    );
    // serve's own account of each start (runtime-host.ts): launch -> healthy, and writing its configuration.
    const starts = sides.map((_, i) =>
      readFileSync(join(dir, `s${i}`, 'serve.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('agent runtime configured'))
        .map((l) => JSON.parse(l) as { startMs: number; configureMs: number }),
    );
    const stats = (xs: number[]) => `${median(xs).toFixed(0)} / ${percentile(xs, 90).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;
    const rows: Record<string, string> = {};
    for (const [s, side] of sides.entries()) {
      rows[`${side.name}: prompt -> first text p50/p90/max`] = `${stats(turns[s].map((t) => t.toText))} ms`;
      rows[`${side.name}: prompt -> the runtime's first event p50/p90/max`] = `${stats(turns[s].map((t) => t.toEvent))} ms`;
      rows[`${side.name}: first text each`] = turns[s].map((t) => t.toText.toFixed(0)).join(', ');
      rows[`${side.name}: serve's start -> healthy / configuration written p50`] = `${median(starts[s].map((x) => x.startMs)).toFixed(0)} / ${median(starts[s].map((x) => x.configureMs)).toFixed(0)} ms`;
      rows[`${side.name}: runtimes idle (awake, 5 s) CPU / RSS / PSS median`] = `${(idle[s].cpu * 100).toFixed(2)} % of a core / ${(idle[s].rss / 1024).toFixed(0)} / ${(idle[s].pss / 1024).toFixed(0)} MB`;
    }
    rows['load average 1/5/15 min (2 cores), start and every 2 members'] = loads.join(' | ');
    const p50 = median(turns[1].map((t) => t.toText));
    return report(`a person's cold first answer through the service, this tree against a baseline build (${users} members each, alternately; PostgreSQL, worker in serve)`, rows, {
      ok: p50 <= 3000,
      target: `cold prompt -> first streamed text p50 <= 3000 ms (this tree ${p50.toFixed(0)}, baseline ${median(turns[0].map((t) => t.toText)).toFixed(0)})`,
    });
  } finally {
    await stopAll();
    for (const db of dbs) await db.drop();
    removeDir(dir);
  }
}
