import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, report, scratchDatabase, startServe } from './bench-utils.js';
import { apiOf, configValue, createSessions, dumpLogs, loadAvg, openStreams, removeDir, rssKb, stopAll, track, waitAgentsAvailable, type SseStream } from './agent-bench-utils.js';

const SESSIONS = Number(process.env.BENCH_MEM_SESSIONS ?? 100);
const SUBS = Number(process.env.BENCH_MEM_SUBSCRIBERS ?? 10);
/** Long enough for a heartbeat round (src/core/sessions/session-stream.ts HEARTBEAT_MS = 15 s) to be written to every stream. */
const SETTLE_MS = Number(process.env.BENCH_MEM_SETTLE_MS ?? 16_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** RSS (MB) of a process: the median of 10 samples over 2 s, taken after `settleMs`. */
async function settledRss(pid: number, settleMs: number): Promise<number> {
  await sleep(settleMs);
  const samples: number[] = [];
  for (let i = 0; i < 10; i++) {
    samples.push(rssKb(pid) / 1024);
    await sleep(200);
  }
  return median(samples);
}

/**
 * Memory of `aws serve` holding idle SSE streams: RSS (VmRSS of the serve process only, not its managed
 * opencode child) on PostgreSQL, the production set-up (worker in its own process, so not in this RSS).
 * Baseline: the same serve idle, after its API and the SESSIONS sessions were exercised. Then SESSIONS x SUBS
 * idle subscribers, settled; then again after they disconnect. Target: < 300 MB with 1,000 subscribers.
 */
export async function sseMemory(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-mem-'));
  const db = await scratchDatabase('agentws_bench_mem');
  let subs: SseStream[] = [];
  try {
    const serve = await startServe(bin, join(dir, 'serve'), db.url);
    track('aws serve', serve.child);
    const pid = serve.child.pid!;
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    const fresh = await settledRss(pid, 2000);

    const ids = await createSessions(api, SESSIONS, 'memory');
    // Exercise what the subscribers will use (auth, session lookup, the SSE route) a little, then idle.
    const headers = { authorization: `Bearer ${api.key}` };
    const warm = await openStreams(ids.map((id) => `${serve.url}/v1/sessions/${id}/events`), headers);
    for (const s of warm) s.close();
    for (let i = 0; i < 100; i++) await api.call('GET', '/v1/sessions');
    const idle = await settledRss(pid, 5000);

    process.stderr.write(`  [sse-memory] opening ${SESSIONS * SUBS} subscribers\n`);
    subs = await openStreams(
      ids.flatMap((id) => Array.from({ length: SUBS }, () => `${serve.url}/v1/sessions/${id}/events`)),
      headers,
    );
    const loaded = await settledRss(pid, SETTLE_MS);
    const open = subs.filter((s) => !s.ended).length;
    const pings = subs.filter((s) => s.bytes > 25).length; // more than the 25-byte greeting: a heartbeat reached it
    for (const s of subs) s.close();
    subs = [];
    const after = await settledRss(pid, 5000);

    const perSub = ((loaded - idle) * 1024) / (SESSIONS * SUBS);
    return report(
      `aws serve RSS with ${SESSIONS * SUBS} idle SSE subscribers (${SESSIONS} sessions x ${SUBS}; PostgreSQL, serve process only)`,
      {
        'RSS just started (MB)': fresh.toFixed(1),
        'baseline: RSS idle, warmed (MB)': idle.toFixed(1),
        [`RSS with ${SESSIONS * SUBS} subscribers (MB)`]: loaded.toFixed(1),
        'delta per subscriber (kB)': perSub.toFixed(1),
        'RSS after they disconnected (MB)': after.toFixed(1),
        'streams open / got a heartbeat': `${open} / ${pings} of ${SESSIONS * SUBS}`,
        'load average 1/5/15 min (2 cores)': loadAvg(),
      },
      { ok: loaded < 300 && open === SESSIONS * SUBS, target: `< 300 MB with ${SESSIONS * SUBS} subscribers` },
    );
  } catch (err) {
    dumpLogs([join(dir, 'serve', 'serve.log')]);
    throw err;
  } finally {
    for (const s of subs) s.close();
    await stopAll();
    await db.drop();
    removeDir(dir);
  }
}
