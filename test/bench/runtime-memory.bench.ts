import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ChildProcess } from 'node:child_process';
import { GATEWAY_HOST } from '../../src/core/runtime/host/egress-proxy.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createRuntimeLauncher, type LaunchedRuntime } from '../../src/core/runtime/host/runtime-launcher.js';
import { requestRuntime, type RuntimeEndpoint } from '../../src/core/runtime/host/runtime-transport.js';
import { median, pinned, report } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { treeCpuMs } from '../helpers/process-tree.js';
import { envVariants, loadAvg, onCpu1, processTree, removeDir, startOpencode, stopAll, track } from './agent-bench-utils.js';

/**
 * What an idle agent runtime costs after one turn, and how much of it knobs of its environment take back
 * (target <= 250 MB PSS with its bwrap and socat, <= 1 % of a core idle).
 *
 * Per variant (the runtime's environment, runtimeEnv, plus the variant's extra variables), RUNS bare
 * `opencode serve` (the binary the service ships, no sandbox, no service), each: exec -> health check;
 * one turn against the scripted model (test/bench/fixtures/paced-llm.mjs; provider written into the
 * runtime's opencode.json the way desiredConfig shapes it: openai-compatible with a baseURL), timed and
 * its CPU counted; then idle: memory SETTLE_MS after the turn (serve freezes a runtime idle for 10 s, and
 * a frozen runtime keeps what it holds then), CPU over the next IDLE_MS (what a runtime costs where it
 * cannot be frozen), PSS again at the end. Memory from /proc/<pid>/smaps_rollup: RSS, PSS and its
 * anonymous (the runtime's own) and file-backed (the binary's pages, shared by every runtime on the host)
 * parts. Every figure is set against the baseline (runtimeEnv unchanged) measured in the same run.
 *
 * Runs are staggered, not one after another (that would take 15 minutes): a runtime starts and takes its
 * turn while the ones before it sit idle, each measured on its own clock from its own turn; the order of
 * the variants rotates from round to round. Runtimes and their idle time are pinned to CPU 0, this process
 * and the scripted model to CPU 1. Running side by side, runtimes share the binary's pages, so the
 * file-backed part of PSS is what ~8 runtimes on a host pay (the service's case), not one alone.
 *
 * What the sandbox adds: one runtime launched as the service launches it (createRuntimeLauncher, bwrap +
 * two socat bridges, baseline environment; its model calls leave through a forwarding proxy on its
 * proxy socket), the same turn, and the PSS of each process of its tree.
 *
 * Usage: PATH=/opt/agentws/node-v24.21.0-linux-x64/bin:$PATH node --import tsx test/bench/run-all.ts runtime-memory
 *   BENCH_MEMORY_RUNS (3), BENCH_MEMORY_SETTLE_MS (10000), BENCH_MEMORY_IDLE_MS (40000),
 *   BENCH_MEMORY_VARIANTS (names, comma-separated; default all), BENCH_MEMORY_EXTRA
 *   ("name:K=V,K=V;name2:K=V": more variants to try), BENCH_MEMORY_SANDBOX=0 (skip the sandboxed runtime).
 */

const RUNS = Number(process.env.BENCH_MEMORY_RUNS ?? 3);
const SETTLE_MS = Number(process.env.BENCH_MEMORY_SETTLE_MS ?? 10_000);
const IDLE_MS = Number(process.env.BENCH_MEMORY_IDLE_MS ?? 40_000);
/** Between one runtime's turn and the next runtime's start: its post-turn work (title) is done. */
const GAP_MS = 2000;
/** At most this many runtimes alive at once (memory of the host). */
const MAX_ALIVE = 10;
const PSS_TARGET_KB = 250 * 1024;
const IDLE_CPU_TARGET = 0.01;
const MiB = 1024 * 1024;

interface Variant {
  name: string;
  env: Record<string, string>;
}

