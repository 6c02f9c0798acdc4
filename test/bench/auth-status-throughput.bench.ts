import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { median, pinned, report, spawnUntil, stop } from './bench-utils.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const CONNECTIONS = 32;

async function load(url: string, seconds: number): Promise<{ rps: number; p99: number; errors: number }> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

/**
 * GET /v1/auth/status on `aws serve` (embedded database, in-process worker, default log level info with
 * one access-log line per request written to a file as a journal would) against a bare fastify route
 * returning the same JSON. Both run as separate processes at the same time; autocannon in this process
 * loads them in alternating rounds so machine noise hits both alike. Target: aws >= 70% of bare.
 */
export async function authStatusThroughput(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-'));
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', AGENTWS_CONFIG: join(dir, 'config.env') };
  const urlFrom = (line: string) => (line.includes('"url":"http') ? (JSON.parse(line).url as string) : undefined);
  const init = spawnSync(process.execPath, [bin, 'init', '--yes', '--json', '--port', '0', '--no-demo'], { cwd: dir, env, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(init.stderr);

  const bare = await spawnUntil(...pinned(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'bare-fastify.mjs')]), { cwd: root, env }, urlFrom);
  const logFile = join(dir, 'serve.log');
  const app = spawn(...pinned(process.execPath, [bin, 'serve']), { cwd: dir, env, stdio: ['ignore', openSync(logFile, 'a'), 'inherit'] });
  try {
    let appUrl: string | undefined;
    const deadline = Date.now() + 30_000;
    while (!appUrl && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      appUrl = readFileSync(logFile, 'utf8').split('\n').filter((l) => l.includes('agentws ready')).map(urlFrom)[0];
    }
    if (!appUrl) throw new Error('aws serve did not become ready:\n' + readFileSync(logFile, 'utf8'));
    const targets = { aws: `${appUrl}/v1/auth/status`, bare: `${bare.value}/v1/auth/status` };

    // Warm both (JIT, connection set-up), then alternate measured rounds.
    await load(targets.bare, 2);
    await load(targets.aws, 2);
    const runs: Record<'aws' | 'bare', Array<{ rps: number; p99: number; errors: number }>> = { aws: [], bare: [] };
    // Alternate which goes first, so neither always follows the other's load.
    for (let i = 0; i < ROUNDS; i++) {
      for (const k of i % 2 ? (['aws', 'bare'] as const) : (['bare', 'aws'] as const)) runs[k].push(await load(targets[k], DURATION_S));
    }
    const rps = (k: 'aws' | 'bare') => median(runs[k].map((r) => r.rps));
    const p99 = (k: 'aws' | 'bare') => median(runs[k].map((r) => r.p99));
    const errors = (k: 'aws' | 'bare') => runs[k].reduce((a, r) => a + r.errors, 0);
    const ratio = rps('aws') / rps('bare');
    const accessLines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l.includes('"request completed"')).length;
    return report(
      `GET /v1/auth/status throughput (autocannon, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${DURATION_S} s, medians)`,
      {
        'aws serve (req/s)': rps('aws').toFixed(0),
        'aws serve p99 latency (ms)': p99('aws'),
        'bare fastify (req/s)': rps('bare').toFixed(0),
        'bare fastify p99 latency (ms)': p99('bare'),
        'rounds aws (req/s)': runs.aws.map((r) => r.rps.toFixed(0)).join(', '),
        'rounds bare (req/s)': runs.bare.map((r) => r.rps.toFixed(0)).join(', '),
        'access-log lines written by aws': accessLines,
        'errors (aws / bare)': `${errors('aws')} / ${errors('bare')}`,
        'ratio aws / bare': (ratio * 100).toFixed(1) + '%',
      },
      { ok: ratio >= 0.7 && errors('aws') === 0, target: '>= 70% of bare fastify, no errors' },
    );
  } finally {
    await stop(bare.child);
    await stop(app);
    rmSync(dir, { recursive: true, force: true });
  }
}
