import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { median, report, scratchDatabase, startServe } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { apiOf, applyScriptedModel, configValue, cpuMs, dumpLogs, heldKb, loadAvg, onCpu1, processTree, removeDir, rssKb, runtimesOf, stopAll, track, waitAgentsAvailable, type UserRuntime } from './agent-bench-utils.js';
import { benchMembers, modelFirstWordMs, personTurn, type TurnTimes } from './bench-members.js';
import { treeCpuMs } from '../helpers/process-tree.js';
import { runtimeGroup } from '../helpers/runtime-group.js';
import { setUpZramSwap, type ZramSwap } from '../helpers/zram-swap.js';
import { zstdEstimate } from './page-compressibility.js';

/** Runtimes measured (each after a first turn). */
const N = Number(process.env.BENCH_PAGEOUT_RUNTIMES ?? 6);
/** Of them, how many take a turn while frozen and resident (the baseline); the others while paged out. */
const K = Math.max(1, Math.floor(N / 2));
/** serve's timings here: frozen after FREEZE_S idle, paged out PAGEOUT_S after that (short, for the bench; longer than the N first turns take side by side, ~15 s here, so that the baseline is read before any pages out). */
const FREEZE_S = Number(process.env.BENCH_PAGEOUT_FREEZE_S ?? 2);
const PAGEOUT_S = Number(process.env.BENCH_PAGEOUT_AFTER_S ?? 45);
/** The zram compressor (this kernel: lzo-rle, lzo, lz4). */
const ALGORITHM = process.env.BENCH_PAGEOUT_ZRAM_ALG ?? 'lzo-rle';
/** How long idle CPU is read while every runtime is paged out. */
const IDLE_MS = Number(process.env.BENCH_PAGEOUT_IDLE_MS ?? 15_000);
/** Targets. */
const HELD_TARGET_KB = 60 * 1024;
const PAGED_OVER_MODEL_TARGET_MS = 800;
const FROZEN_OVER_MODEL_TARGET_MS = 300;