const GC_EVERY_16M = { BUN_JSC_gcMaxHeapSize: String(16 * MiB) };
/**
 * The variants. JSC options are read from BUN_JSC_<name> (JavaScriptCore's OptionsList.h); mimalloc's
 * from MIMALLOC_<name>. BUN_JSC_forceRAMSize stays what runtimeEnv says (the host's RAM, at most 8 GiB):
 * told less, Bun's GC judges a heap over 70 % of it pressure and collects without end.
 *
 * Not here, tried: BUN_JSC_useGenerationalGC=0 (more memory, not less), useUnlinkedCodeBlockJettisoning
 * and useSourceProviderCache=0 (no change), MIMALLOC_ARENA_EAGER_COMMIT=0 / ALLOW_LARGE_OS_PAGES=0 (no
 * change), smallHeapGrowthFactor 1.25 (less saved than gcMaxHeapSize, turn CPU +80 %) and 1.75 (turn
 * CPU +20 %, idle CPU unchanged), gcMaxHeapSize 8 MiB (no less memory than 16 MiB, turn CPU +19 %),
 * percentCPUPerMBForEdenTimer 0.0001 (idle CPU unchanged), BUN_GC_TIMER_DISABLE / BUN_GC_TIMER_INTERVAL
 * (Bun 1.3.14 reads them before it has loaded the environment: no effect).
 *
 * Idle CPU: an awake idle runtime's ~1 % of a core is mostly eden collections, one or two a second
 * (BUN_JSC_logGC=1 shows them), requested by Bun 1.3.14's GC controller, which collects ~16 ms after any
 * event-loop tick that finds the heap's block count moved, and a collection moves it again
 * (oven-sh/bun#35356, fixed in later Bun). After a turn it settles into that loop or not; with
 * smallHeapGrowthFactor 1.5 it did not in any run here.
 */
const VARIANTS: Variant[] = [
  { name: 'baseline', env: {} },
  // Bun's smaller-heap mode (JSC's Medium heap type: a smaller minimum per GC cycle).
  { name: 'smol', env: { BUN_OPTIONS: '--smol' } },
  // mimalloc returns freed pages at once instead of after its purge delay.
  { name: 'mimalloc-purge', env: { MIMALLOC_PURGE_DELAY: '0' } },
  // The heap grows by half, not double, after a full collection (Heap::proportionalHeapSize uses
  // smallHeapGrowthFactor, 2, while the process uses less than 1/4 of the RAM it is told): more full
  // collections.
  { name: 'jsc-growth-1.5', env: { BUN_JSC_smallHeapGrowthFactor: '1.5' } },
  // A collection every 16 (32) MiB allocated, whatever the heap's size (Heap::collectIfNecessaryOrDefer,
  // instead of letting the heap double between full collections); no memory-pressure logic involved.
  { name: 'jsc-gc-every-16m', env: GC_EVERY_16M },
  { name: 'jsc-gc-every-32m', env: { BUN_JSC_gcMaxHeapSize: String(32 * MiB) } },
  { name: 'gc-every-16m+smol+purge', env: { ...GC_EVERY_16M, BUN_OPTIONS: '--smol', MIMALLOC_PURGE_DELAY: '0' } },
  { name: 'gc-every-32m+growth-1.5', env: { BUN_JSC_gcMaxHeapSize: String(32 * MiB), BUN_JSC_smallHeapGrowthFactor: '1.5' } },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (kb: number) => (kb / 1024).toFixed(0);
const pct = (x: number) => `${(x * 100).toFixed(2)} %`;

interface Smaps {
  rss: number;
  pss: number;
  pssAnon: number;
  pssFile: number;
}

/** Memory of one process (kB) from /proc/<pid>/smaps_rollup; zeros once it is gone. */
function smapsOf(pid: number): Smaps {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    return { rss: 0, pss: 0, pssAnon: 0, pssFile: 0 };
  }
  const field = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
  return { rss: field('Rss'), pss: field('Pss'), pssAnon: field('Pss_Anon'), pssFile: field('Pss_File') };
}

const commOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
};

