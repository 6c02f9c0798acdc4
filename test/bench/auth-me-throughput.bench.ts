import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { SignJWT } from 'jose';
import { cpuMs } from './agent-bench-utils.js';
import { median, percentile, report, scratchDatabase, startServe } from './bench-utils.js';
import { stopChild } from '../helpers/cli.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 2);
const PAIRS = Number(process.env.BENCH_ROUNDS ?? 16);

/**
 * Authenticated GET /v1/auth/me (token, user and permission check, the user's profile) against
 * unauthenticated GET /v1/auth/status on the same `aws serve` (PostgreSQL). Target: me >= 85% of status.
 *
 * The two are loaded in back-to-back pairs (alternating which goes first), and the verdict is the median
 * of the pairs' ratios: on a shared 2-core VM another process taking the server's CPU for a few seconds
 * lowers whichever route is being loaded, so a ratio of two medians taken apart swings ±15%, while the
 * two halves of a pair see the same conditions. The ratio of the medians is printed too, and the
 * server's own CPU time per request (from /proc), which other load disturbs least.
 */
export async function authMeThroughput(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-'));
  const db = await scratchDatabase('agentws_bench_me');
  let app: ChildProcess | undefined;
  try {
    const serve = await startServe(bin, dir, db.url);
    app = serve.child;
    const pid = serve.child.pid!;
    const { url, init: { operator, tenant }, config: cfg } = serve;
    const secret = /^AGENTWS_JWT_SECRET=(.+)$/m.exec(cfg)![1];
    const publicUrl = /^AGENTWS_PUBLIC_URL=(.+)$/m.exec(cfg)![1];
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ tid: tenant.id, roles: ['owner'], typ: 'access' })
      .setProtectedHeader({ alg: 'HS256' }).setSubject(operator.id).setIssuer(publicUrl).setAudience('agentws')
      .setIssuedAt(now).setExpirationTime(now + 3600).sign(new TextEncoder().encode(secret));

    type Run = { rps: number; p99: number; errors: number; cpuUsPerReq: number };
    const load = async (route: 'me' | 'status', seconds: number): Promise<Run> => {
      const cpu0 = cpuMs(pid);
      const r = await autocannon({ url: `${url}/v1/auth/${route}`, connections: 32, duration: seconds, headers: route === 'me' ? { authorization: `Bearer ${token}` } : {} });
      return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx, cpuUsPerReq: ((cpuMs(pid) - cpu0) * 1000) / Math.max(1, r.requests.total) };
    };
    await load('status', 2);
    await load('me', 2);
    const runs = { status: [] as Run[], me: [] as Run[] };
    const pairRatios: number[] = [];
    for (let i = 0; i < PAIRS; i++) {
      for (const k of i % 2 ? (['me', 'status'] as const) : (['status', 'me'] as const)) runs[k].push(await load(k, DURATION_S));
      pairRatios.push(runs.me[i].rps / runs.status[i].rps);
    }
    const rps = (k: 'me' | 'status') => median(runs[k].map((r) => r.rps));
    const cpu = (k: 'me' | 'status') => median(runs[k].map((r) => r.cpuUsPerReq));
    const ratio = median(pairRatios);
    const errors = runs.me.reduce((a, r) => a + r.errors, 0);
    const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
    return report(
      `GET /v1/auth/me vs /v1/auth/status on one aws serve, PostgreSQL (autocannon, 32 connections, ${PAIRS} back-to-back pairs of ${DURATION_S} s)`,
      {
        'auth/me (req/s, median)': rps('me').toFixed(0),
        'auth/me p99 latency (ms)': median(runs.me.map((r) => r.p99)),
        'auth/status (req/s, median)': rps('status').toFixed(0),
        'ratio of the medians': pct(rps('me') / rps('status')),
        'pair ratios (25th / 75th pct)': `${pct(percentile(pairRatios, 25))} / ${pct(percentile(pairRatios, 75))}`,
        'serve CPU per request me / status': `${cpu('me').toFixed(1)} / ${cpu('status').toFixed(1)} µs (status/me ${pct(cpu('status') / cpu('me'))})`,
        'errors / non-2xx on me': errors,
        'ratio me / status (pair median)': pct(ratio),
      },
      { ok: ratio >= 0.85 && errors === 0, target: '>= 85% of /auth/status (median of pairs), no errors' },
    );
  } finally {
    if (app) await stopChild(app);
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
