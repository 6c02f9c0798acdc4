import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { SignJWT } from 'jose';
import pg from 'pg';
import { median, pinned, report, stop } from './bench-utils.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);

export function adminUrl(): string {
  return process.env.AGENTWS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}

/** A fresh PostgreSQL database for a benchmark; dropped by the returned function. */
export async function scratchDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(adminUrl());
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl() });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

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
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', AGENTWS_CONFIG: join(dir, 'config.env') };
  const logFile = join(dir, 'serve.log');
  let app: ReturnType<typeof spawn> | undefined;
  try {
    const init = spawnSync(process.execPath, [bin, 'init', '--yes', '--json', '--port', '0', '--no-demo', '--database-url', db.url], { cwd: dir, env, encoding: 'utf8' });
    if (init.status !== 0) throw new Error(init.stderr);
    const { operator, tenant } = JSON.parse(init.stdout);
    const cfg = readFileSync(env.AGENTWS_CONFIG, 'utf8');
    const secret = /^AGENTWS_JWT_SECRET=(.+)$/m.exec(cfg)![1];
    const publicUrl = /^AGENTWS_PUBLIC_URL=(.+)$/m.exec(cfg)![1];
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ tid: tenant.id, roles: ['owner'], typ: 'access' })
      .setProtectedHeader({ alg: 'HS256' }).setSubject(operator.id).setIssuer(publicUrl).setAudience('agentws')
      .setIssuedAt(now).setExpirationTime(now + 3600).sign(new TextEncoder().encode(secret));

    app = spawn(...pinned(process.execPath, [bin, 'serve']), { cwd: dir, env, stdio: ['ignore', openSync(logFile, 'a'), 'inherit'] });
    let url: string | undefined;
    for (let i = 0; i < 300 && !url; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const line = readFileSync(logFile, 'utf8').split('\n').find((l) => l.includes('agentws ready'));
      if (line) url = JSON.parse(line).url;
    }
    if (!url) throw new Error('serve not ready: ' + readFileSync(logFile, 'utf8'));

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