/** The scripted model as the runtime's only provider, shaped like desiredConfig's (runtime.service.ts). */
function writeModelConfig(home: string, baseURL: string): void {
  const dir = join(home, '.config', 'opencode');
  mkdirSync(dir, { recursive: true });
  const config = {
    provider: {
      scripted: {
        npm: '@ai-sdk/openai-compatible',
        name: 'scripted',
        options: { baseURL, apiKey: 'sk-scripted' },
        models: { 'fake-model': { name: 'fake-model', limit: { context: 32_000, output: 4096 } } },
      },
    },
    enabled_providers: ['scripted'],
    model: 'scripted/fake-model',
    snapshot: false,
    permission: { external_directory: 'deny' },
    share: 'disabled',
    autoupdate: false,
  };
  writeFileSync(join(dir, 'opencode.json'), JSON.stringify(config, null, 2));
}

/** One turn: a session and a prompt, answered in full (POST /session/:id/message returns once the turn ends). */
async function turn(ep: RuntimeEndpoint, directory: string): Promise<void> {
  const q = `?directory=${encodeURIComponent(directory)}`;
  const s = await requestRuntime(ep, 'POST', `/session${q}`, { body: {} });
  if (s.status !== 200) throw new Error(`create session: ${s.status} ${s.text.slice(0, 300)}`);
  const id = JSON.parse(s.text).id as string;
  const r = await requestRuntime(ep, 'POST', `/session/${id}/message${q}`, {
    body: { parts: [{ type: 'text', text: 'Write a short paragraph about memory.' }], model: { providerID: 'scripted', modelID: 'fake-model' } },
    timeoutMs: 60_000,
  });
  if (r.status !== 200) throw new Error(`turn: ${r.status} ${r.text.slice(0, 300)}`);
  const answer = JSON.parse(r.text) as { info: { error?: unknown }; parts: Array<{ type: string; text?: string }> };
  if (answer.info.error || !answer.parts.some((p) => p.type === 'text' && p.text?.includes('word'))) {
    throw new Error(`the turn did not answer with the scripted model's words: ${r.text.slice(0, 400)}`);
  }
}

interface Sample {
  variant: string;
  health: number;
  turn: number;
  turnCpu: number;
  /** SETTLE_MS after the turn (serve freezes a runtime idle for 10 s: this is what it keeps). */
  settled: Smaps;
  /** At the end of the idle window. */
  later: Smaps;
  cpu: number;
}

/** After its turn: memory SETTLE_MS later, CPU over IDLE_MS, memory again (each runtime on its own clock). */
async function idleFigures(pid: number, turnEnd: number): Promise<{ settled: Smaps; later: Smaps; cpu: number }> {
  await sleep(Math.max(0, turnEnd + SETTLE_MS - performance.now()));
  const settled = smapsOf(pid);
  const tree = processTree();
  const before = treeCpuMs(pid, tree);
  const t0 = performance.now();
  await sleep(IDLE_MS);
  const cpu = (treeCpuMs(pid, tree) - before) / (performance.now() - t0);
  return { settled, later: smapsOf(pid), cpu };
}

