import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { median, percentile, report, scratchDatabase, spawnUntil, startServe } from './bench-utils.js';
import { apiOf, applyScriptedModel, configValue, dumpLogs, loadAvg, onCpu1, processTree, removeDir, rssKb, runtimesOf, stopAll, track, treeMemoryKb, waitAgentsAvailable } from './agent-bench-utils.js';
import { benchMembers, modelFirstWordMs, personTurn, type TurnTimes } from './bench-members.js';

/**
 * Many people on one host: USERS members of one tenant take a turn each, WAVE of them at once (people
 * arriving together), wave after wave, on `aws serve` with its defaults (AGENTWS_RUNTIME_MAX=auto from
 * the host's memory, idle runtimes frozen after 10 s). Later waves find the host full: least recently
 * used idle runtimes are stopped to make room, and a turn that finds every runtime busy waits in the
 * queue (its stream says so). Target: no turn fails, and the host keeps at least 60 runtimes resident
 * (24 GiB host). Baseline in the same run: the scripted model's own time to its first word.
 *   node --import tsx test/bench/run-all.ts runtime-waves   (BENCH_WAVES_USERS, BENCH_WAVES_WAVE)
 */
const USERS = Number(process.env.BENCH_WAVES_USERS ?? 200);
const WAVE = Number(process.env.BENCH_WAVES_WAVE ?? 20);
const RESIDENT_TARGET = 60;

const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GB`;
const stats = (xs: number[]) => (xs.length ? `${median(xs).toFixed(0)} / ${percentile(xs, 90).toFixed(0)} / ${Math.max(...xs).toFixed(0)}` : '-');

export async function runtimeWaves(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-waves-'));
  const db = await scratchDatabase('agentws_bench_waves');
  try {
    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const modelFirst = await modelFirstWordMs(llm.value, 20);
    const serve = await startServe(bin, join(dir, 'serve'), db.url, { AGENTWS_SERVE_RUNS_WORKER: 'true' });
    track('aws serve', serve.child);
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    await applyScriptedModel(api, llm.value);
    const people = await benchMembers(db.url, serve.config, serve.init.tenant.id, USERS, 'wave');
    const host = async () => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return (await c.query(`select capacity, resident, frozen, busy, memory_available_bytes::float8 as available, memory_total_bytes::float8 as total from runtime_hosts order by reported_at desc limit 1`)).rows[0];
      } finally {
        await c.end();
      }
    };

    const waves: Array<{ turns: Array<TurnTimes | { error: string }>; ms: number; resident: number; minAvailable: number }> = [];
    let peakResident = 0;
    let minAvailable = Infinity;
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
              waveMin = Math.min(waveMin, h.available);
            }
            await new Promise((r) => setTimeout(r, 2000));
          }
        })();
        const turns = await Promise.all(group.map((m) => personTurn(serve.url, m, { timeoutMs: 600_000 }).catch((err: Error) => ({ error: err.message }))));
        sampling = false;
        await sampler;
        const ms = performance.now() - t0;
        const resident = runtimesOf(serve.child.pid!).length;
        peakResident = Math.max(peakResident, resident);
        minAvailable = Math.min(minAvailable, waveMin);
        waves.push({ turns, ms, resident, minAvailable: waveMin });
        const ok = turns.filter((t) => !('error' in t) && !t.failed).length;
        process.stderr.write(`  [runtime-waves]   ${ok}/${group.length} ok in ${(ms / 1000).toFixed(1)} s; ${resident} runtimes resident\n`);
      }
    } catch (err) {
      dumpLogs([join(dir, 'serve', 'serve.log')]);
      throw err;
    }

    // Settled: the runtimes left resident, frozen, and what they hold.
    await new Promise((r) => setTimeout(r, 15_000));
    const running = runtimesOf(serve.child.pid!);
    const tree = processTree();
    const mem = running.map((rt) => treeMemoryKb(rt.sandboxPid, tree));
    const last = await host();
    const all = waves.flatMap((w) => w.turns);
    const done = all.filter((t): t is TurnTimes => !('error' in t));
    const failed = all.length - done.filter((t) => !t.failed).length;
    const waited = done.filter((t) => t.said.includes('runtime.waiting')).length;
    const cold = done.filter((t) => t.said.includes('runtime.starting'));
    const ok = failed === 0 && peakResident >= RESIDENT_TARGET;
    const errors = [...new Set(all.map((t) => ('error' in t ? t.error : t.failed)).filter(Boolean))].slice(0, 3);
    return report(
      `many people on one host: ${USERS} members, ${WAVE} at a time, each a first turn (serve with its defaults, PostgreSQL)`,
      {
        'turns: ok / failed': `${all.length - failed} / ${failed}${errors.length ? ` (${errors.join('; ')})` : ''}`,
        'turns that waited in the queue (runtime.waiting)': waited,
        'capacity (auto) / peak resident / resident at the end, frozen': `${last?.capacity ?? '?'} / ${peakResident} / ${running.length}, ${last?.frozen ?? '?'} frozen`,
        'per wave: seconds, resident after': waves.map((w) => `${(w.ms / 1000).toFixed(0)} s ${w.resident}`).join(', '),
        'prompt -> first streamed text p50/p90/max, runtime started by the turn': `${stats(cold.map((t) => t.toText).filter(Number.isFinite))} ms (${cold.length} turns)`,
        'prompt -> first event the person sees p50/p90/max': `${stats(done.map((t) => t.toAnyEvent).filter((x) => x > 0))} ms`,
        'resident runtimes PSS each (median), all together': `${mb(median(mem.map((m) => m.pss)))}, ${mb(mem.reduce((a, m) => a + m.pss, 0))}`,
        'host memory: total / least available during the waves': `${gb(last?.total ?? 0)} / ${gb(minAvailable)}`,
        'aws serve RSS at the end': mb(rssKb(serve.child.pid!)),
        'baseline: the scripted model\'s first word p50': `${median(modelFirst).toFixed(1)} ms`,
        'load average 1/5/15 min (2 cores)': loadAvg(),
      },
      { ok, target: `no turn fails; >= ${RESIDENT_TARGET} runtimes resident at the peak` },
    );
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
  }
}
