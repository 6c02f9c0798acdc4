import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { SignJWT } from 'jose';
import { median, report, scratchDatabase, startServe, stop } from './bench-utils.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);

/**
 * Authenticated GET /v1/auth/me (JWT verification, permission resolution, one query) against
 * unauthenticated GET /v1/auth/status on the same `aws serve` (PostgreSQL), alternating rounds.
 * Target: me >= 60% of status.
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
    const { url, init: { operator, tenant }, config: cfg } = serve;
    const secret = /^AGENTWS_JWT_SECRET=(.+)$/m.exec(cfg)![1];
    const publicUrl = /^AGENTWS_PUBLIC_URL=(.+)$/m.exec(cfg)![1];
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ tid: tenant.id, roles: ['owner'], typ: 'access' })
      .setProtectedHeader({ alg: 'HS256' }).setSubject(operator.id).setIssuer(publicUrl).setAudience('agentws')
      .setIssuedAt(now).setExpirationTime(now + 3600).sign(new TextEncoder().encode(secret));

    const load = async (path: string, auth: boolean) => {
      const r = await autocannon({ url: url + path, connections: 32, duration: DURATION_S, headers: auth ? { authorization: `Bearer ${token}` } : {} });
      return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
    };
    await load('/v1/auth/status', false);
    await load('/v1/auth/me', true);
    const runs = { status: [] as Array<Awaited<ReturnType<typeof load>>>, me: [] as Array<Awaited<ReturnType<typeof load>>> };
    for (let i = 0; i < ROUNDS; i++) {
      for (const k of i % 2 ? (['me', 'status'] as const) : (['status', 'me'] as const)) runs[k].push(await load(`/v1/auth/${k}`, k === 'me'));
    }
    const rps = (k: 'me' | 'status') => median(runs[k].map((r) => r.rps));
    const ratio = rps('me') / rps('status');
    const errors = runs.me.reduce((a, r) => a + r.errors, 0);
    return report(
      `GET /v1/auth/me vs /v1/auth/status on one aws serve, PostgreSQL (autocannon, 32 connections, ${ROUNDS} alternating rounds of ${DURATION_S} s, medians)`,
      {
        'auth/me (req/s)': rps('me').toFixed(0),
        'auth/me p99 latency (ms)': median(runs.me.map((r) => r.p99)),
        'auth/status (req/s)': rps('status').toFixed(0),
        'rounds me (req/s)': runs.me.map((r) => r.rps.toFixed(0)).join(', '),
        'rounds status (req/s)': runs.status.map((r) => r.rps.toFixed(0)).join(', '),
        'errors / non-2xx on me': errors,
        'ratio me / status': (ratio * 100).toFixed(1) + '%',
      },
      { ok: ratio >= 0.6 && errors === 0, target: '>= 60% of /auth/status, no errors' },
    );
  } finally {
    if (app) await stop(app);
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