/** A plain HTTP forward proxy on a Unix socket that sends every request to the scripted model. */
function startModelProxy(socketPath: string, llmUrl: string): Promise<http.Server> {
  const target = new URL(llmUrl);
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', `http://${GATEWAY_HOST}`);
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

interface SandboxFigures {
  health: number;
  turn: number;
  total: Smaps;
  opencode: Smaps;
  helpers: Array<{ comm: string; pss: number; rss: number }>;
  cpu: number;
}

/** One runtime as the service starts it (sandboxed, baseline environment), one turn, idle figures per process. */
async function sandboxed(dir: string, llmUrl: string): Promise<SandboxFigures> {
  const launcher = createRuntimeLauncher({ dataDir: join(dir, 'data'), sandbox: true, nice: 0, log: silentLogger });
  const root = join(dir, 'root');
  writeModelConfig(join(root, 'home'), `http://${GATEWAY_HOST}/v1`);
  let proxy: http.Server | undefined;
  let rt: LaunchedRuntime | undefined;
  try {
    const t0 = performance.now();
    rt = await launcher.launch({ workspace: join(dir, 'workspace'), root, tenant: join(dir, 'tenant') }, async (at) => {
      if (!('path' in at)) throw new Error('expected a sandboxed launch');
      proxy = await startModelProxy(at.path, llmUrl);
      return {};
    });
    const health = performance.now() - t0;
    const t1 = performance.now();
    await turn(rt.endpoint, rt.directory);
    const turnMs = performance.now() - t1;
    await sleep(SETTLE_MS);
    const tree = processTree();
    const walk = (p: number): number[] => (tree.get(p) ?? []).flatMap((c) => [c, ...walk(c)]);
    const each = [rt.pid, ...walk(rt.pid)].map((p) => ({ pid: p, comm: commOf(p), ...smapsOf(p) }));
    const oc = each.find((e) => e.comm === 'opencode');
    const total = each.reduce((a, e) => ({ rss: a.rss + e.rss, pss: a.pss + e.pss, pssAnon: a.pssAnon + e.pssAnon, pssFile: a.pssFile + e.pssFile }), { rss: 0, pss: 0, pssAnon: 0, pssFile: 0 });
    const before = treeCpuMs(rt.pid, tree);
    const t2 = performance.now();
    await sleep(IDLE_MS);
    const cpu = (treeCpuMs(rt.pid, tree) - before) / (performance.now() - t2);
    return {
      health,
      turn: turnMs,
      total,
      opencode: oc ?? { rss: 0, pss: 0, pssAnon: 0, pssFile: 0 },
      helpers: each.filter((e) => e !== oc).map((e) => ({ comm: e.comm, pss: e.pss, rss: e.rss })),
      cpu,
    };
  } finally {
    await rt?.stop();
    proxy?.close();
  }
}

export async function runtimeMemory(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const wanted = process.env.BENCH_MEMORY_VARIANTS?.split(',').filter(Boolean);
  const variants = [...VARIANTS.filter((v) => !wanted || wanted.includes(v.name)), ...envVariants(process.env.BENCH_MEMORY_EXTRA)];
  if (!variants.some((v) => v.name === 'baseline')) variants.unshift(VARIANTS[0]);
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-runtime-memory-'));
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '200', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);

    // The sandboxed runtime first, alone on CPU 0 for its start and turn; it idles while the others start.
    let sandbox: Promise<SandboxFigures | null> = Promise.resolve(null);
    if (process.env.BENCH_MEMORY_SANDBOX !== '0') {
      process.stderr.write('  [runtime-memory] a sandboxed runtime (bwrap, socat), baseline environment\n');
      sandbox = sandboxed(join(dir, 'sandboxed'), llm.value).catch((err: Error) => {
        process.stderr.write(`  [runtime-memory] the sandboxed runtime failed: ${err.message}\n`);
        return null;
      });
      await sleep(8000);
    }

    const samples: Sample[] = [];
    const pending = new Set<Promise<void>>();
    for (let round = 0; round < RUNS; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length]);
      for (const v of order) {
        while (pending.size >= MAX_ALIVE) await Promise.race(pending);
        process.stderr.write(`  [runtime-memory] round ${round + 1} of ${RUNS}: ${v.name}\n`);
        const runDir = join(dir, `${v.name}-${round}`);
        writeModelConfig(join(runDir, 'home'), `${llm.value}/v1`);
        // The workspace apart from the runtime's home, as in the sandbox: the runtime watches the directory
        // it works in, and its own writes (logs, storage) would wake it.
        const workspace = join(runDir, 'workspace');
        mkdirSync(workspace, { recursive: true });
        const t0 = performance.now();
        const oc = await startOpencode(runDir, pinned, v.env);
        const health = performance.now() - t0;
        const pid = oc.child.pid!;
        const cpu0 = treeCpuMs(pid);
        const t1 = performance.now();
        await turn({ url: oc.url, authorization: oc.authorization }, workspace);
        const turnEnd = performance.now();
        const turnCpu = treeCpuMs(pid) - cpu0;
        const child: ChildProcess = oc.child;
        const p: Promise<void> = idleFigures(pid, turnEnd)
          .then((f) => void samples.push({ variant: v.name, health, turn: turnEnd - t1, turnCpu, ...f }))
          .finally(() => stopAll([child]))
          .finally(() => pending.delete(p));
        pending.add(p);
        await sleep(GAP_MS);
      }
    }
    process.stderr.write(`  [runtime-memory] waiting for the last runtimes' idle time (${(SETTLE_MS + IDLE_MS) / 1000} s)\n`);
    await Promise.all(pending);
    const sb = await sandbox;
    const load = loadAvg();

    const of = (name: string) => samples.filter((s) => s.variant === name);
    const figures = variants.map((v) => {
      const s = of(v.name);
      const m = (f: (x: Sample) => number) => median(s.map(f));
      return {
        v,
        health: m((x) => x.health),
        turn: m((x) => x.turn),
        turnCpu: m((x) => x.turnCpu),
        rss: m((x) => x.settled.rss),
        pss: m((x) => x.settled.pss),
        pssAnon: m((x) => x.settled.pssAnon),
        pssFile: m((x) => x.settled.pssFile),
        pssLater: m((x) => x.later.pss),
        cpu: m((x) => x.cpu),
        cpuMax: Math.max(...s.map((x) => x.cpu)),
      };
    });
    const base = figures.find((f) => f.v.name === 'baseline')!;
    const helpersKb = sb ? sb.helpers.reduce((a, h) => a + h.pss, 0) : 0;
    const x = (a: number, b: number) => `x${(a / Math.max(b, 1e-9)).toFixed(2)}`;
    const rows: Record<string, string> = {
      'variant': `health ms | turn ms (CPU) | RSS MB | PSS MB (anon + file) | PSS vs base | PSS +${IDLE_MS / 1000} s | idle CPU p50 (max) | CPU vs base`,
    };
    for (const f of figures) {
      rows[f.v.name] = [
        f.health.toFixed(0),
        `${f.turn.toFixed(0)} (${f.turnCpu.toFixed(0)})`,
        mb(f.rss),
        `${mb(f.pss)} (${mb(f.pssAnon)} + ${mb(f.pssFile)})`,
        x(f.pss, base.pss),
        mb(f.pssLater),
        `${pct(f.cpu)} (${pct(f.cpuMax)})`,
        x(f.cpu, base.cpu),
      ].join(' | ');
    }
    for (const f of figures) rows[`  ${f.v.name}: environment`] = Object.entries(f.v.env).map(([k, val]) => `${k}=${val}`).join(' ') || 'runtimeEnv as it is';
    if (sb) {
      rows['sandboxed runtime (baseline env): exec->health / turn'] = `${sb.health.toFixed(0)} / ${sb.turn.toFixed(0)} ms`;
      rows['sandboxed runtime: whole tree RSS / PSS'] = `${mb(sb.total.rss)} / ${mb(sb.total.pss)} MB, of which opencode ${mb(sb.opencode.pss)} MB (anon ${mb(sb.opencode.pssAnon)}); idle CPU ${pct(sb.cpu)} of a core`;
      rows['sandboxed runtime: its other processes PSS (RSS)'] = `${sb.helpers.map((h) => `${h.comm} ${(h.pss / 1024).toFixed(1)} (${(h.rss / 1024).toFixed(1)})`).join(', ')} MB; together ${(helpersKb / 1024).toFixed(1)} MB`;
    } else rows['sandboxed runtime'] = 'not measured';
    rows['load average 1/5/15 min (2 cores)'] = load;

    // Target: a variant whose idle runtime, with the sandbox's other processes, stays within 250 MB PSS and
    // 1 % of a core.
    const meeting = figures.filter((f) => f.pss + helpersKb <= PSS_TARGET_KB && f.cpu <= IDLE_CPU_TARGET).map((f) => f.v.name);
    return report(
      `an idle agent runtime after one turn, per environment variant (${RUNS} bare opencode each, staggered; medians; memory ${SETTLE_MS / 1000} s after the turn, when serve would freeze it; CPU over the next ${IDLE_MS / 1000} s)`,
      rows,
      { ok: meeting.length > 0, target: `PSS + the sandbox's other processes <= 250 MB and idle CPU <= 1 % of a core (${meeting.length ? `met by ${meeting.join(', ')}` : 'no variant'})` },
    );
  } finally {
    await stopAll();
    removeDir(dir);
  }
}
