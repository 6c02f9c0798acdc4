import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { median, report, scratchDatabase, startServe } from './bench-utils.js';
import { configValue, cpuMs, dumpLogs, loadAvg, removeDir, rssKb, stopAll, track } from './agent-bench-utils.js';

/**
 * A workspace downloaded as an archive through `aws serve`'s HTTP API: GET /v1/workspace/archive
 * of a 200 MB workspace (150 files of 1 MiB and 5,000 of 10 KiB, random bytes), read to its end by a
 * client on loopback. Figures: throughput (MB/s), serve's RSS growth while it streams (its peak, sampled
 * every 20 ms, less its RSS just before), serve's CPU per run. Baseline in the same run: `tar -c` of the
 * same directory read to its end by a pipe (what the disk and a tar writer give with no HTTP, no
 * confinement walk). The page cache is warmed first; each is run RUNS times alternately, medians shown.
 * Target: >= 50 MB/s, RSS growth <= 32 MB.
 */
const RUNS = process.env.AGENTWS_BENCH_QUICK ? 3 : 5;
const BIG = 150;
const SMALL = 5000;

function makeWorkspace(dir: string): number {
  mkdirSync(dir, { recursive: true });
  let bytes = 0;
  for (let i = 0; i < BIG; i++) {
    const d = join(dir, `data-${i % 10}`);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, `blob-${i}.bin`), randomBytes(1024 * 1024));
    bytes += 1024 * 1024;
  }
  for (let i = 0; i < SMALL; i++) {
    const d = join(dir, 'src', `mod-${i % 50}`);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, `file-${i}.ts`), randomBytes(10 * 1024));
    bytes += 10 * 1024;
  }
  return bytes;
}

/** `tar -c` of the directory into a pipe read to its end: ms and bytes. */
function tarBaseline(dir: string): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('tar', ['-C', dir, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let bytes = 0;
    child.stdout.on('data', (c: Buffer) => (bytes += c.length));
    child.on('error', reject);
    child.on('close', () => resolve({ ms: performance.now() - t0, bytes }));
  });
}

/** The archive through the API, read to its end: ms, bytes, serve's peak RSS growth (MB) and CPU (ms). */
async function viaApi(url: string, key: string, pid: number): Promise<{ ms: number; bytes: number; rssGrowthMb: number; cpuMs: number }> {
  const rss0 = rssKb(pid);
  const cpu0 = cpuMs(pid);
  let peak = rss0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssKb(pid))), 20);
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/workspace/archive`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`archive: ${res.status} ${await res.text()}`);
  let bytes = 0;
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) bytes += c.length;
  const ms = performance.now() - t0;
  clearInterval(sampler);
  peak = Math.max(peak, rssKb(pid));
  return { ms, bytes, rssGrowthMb: (peak - rss0) / 1024, cpuMs: cpuMs(pid) - cpu0 };
}

export async function workspaceFilesBench(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-files-'));
  const db = await scratchDatabase('agentws_bench_files');
  try {
    const serve = await startServe(bin, join(dir, 'serve'), db.url);
    track('aws serve', serve.child);
    const pid = serve.child.pid!;
    const key = configValue(serve.config, 'AGENTWS_API_KEY');
    const dd = configValue(serve.config, 'AGENTWS_DATA_DIR');
    const dataDir = dd.startsWith('/') ? dd : join(dir, 'serve', dd || 'data');
    // The API key acts as the operator's user: the archive is of their workspace.
    const ws = join(dataDir, 'workspaces', serve.init.tenant.id, serve.init.operator.id);
    process.stderr.write('  [workspace-files] writing a 200 MB workspace\n');
    const size = makeWorkspace(ws);
    // Warm: the page cache holds the files for both (neither measures the disk's first read).
    await tarBaseline(ws);
    await viaApi(serve.url, key, pid);
    const base: Array<{ ms: number; bytes: number }> = [];
    const api: Array<Awaited<ReturnType<typeof viaApi>>> = [];
    for (let i = 0; i < RUNS; i++) {
      base.push(await tarBaseline(ws));
      api.push(await viaApi(serve.url, key, pid));
    }
    const mbps = (r: { ms: number; bytes: number }) => r.bytes / 1e6 / (r.ms / 1000);
    const apiMbps = median(api.map(mbps));
    const baseMbps = median(base.map(mbps));
    const growth = Math.max(...api.map((r) => r.rssGrowthMb));
    const cpuPerGb = median(api.map((r) => r.cpuMs / (r.bytes / 1e9)));
    return report(
      `workspace archive download through aws serve's HTTP API (${(size / 1e6).toFixed(0)} MB workspace: ${BIG} x 1 MiB + ${SMALL} x 10 KiB; ${RUNS} runs, medians)`,
      {
        'archive bytes': api[0].bytes,
        'through the API (MB/s)': apiMbps.toFixed(0),
        'baseline: tar -c of the same files into a pipe (MB/s)': baseMbps.toFixed(0),
        'API / baseline': (apiMbps / baseMbps).toFixed(2),
        'download time, median (ms)': median(api.map((r) => r.ms)).toFixed(0),
        'serve RSS growth while streaming, worst run (MB)': growth.toFixed(1),
        'serve CPU per GB streamed (ms)': cpuPerGb.toFixed(0),
        'serve RSS before (MB)': (rssKb(pid) / 1024).toFixed(0),
        'load average 1/5/15 min (2 cores)': loadAvg(),
      },
      { ok: apiMbps >= 50 && growth <= 32, target: '>= 50 MB/s, serve RSS growth <= 32 MB' },
    );
  } catch (err) {
    dumpLogs([join(dir, 'serve', 'serve.log')]);
    throw err;
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
  }
}
