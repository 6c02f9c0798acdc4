import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { median, pinned, report, scratchDatabase, startServe } from './bench-utils.js';
import { spawnUntil, stopChild } from '../helpers/cli.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const CONNECTIONS = 32;

type Target = 'bare' | 'aws' | 'embedded';

async function load(url: string, seconds: number): Promise<{ rps: number; p99: number; errors: number }> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

/**
 * GET /v1/auth/status on `aws serve` against a bare fastify route returning the same JSON. The measured
 * target is the production set-up: serve on PostgreSQL, default log level info (access lines for failed
 * and slow requests). The embedded set-up, which also hosts the database and the job worker in the same
 * process, is measured alongside for information. Servers are pinned to one CPU, autocannon to the
 * other, and loaded in alternating rounds. Target: aws (PostgreSQL) >= 70% of bare.
 */
export async function authStatusThroughput(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-'));
  const db = await scratchDatabase('agentws_bench_status');
  const urlFrom = (line: string) => (line.includes('"url":"http') ? (JSON.parse(line).url as string) : undefined);
  const children: ChildProcess[] = [];
  try {
    const bare = await spawnUntil(...pinned(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'bare-fastify.mjs')]), { cwd: root, env: { PATH: process.env.PATH } }, urlFrom);
    children.push(bare.child);
    const aws = await startServe(bin, join(dir, 'pg'), db.url);
    children.push(aws.child);
    const embedded = await startServe(bin, join(dir, 'embedded'));
    children.push(embedded.child);
    const targets: Record<Target, string> = { bare: bare.value, aws: aws.url, embedded: embedded.url };

    const order: Target[] = ['bare', 'aws', 'embedded'];
    for (const k of order) await load(`${targets[k]}/v1/auth/status`, 2); // warm-up
    const runs: Record<Target, Array<Awaited<ReturnType<typeof load>>>> = { bare: [], aws: [], embedded: [] };
    for (let i = 0; i < ROUNDS; i++) {
      // Rotate which goes first, so none always follows another's load.
      for (let j = 0; j < order.length; j++) {
        const k = order[(i + j) % order.length];
        runs[k].push(await load(`${targets[k]}/v1/auth/status`, DURATION_S));
      }
    }
    const rps = (k: Target) => median(runs[k].map((r) => r.rps));
    const errors = (k: Target) => runs[k].reduce((a, r) => a + r.errors, 0);
    const ratio = rps('aws') / rps('bare');
    return report(
      `GET /v1/auth/status throughput (autocannon, ${CONNECTIONS} connections, ${ROUNDS} rotating rounds of ${DURATION_S} s, medians)`,
      {
        'aws serve, PostgreSQL (req/s)': rps('aws').toFixed(0),
        'aws serve, PostgreSQL p99 (ms)': median(runs.aws.map((r) => r.p99)),
        'bare fastify (req/s)': rps('bare').toFixed(0),
        'bare fastify p99 (ms)': median(runs.bare.map((r) => r.p99)),
        'aws serve, embedded (req/s, info)': rps('embedded').toFixed(0),
        'rounds aws PostgreSQL (req/s)': runs.aws.map((r) => r.rps.toFixed(0)).join(', '),
        'rounds bare (req/s)': runs.bare.map((r) => r.rps.toFixed(0)).join(', '),
        'errors (aws / embedded / bare)': `${errors('aws')} / ${errors('embedded')} / ${errors('bare')}`,
        'ratio embedded / bare (info)': ((rps('embedded') / rps('bare')) * 100).toFixed(1) + '%',
        'ratio aws PostgreSQL / bare': (ratio * 100).toFixed(1) + '%',
      },
      { ok: ratio >= 0.7 && errors('aws') === 0, target: '>= 70% of bare fastify, no errors' },
    );
  } finally {
    for (const c of children) await stopChild(c);
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