const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`;
const ms = (x: number) => `${x.toFixed(0)} ms`;
const stats = (xs: number[]) => (xs.length ? `${median(xs).toFixed(0)} / ${Math.max(...xs).toFixed(0)}` : '-');

/** The RAM the zram pool spends per byte it stores (0 without a zram device). */
function poolRatio(zram: ZramSwap): number {
  const z = zram.stats();
  return z && z.origBytes > 0 ? z.memUsedBytes / z.origBytes : 0;
}

const memAvailableKb = () => Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN);

/**
 * Idle runtimes paged out to compressed swap (the targets below), on `aws serve` (PostgreSQL, worker in
 * serve) with a zram swap the bench sets up (lzo-rle by default, BENCH_PAGEOUT_ZRAM_ALG; removed after) and short timings (frozen after FREEZE_S,
 * paged out PAGEOUT_S later). N people take a first turn each, side by side; once their runtimes are
 * frozen, what each holds of the host's memory is read (PSS of its sandbox's processes: the baseline,
 * frozen and resident); K of them take a turn then (first streamed text from a frozen resident runtime).
 * Once every runtime is paged out, what each holds again, now counting its share of the compressed pool
 * (SwapPss x zram's mem_used_total / orig_data_size: the RAM the pool spends per byte stored); their CPU
 * while paged out (must be 0), serve's CPU for the page-outs (the kernel's reclaim and compression run in
 * the thread that asks for it, serve's) against serve's own idle CPU; then the other N - K take a turn
 * (first streamed text after a paged-out runtime is thawed). Baselines in the same run: the scripted
 * model's own first word, the runtimes frozen and resident, serve idle, the host's available memory.
 *   npm run bench -- runtime-pageout   (BENCH_PAGEOUT_RUNTIMES, _FREEZE_S, _AFTER_S, _IDLE_MS)
 */
export async function runtimePageout(): Promise<boolean> {
  const name = `idle runtimes paged out to compressed swap (zram, ${ALGORITHM}): memory held, first answer after, CPU (${N} runtimes, PostgreSQL, worker in serve)`;
  const setup = await setUpZramSwap({ algorithm: ALGORITHM });
  if (!setup.swap) return report(name, { skipped: setup.reason }, { ok: false, target: 'zram swap set up by the bench (root, zram module)' });
  const zram = setup.swap;
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-pageout-'));
  const db = await scratchDatabase('agentws_bench_pageout');
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const modelFirst = median(await modelFirstWordMs(llm.value, 20));
    const serve = await startServe(bin, join(dir, 'serve'), db.url, {
      AGENTWS_SERVE_RUNS_WORKER: 'true',
      AGENTWS_RUNTIME_MAX: String(N + 2),
      AGENTWS_RUNTIME_FREEZE_SECONDS: String(FREEZE_S),
      AGENTWS_RUNTIME_PAGEOUT_SECONDS: String(PAGEOUT_S),
    });
    track('aws serve', serve.child);
    const servePid = serve.child.pid!;
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    const ready = (await fetch(`${serve.url}/readyz`).then((r) => r.json())) as any;
    const paging = ready.agents?.limits?.paging ?? null;
    if (!paging) throw new Error(`serve does not page runtimes out: ${JSON.stringify(ready.agents?.limits?.unavailable)}`);
    await applyScriptedModel(api, llm.value);
    const people = await benchMembers(db.url, serve.config, serve.init.tenant.id, N, 'pageout');
    const pagedOutNow = async (): Promise<number> => {
      const r = await api.call('GET', '/v1/admin/runtime');
      return (r.json?.runtime?.hosts ?? []).reduce((a: number, h: any) => a + (h.pagedOut ?? 0), 0);
    };
    const availableBefore = memAvailableKb();

    try {
      // First turns, side by side; then each person's runtime, found by the order of its first event.
      process.stderr.write(`  [runtime-pageout] ${N} people: a first turn each\n`);
      const first = await Promise.all(people.map((m) => personTurn(serve.url, m, { timeoutMs: 180_000 })));
      const failed = first.filter((t) => t.failed);
      if (failed.length) throw new Error(`${failed.length} first turns failed: ${failed[0].failed}`);
      const runtimes = runtimesOf(servePid);
      if (runtimes.length !== N) throw new Error(`serve runs ${runtimes.length} runtimes, not ${N}`);
      // Whose each runtime is (agent_runtimes: its user, by the sandbox's pid), and that person's session.
      const rows = await rowsOf<{ userId: string; pid: number }>(db.url, `select user_id as "userId", pid from agent_runtimes`);
      const who = runtimes.map((rt) => {
        const userId = rows.find((r) => r.pid === rt.sandboxPid)?.userId;
        const i = people.findIndex((p) => p.userId === userId);
        if (i < 0) throw new Error(`no person's row for the runtime ${rt.sandboxPid}`);
        return { member: people[i], sessionId: first[i].sessionId };
      });
      const frozen = (rt: UserRuntime) => runtimeGroup(rt.sandboxPid)?.frozen === true;
      const waitFor = async (what: string, cond: () => boolean | Promise<boolean>, timeoutMs: number) => {
        const deadline = Date.now() + timeoutMs;
        while (!(await cond())) {
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await waitFor('every runtime frozen', () => runtimes.every(frozen), 60_000);
      const frozenAt = performance.now();
      if ((await pagedOutNow()) !== 0) throw new Error('runtimes were paged out before the baseline was read: raise BENCH_PAGEOUT_AFTER_S');

      // Baseline: frozen and resident.
      let tree = processTree();
      const resident = runtimes.map((rt) => heldKb(rt.sandboxPid, tree, poolRatio(zram)));
      const availableFrozen = memAvailableKb();
      const residentGroups = runtimes.map((rt) => runtimeGroup(rt.sandboxPid)!);

      // A turn from a frozen resident runtime (K of them, one after another), before any pages out.
      const warm: TurnTimes[] = [];
      for (let i = 0; i < K; i++) {
        const g = runtimeGroup(runtimes[i].sandboxPid)!;
        if (!g.frozen || (g.memoryBytes ?? 0) < 0.7 * (residentGroups[i].memoryBytes ?? 0)) throw new Error(`runtime ${i} is not frozen and resident before its turn: ${JSON.stringify(g)}`);
        process.stderr.write(`  [runtime-pageout] a turn of person ${i + 1}, runtime frozen and resident\n`);
        warm.push(await personTurn(serve.url, who[i].member, { sessionId: who[i].sessionId }));
      }
      // What zstd would make of the same memory (this kernel's zram has lzo-rle at best): one page in four of
      // the last runtime, read while it is frozen and resident (it is paged out later, untouched meanwhile).
      const treePids = (pid: number): number[] => [pid, ...(tree.get(pid) ?? []).flatMap(treePids)];
      const zstd = zstdEstimate(treePids(runtimes[N - 1].sandboxPid), [1, 3], 4);
      if (performance.now() - frozenAt > PAGEOUT_S * 1000) throw new Error('the frozen runtimes\' turns took longer than the page-out time: raise BENCH_PAGEOUT_AFTER_S');

      // The page-outs: serve's CPU while they happen (nothing else runs), to every runtime paged out.
      process.stderr.write(`  [runtime-pageout] waiting for ${N} runtimes to be paged out (${FREEZE_S} + ${PAGEOUT_S} s idle)\n`);
      const pagingFrom = { t: performance.now(), serve: cpuMs(servePid) };
      await waitFor('every runtime paged out', async () => (await pagedOutNow()) === N, (FREEZE_S + PAGEOUT_S) * 1000 + 120_000);
      const pagingTo = { t: performance.now(), serve: cpuMs(servePid) };
      // Settled a moment (the last page-out's report may come before the kernel's figures do).
      await new Promise((r) => setTimeout(r, 1000));
      tree = processTree();
      const paged = runtimes.map((rt) => heldKb(rt.sandboxPid, tree, poolRatio(zram)));
      const pagedGroups = runtimes.map((rt) => runtimeGroup(rt.sandboxPid)!);
      const z = zram.stats();
      const availableAfter = memAvailableKb();

      // Idle while paged out: the runtimes' CPU (none: frozen) and serve's own (the baseline of the page-out cost).
      process.stderr.write(`  [runtime-pageout] ${N} runtimes paged out: CPU over ${IDLE_MS / 1000} s\n`);
      const idleFrom = { t: performance.now(), serve: cpuMs(servePid), rts: runtimes.map((rt) => treeCpuMs(rt.sandboxPid, tree)) };
      await new Promise((r) => setTimeout(r, IDLE_MS));
      const idleTo = { t: performance.now(), serve: cpuMs(servePid), rts: runtimes.map((rt) => treeCpuMs(rt.sandboxPid, tree)) };
      const idleRuntimeMs = idleTo.rts.reduce((a, x, i) => a + x - idleFrom.rts[i], 0);
      const serveIdleRate = (idleTo.serve - idleFrom.serve) / (idleTo.t - idleFrom.t);
      const pagingWindow = pagingTo.t - pagingFrom.t;
      const pagingServeMs = pagingTo.serve - pagingFrom.serve;
      const pageOutCpuMs = pagingServeMs - serveIdleRate * pagingWindow;

      // A turn after the runtime was paged out (the other N - K, untouched since their first turn).
      const thawed: TurnTimes[] = [];
      for (let i = K; i < N; i++) {
        const g = runtimeGroup(runtimes[i].sandboxPid)!;
        if (!g.frozen || (g.memoryBytes ?? Infinity) > 0.5 * (residentGroups[i].memoryBytes ?? 0)) throw new Error(`runtime ${i} is not paged out before its turn: ${JSON.stringify(g)}`);
        process.stderr.write(`  [runtime-pageout] a turn of person ${i + 1}, runtime paged out\n`);
        thawed.push(await personTurn(serve.url, who[i].member, { sessionId: who[i].sessionId }));
      }
      const turnFailed = [...warm, ...thawed].filter((t) => t.failed);
      if (turnFailed.length) throw new Error(`${turnFailed.length} turns failed: ${turnFailed[0].failed}`);
      const serveSwapKb = Number(/^VmSwap:\s+(\d+) kB/m.exec(readFileSync(`/proc/${servePid}/status`, 'utf8'))?.[1] ?? NaN);

      const heldMedian = median(paged.map((p) => p.held));
      const residentMedian = median(resident.map((p) => p.held));
      const warmOver = median(warm.map((t) => t.toText)) - modelFirst;
      const thawedOver = median(thawed.map((t) => t.toText)) - modelFirst;
      const verdicts = {
        held: heldMedian <= HELD_TARGET_KB,
        thawed: thawedOver <= PAGED_OVER_MODEL_TARGET_MS,
        warm: warmOver <= FROZEN_OVER_MODEL_TARGET_MS,
        idle: idleRuntimeMs === 0,
      };
      const mark = (v: boolean) => (v ? 'met' : 'NOT met');
      const logged = pageOutLog(join(dir, 'serve', 'serve.log'));
      return report(
        name,
        {
          'paging mechanism (/readyz agents.limits.paging)': paging,
          'frozen, resident (baseline): PSS per runtime median / max': `${mb(residentMedian)} / ${mb(Math.max(...resident.map((p) => p.held)))}; group memory median ${mb(median(residentGroups.map((g) => (g.memoryBytes ?? 0) / 1024)))}`,
          'paged out: held per runtime median / max': `${mb(heldMedian)} / ${mb(Math.max(...paged.map((p) => p.held)))}  ${mark(verdicts.held)} (<= ${mb(HELD_TARGET_KB)}); ${((heldMedian / residentMedian) * 100).toFixed(1)} % of the baseline (${(residentMedian / heldMedian).toFixed(1)}x less)`,
          'paged out: of it resident PSS / share of the zram pool (median)': `${mb(median(paged.map((p) => p.pss)))} / ${mb(median(paged.map((p) => p.poolKb)))} (SwapPss ${mb(median(paged.map((p) => p.swapPss)))})`,
          'paged out: group memory / in swap (median)': `${mb(median(pagedGroups.map((g) => (g.memoryBytes ?? 0) / 1024)))} / ${mb(median(pagedGroups.map((g) => (g.swapBytes ?? 0) / 1024)))}`,
          'zram: stored / compressed / pool memory': z ? `${mb(z.origBytes / 1024)} / ${mb(z.comprBytes / 1024)} / ${mb(z.memUsedBytes / 1024)} (${(z.origBytes / Math.max(1, z.memUsedBytes)).toFixed(2)}x)` : '-',
          'zstd instead (this kernel has none): one runtime\'s resident anonymous pages compressed page by page': (() => {
            const nonZero = zstd.storedBytes - zstd.zeroPages * 4096;
            const algPerByte = z && z.origBytes > 0 ? z.comprBytes / z.origBytes : NaN;
            const heldWith = (level: number) => {
              // The pool's share scaled by how much smaller zstd's pages are than the zram compressor's on the same kind of memory.
              const factor = zstd.compressedBytes[level] / Math.max(1, zstd.storedBytes) / algPerByte;
              return median(paged.map((p) => p.pss + p.poolKb * factor));
            };
            return `${mb(zstd.storedBytes / 1024)} in ${zstd.pages} pages (${zstd.zeroPages} zero): zstd-1 ${mb(zstd.compressedBytes[1] / 1024)} (${(nonZero / zstd.compressedBytes[1]).toFixed(2)}x of the non-zero), zstd-3 ${mb(zstd.compressedBytes[3] / 1024)} (${(nonZero / zstd.compressedBytes[3]).toFixed(2)}x); ${ALGORITHM} in zram here ${(1 / algPerByte).toFixed(2)}x of all it stores. Held per runtime paged out with zstd (estimate): zstd-1 ${mb(heldWith(1))}, zstd-3 ${mb(heldWith(3))}`;
          })(),
          'host MemAvailable (the whole host, others\' work included): before the turns / frozen / paged out': `${mb(availableBefore)} / ${mb(availableFrozen)} / ${mb(availableAfter)}: paging out gave back ${mb(availableAfter - availableFrozen)}, ${mb((availableAfter - availableFrozen) / N)} a runtime (by the held figures: ${mb(residentMedian - heldMedian)})`,
          'first text, frozen resident runtime: p50 / max; over the model': `${stats(warm.map((t) => t.toText))} ms; ${ms(warmOver)}  ${mark(verdicts.warm)} (<= ${FROZEN_OVER_MODEL_TARGET_MS})`,
          'first text, paged-out runtime thawed: p50 / max; over the model': `${stats(thawed.map((t) => t.toText))} ms; ${ms(thawedOver)}  ${mark(verdicts.thawed)} (<= ${PAGED_OVER_MODEL_TARGET_MS}); ${(thawedOver - warmOver).toFixed(0)} ms more than frozen resident`,
          'baseline: the scripted model\'s first word p50': `${modelFirst.toFixed(1)} ms`,
          [`paged out: CPU of the ${N} runtimes over ${IDLE_MS / 1000} s`]: `${idleRuntimeMs} ms  ${mark(verdicts.idle)} (0)`,
          'page-outs: serve CPU during them / serve idle over as long': `${ms(pagingServeMs)} / ${ms(serveIdleRate * pagingWindow)} over ${(pagingWindow / 1000).toFixed(1)} s: ${ms(pageOutCpuMs / N)} per runtime`,
          'page-outs as serve logged them (ms each, median / max)': logged.length ? `${stats(logged.map((l) => l.ms))} ms (${logged.length} logged)` : 'not logged',
          'aws serve: RSS / in swap (kept out of swap)': `${mb(rssKb(servePid))} / ${Number.isFinite(serveSwapKb) ? mb(serveSwapKb) : '?'}`,
          'load average 1/5/15 min (2 cores)': loadAvg(),
        },
        {
          ok: Object.values(verdicts).every(Boolean),
          target: `paged out <= ${mb(HELD_TARGET_KB)} held; first text after a thaw <= model + ${PAGED_OVER_MODEL_TARGET_MS} ms, frozen resident <= model + ${FROZEN_OVER_MODEL_TARGET_MS} ms; no CPU while paged out`,
        },
      );
    } catch (err) {
      dumpLogs([join(dir, 'serve', 'serve.log')]);
      throw err;
    }
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
    await zram.teardown();
  }
}

async function rowsOf<T>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows as T[];
  } finally {
    await c.end();
  }
}

/** Page-outs serve logged (their time, ms), when it logs them. */
function pageOutLog(file: string): Array<{ ms: number }> {
  const out: Array<{ ms: number }> = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!/paged out|page.?out/i.test(line)) continue;
    try {
      const j = JSON.parse(line);
      if (typeof j.ms === 'number') out.push({ ms: j.ms });
    } catch {
      // not a JSON line
    }
  }
  return out;
}
