import { mkdtempSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { median, percentile, report, scratchDatabase, startServe } from './bench-utils.js';
import { spawnUntil } from '../helpers/cli.js';
import { readFileSync } from 'node:fs';
import { apiOf, applyScriptedModel, configValue, dumpLogs, heldKb, loadAvg, onCpu1, processTree, removeDir, rssKb, runtimesOf, stopAll, track, waitAgentsAvailable } from './agent-bench-utils.js';
import { setUpZramSwap, type ZramSwap } from '../helpers/zram-swap.js';
import { benchMembers, modelFirstWordMs, personTurn, type TurnTimes } from './bench-members.js';

/**
 * Many people on one host: USERS members of one tenant take a turn each, WAVE of them at once (people
 * arriving together), wave after wave, on `aws serve` with its defaults (AGENTWS_RUNTIME_MAX=auto from
 * the host's memory and swap, idle runtimes frozen after 10 s). Later waves find the host full: least
 * recently used idle runtimes are paged out to swap, then stopped, to make room, and a turn that finds
 * every runtime busy waits in the queue (its stream says so).
 *
 * With BENCH_WAVES_ZRAM=1 (the default as root) the bench sets up a zram swap first (lzo-rle, sized
 * BENCH_WAVES_ZRAM_GB, by default twice the host's memory: a paged-out runtime stores ~300 MB in it and
 * holds a fraction of that in RAM; removed after), and serve pages idle runtimes out after
 * BENCH_WAVES_PAGEOUT_S frozen (30 s here, instead of serve's 5 min, so the waves see it). Target:
 * no turn fails, and at least 150 idle people stay resident (frozen or paged out; 60 without zram),
 * counted at the end; AGAIN people of the first wave, paged out by then, take another turn
 * that must not start their runtime again. Baseline in the same run: the scripted model's own time to
 * its first word. The figures of a 150 and a 200 run belong in docs/developing/performance.md (run them on a quiet host).
 *   npm run bench -- runtime-waves   (BENCH_WAVES_USERS, _WAVE, _ZRAM, _ZRAM_GB, _PAGEOUT_S, _AGAIN)
 */
const USERS = Number(process.env.BENCH_WAVES_USERS ?? 200);
const WAVE = Number(process.env.BENCH_WAVES_WAVE ?? 20);
const ZRAM = (process.env.BENCH_WAVES_ZRAM ?? (process.getuid?.() === 0 ? '1' : '0')) === '1';
const ZRAM_BYTES = Number(process.env.BENCH_WAVES_ZRAM_GB ?? (2 * totalmem()) / 1024 ** 3) * 1024 ** 3;
const PAGEOUT_S = Number(process.env.BENCH_WAVES_PAGEOUT_S ?? 30);
const AGAIN = Math.min(Number(process.env.BENCH_WAVES_AGAIN ?? 10), WAVE, USERS);
/** Idle people resident at the end (frozen or paged out): with swap, and without; a smaller run, all of them. */
const RESIDENT_TARGET = Math.min(ZRAM ? 150 : 60, USERS);

const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const memAvailableBytes = () => Number(/^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN) * 1024;
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GB`;
const stats = (xs: number[]) => (xs.length ? `${median(xs).toFixed(0)} / ${percentile(xs, 90).toFixed(0)} / ${Math.max(...xs).toFixed(0)}` : '-');

export async function runtimeWaves(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  let zram: ZramSwap | null = null;
  if (ZRAM) {
    const setup = await setUpZramSwap({ sizeBytes: ZRAM_BYTES });
    if (!setup.swap) throw new Error(`BENCH_WAVES_ZRAM=1 but no zram swap: ${setup.reason}`);
    zram = setup.swap;
    process.stderr.write(`  [runtime-waves] swap: ${zram.made ? `zram ${zram.device} set up by the bench` : `the host's own${zram.device ? ` (${zram.device})` : ''}`}, ${gb(zram.totalBytes)}\n`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-waves-'));
  const db = await scratchDatabase('agentws_bench_waves');
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const modelFirst = await modelFirstWordMs(llm.value, 20);
    const serve = await startServe(bin, join(dir, 'serve'), db.url, { AGENTWS_SERVE_RUNS_WORKER: 'true', ...(zram ? { AGENTWS_RUNTIME_PAGEOUT_SECONDS: String(PAGEOUT_S) } : {}) });
    track('aws serve', serve.child);
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    await applyScriptedModel(api, llm.value);
    const people = await benchMembers(db.url, serve.config, serve.init.tenant.id, USERS, 'wave');
    const host = async () => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return (
          await c.query(
            `select capacity, resident, frozen, paged_out as "pagedOut", busy, memory_available_bytes::float8 as available, memory_total_bytes::float8 as total from runtime_hosts order by reported_at desc limit 1`,
          )
        ).rows[0];
      } finally {
        await c.end();
      }
    };

    const waves: Array<{ turns: Array<TurnTimes | { error: string }>; ms: number; resident: number; pagedOut: number; minAvailable: number }> = [];
    let peakResident = 0;
    let peakPagedOut = 0;
    let minAvailable = Infinity;
    let minHostAvailable = Infinity;
    const availableBefore = memAvailableBytes();
    try {
      for (let w = 0; w * WAVE < USERS; w++) {
        const group = people.slice(w * WAVE, (w + 1) * WAVE);
        process.stderr.write(`  [runtime-waves] wave ${w + 1} of ${Math.ceil(USERS / WAVE)}: ${group.length} people at once\n`);
        const t0 = performance.now();
        let sampling = true;
        let waveMin = Infinity;
        const sampler = (async () => {
          while (sampling) {
            const h = await host().catch(() => null);
            if (h) {
              peakResident = Math.max(peakResident, h.resident);
              peakPagedOut = Math.max(peakPagedOut, h.pagedOut ?? 0);
              waveMin = Math.min(waveMin, h.available);
            }
            minHostAvailable = Math.min(minHostAvailable, memAvailableBytes());
            await new Promise((r) => setTimeout(r, 2000));
          }
        })();
        const turns = await Promise.all(group.map((m) => personTurn(serve.url, m, { timeoutMs: 600_000 }).catch((err: Error) => ({ error: err.message }))));
        sampling = false;
        await sampler;
        const ms = performance.now() - t0;
        const resident = runtimesOf(serve.child.pid!).length;
        const pagedOut = (await host().catch(() => null))?.pagedOut ?? 0;
        peakResident = Math.max(peakResident, resident);
        minAvailable = Math.min(minAvailable, waveMin);
        waves.push({ turns, ms, resident, pagedOut, minAvailable: waveMin });
        const ok = turns.filter((t) => !('error' in t) && !t.failed).length;
        process.stderr.write(`  [runtime-waves]   ${ok}/${group.length} ok in ${(ms / 1000).toFixed(1)} s; ${resident} runtimes resident, ${pagedOut} paged out\n`);
      }
    } catch (err) {
      dumpLogs([join(dir, 'serve', 'serve.log')]);
      throw err;
    }

    // Settled: the runtimes left resident (frozen or paged out), and what they hold, their share of a
    // zram pool included. With swap, long enough for the last wave's runtimes to be paged out too.
    const settleMs = zram ? (10 + PAGEOUT_S + 15) * 1000 : 15_000;
    process.stderr.write(`  [runtime-waves] settling for ${settleMs / 1000} s\n`);
    await new Promise((r) => setTimeout(r, settleMs));
    const running = runtimesOf(serve.child.pid!);
    const tree = processTree();
    const z = zram?.stats() ?? null;
    const ratio = z && z.origBytes > 0 ? z.memUsedBytes / z.origBytes : 0;
    const mem = running.map((rt) => heldKb(rt.sandboxPid, tree, ratio));
    const last = await host();
    const availableEnd = memAvailableBytes();
    const serveSwapKb = Number(/^VmSwap:\s+(\d+) kB/m.exec(readFileSync(`/proc/${serve.child.pid}/status`, 'utf8'))?.[1] ?? NaN);

    // People of the first wave (paged out or at least frozen by now) come back: no cold start.
    const again: Array<TurnTimes | { error: string }> = [];
    for (const [i, m] of people.slice(0, AGAIN).entries()) {
      const firstTurn = waves[0]?.turns[i];
      if (!firstTurn || 'error' in firstTurn) continue;
      again.push(await personTurn(serve.url, m, { sessionId: (firstTurn as TurnTimes & { sessionId: string }).sessionId, timeoutMs: 120_000 }).catch((err: Error) => ({ error: err.message })));
    }
    const againDone = again.filter((t): t is TurnTimes => !('error' in t));
    const againCold = againDone.filter((t) => t.said.includes('runtime.starting')).length;
    const againFailed = again.length - againDone.filter((t) => !t.failed).length;

    const all = waves.flatMap((w) => w.turns);
    const done = all.filter((t): t is TurnTimes => !('error' in t));
    const failed = all.length - done.filter((t) => !t.failed).length;
    const waited = done.filter((t) => t.said.includes('runtime.waiting')).length;
    const cold = done.filter((t) => t.said.includes('runtime.starting'));
    // With swap, the idle people still resident once the waves are over; without, the peak (the measure without swap).
    const residentCounted = zram ? running.length : peakResident;
    const ok = failed === 0 && againFailed === 0 && residentCounted >= RESIDENT_TARGET && (!zram || againCold === 0);
    const errors = [...new Set(all.map((t) => ('error' in t ? t.error : t.failed)).filter(Boolean))].slice(0, 3);
    return report(
      `many people on one host: ${USERS} members, ${WAVE} at a time, each a first turn (serve with its defaults, PostgreSQL${zram ? `, zram swap ${gb(zram.totalBytes)}, paged out after ${PAGEOUT_S} s frozen` : ', no swap'})`,
      {
        'turns: ok / failed': `${all.length - failed} / ${failed}${errors.length ? ` (${errors.join('; ')})` : ''}`,
        'turns that waited in the queue (runtime.waiting)': waited,
        'capacity (auto) / peak resident / resident at the end: frozen, paged out': `${last?.capacity ?? '?'} / ${peakResident} / ${running.length}: ${last?.frozen ?? '?'} frozen, ${last?.pagedOut ?? '?'} paged out (peak ${peakPagedOut})`,
        'per wave: seconds, resident after (paged out)': waves.map((w) => `${(w.ms / 1000).toFixed(0)} s ${w.resident} (${w.pagedOut})`).join(', '),
        'prompt -> first streamed text p50/p90/max, runtime started by the turn': `${stats(cold.map((t) => t.toText).filter(Number.isFinite))} ms (${cold.length} turns)`,
        'prompt -> first event the person sees p50/p90/max': `${stats(done.map((t) => t.toAnyEvent).filter((x) => x > 0))} ms`,
        'resident runtimes held each (PSS + share of the zram pool; median), all together': `${mb(median(mem.map((m) => m.held)))}, ${mb(mem.reduce((a, m) => a + m.held, 0))} (PSS ${mb(mem.reduce((a, m) => a + m.pss, 0))} + pool ${mb(mem.reduce((a, m) => a + m.poolKb, 0))})`,
        'host memory: total / least available during the waves (as serve saw it / MemAvailable)': `${gb(last?.total ?? 0)} / ${gb(minAvailable)} / ${gb(minHostAvailable)}`,
        'host MemAvailable: before the waves / at the end': `${gb(availableBefore)} / ${gb(availableEnd)}`,
        ...(z ? { 'zram: stored / compressed / pool memory': `${gb(z.origBytes)} / ${gb(z.comprBytes)} / ${gb(z.memUsedBytes)} (${(z.origBytes / Math.max(1, z.memUsedBytes)).toFixed(2)}x)` } : {}),
        [`first-wave people again (${AGAIN}): ok / failed / runtime started again; first text p50/p90/max`]: `${again.length - againFailed} / ${againFailed} / ${againCold}; ${stats(againDone.map((t) => t.toText).filter(Number.isFinite))} ms`,
        'aws serve RSS / in swap at the end': `${mb(rssKb(serve.child.pid!))} / ${Number.isFinite(serveSwapKb) ? mb(serveSwapKb) : '?'}`,
        'baseline: the scripted model\'s first word p50': `${median(modelFirst).toFixed(1)} ms`,
        'load average 1/5/15 min (2 cores)': loadAvg(),
      },
      { ok, target: `no turn fails; >= ${RESIDENT_TARGET} ${zram ? 'idle people resident at the end (frozen or paged out); none of the first wave started again' : 'runtimes resident at the peak'}` },
    );
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
    await zram?.teardown();
  }
}
