import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SignJWT } from 'jose';
import pg from 'pg';
import { median, percentile, pinned, report, scratchDatabase, spawnUntil, startServe } from './bench-utils.js';
import { treeCpuMs } from '../helpers/process-tree.js';
import {
  apiOf,
  applyScriptedModel,
  configValue,
  dumpLogs,
  loadAvg,
  onCpu1,
  openStream,
  processTree,
  removeDir,
  rssKb,
  runtimesOf,
  startOpencode,
  stopAll,
  track,
  treeMemoryKb,
  waitAgentsAvailable,
  type SseStream,
} from './agent-bench-utils.js';

const USERS = Number(process.env.BENCH_RUNTIME_USERS ?? 20);
/** Further users whose first prompt comes TYPING_MS after they opened their session's stream. */
const PREPARED = Number(process.env.BENCH_RUNTIME_PREPARED ?? 5);
const TYPING_MS = 5000;
const BASELINE_STARTS = Number(process.env.BENCH_RUNTIME_BASELINE_STARTS ?? 5);
/** How long the runtimes sit idle before their memory is read (their first turn's garbage collected). */
const SETTLE_MS = Number(process.env.BENCH_RUNTIME_SETTLE_MS ?? 10_000);
/** How long idle runtimes' CPU is measured (after SETTLE_MS). */
const IDLE_MS = Number(process.env.BENCH_RUNTIME_IDLE_MS ?? 60_000);
/** Target: an idle runtime uses at most this share of one core. */
const IDLE_CPU_TARGET = 0.01;

/** Events the session stream adds itself; every other type comes from the user's runtime. */
const SERVICE_EVENTS = new Set(['runtime.waiting']);

interface Member {
  userId: string;
  token: string;
}

/**
 * USERS member users of the init tenant, each with a recorded sign-in and an access token signed the way
 * the service signs them (the bench holds the config's JWT secret, as the operator does).
 */
async function members(databaseUrl: string, config: string, tenantId: string): Promise<Member[]> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  const key = new TextEncoder().encode(configValue(config, 'AGENTWS_JWT_SECRET'));
  const issuer = configValue(config, 'AGENTWS_PUBLIC_URL').replace(/\/+$/, '');
  try {
    const out: Member[] = [];
    for (let i = 0; i < USERS + PREPARED; i++) {
      const { rows } = await c.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $2) returning id`, [tenantId, `bench${i}`, `bench${i}@bench.example`]);
      const userId = rows[0].id;
      await c.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'bench' from roles where tenant_id = $1 and name = 'member'`, [tenantId, userId]);
      const now = Math.floor(Date.now() / 1000);
      const sid = (await c.query<{ id: string }>(`insert into auth_sign_ins (tenant_id, user_id, auth_time, expires_at) values ($1, $2, to_timestamp($3), to_timestamp($3 + 604800)) returning id`, [tenantId, userId, now])).rows[0].id;
      const token = await new SignJWT({ tid: tenantId, roles: ['member'], typ: 'access', sid, auth_time: now })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(userId)
        .setIssuer(issuer)
        .setAudience('agentws')
        .setIssuedAt(now)
        .setExpirationTime(now + 3600)
        .setJti(crypto.randomUUID())
        .sign(key);
      out.push({ userId, token });
    }
    return out;
  } finally {
    await c.end();
  }
}

async function call(base: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

const until = async (what: string, cond: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MB`;

/** The share of a core each process tree (by its root pid) used over the same IDLE_MS. */
async function idleCpu(pids: number[]): Promise<number[]> {
  const tree = processTree();
  const before = pids.map((p) => treeCpuMs(p, tree));
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const ms = performance.now() - t0;
  return pids.map((p, i) => (treeCpuMs(p, tree) - before[i]) / ms);
}
const stats = (xs: number[]) => `${median(xs).toFixed(0)} / ${percentile(xs, 90).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;

/**
 * One user's first turn, from nothing running: the user's session stream is open, the prompt is sent
 * (202), serve starts the user's sandboxed runtime (bubblewrap, opencode, its egress proxy, its
 * configuration) and hands it the turn; measured up to the first event of the turn the runtime emits
 * on the user's stream. Then the turn runs to its end (session.idle), so the next user starts on a
 * quiet host. With `typingMs`, the prompt comes that long after the stream opened (a person typing):
 * serve starts and prepares the runtime meanwhile.
 */
async function firstTurn(base: string, m: Member, typingMs = 0): Promise<{ toEvent: number; toText: number; to202: number }> {
  const created = await call(base, m.token, 'POST', '/v1/sessions', { title: 'cold start' });
  if (created.status !== 201) throw new Error(`create session: ${created.status} ${JSON.stringify(created.json)}`);
  const id = created.json.sessionId as string;
  let first = 0;
  let text = 0;
  let idle = false;
  const stream: SseStream = await openStream(`${base}/v1/sessions/${id}/events`, { authorization: `Bearer ${m.token}` }, (data, t) => {
    const type = JSON.parse(data).type as string;
    if (!first && !SERVICE_EVENTS.has(type)) first = t;
    if (!text && type === 'message.part.delta') text = t;
    if (type === 'session.idle') idle = true;
  });
  try {
    if (typingMs) await new Promise((r) => setTimeout(r, typingMs));
    const t0 = performance.now();
    const res = await call(base, m.token, 'POST', `/v1/sessions/${id}/prompt`, { text: 'Say hello. [short]', agent: 'build' });
    const t202 = performance.now();
    if (res.status !== 202) throw new Error(`prompt: ${res.status} ${JSON.stringify(res.json)}`);
    await until('the first event of the turn', () => first > 0, 60_000);
    await until('the end of the turn', () => idle, 60_000);
    return { toEvent: first - t0, toText: text - t0, to202: t202 - t0 };
  } finally {
    stream.close();
  }
}

/**
 * Per-user runtimes on PostgreSQL: cold start of a user's sandboxed runtime to the first event of their
 * first turn (target p50 ≤ 3 s), USERS users one after another; the CPU, RSS and PSS of the first
 * runtime idle after its turn while it is alone, then of all USERS idle runtimes (target: an idle
 * runtime ≤ 1 % of a core, over IDLE_MS; RSS and PSS of each sandbox's process tree: bwrap, socat,
 * opencode; PSS divides the pages the runtimes share, the opencode binary above all, which is what the
 * host really pays). serve runs its worker and is pinned to CPU 0 with the runtimes it starts; this
 * process and the scripted model to CPU 1. Baseline in the same run: a bare opencode (same binary and
 * environment, no sandbox, no service) from exec to its health check answering, and its idle CPU and
 * memory. Last, PREPARED
 * more users send their first prompt TYPING_MS after opening their session's stream, as a person does
 * in the dashboard: serve starts and prepares their runtime while they type (info, beside the cold p50).
 */
export async function runtimePool(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-runtime-'));
  const db = await scratchDatabase('agentws_bench_runtime');
  try {
    // Baseline first, on a quiet host: a bare opencode from exec to health, BASELINE_STARTS times; the
    // last one's idle memory and CPU (no turn, no sandbox, no service).
    const bare: number[] = [];
    let bareMem = { rss: 0, pss: 0, processes: 0 };
    let bareCpu = 0;
    for (let i = 0; i < BASELINE_STARTS; i++) {
      const t0 = performance.now();
      const oc = await startOpencode(join(dir, `bare-${i}`), pinned);
      bare.push(performance.now() - t0);
      if (i === BASELINE_STARTS - 1) {
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        bareMem = treeMemoryKb(oc.child.pid!);
        process.stderr.write(`  [runtime-pool] bare opencode idle for ${IDLE_MS / 1000} s\n`);
        bareCpu = (await idleCpu([oc.child.pid!]))[0];
      }
      await stopAll([oc.child]);
    }

    const llm = await spawnUntil(...onCpu1(process.execPath, [join(root, 'test', 'bench', 'fixtures', 'paced-llm.mjs')]), { env: { PATH: process.env.PATH, WORDS: '3', WORD_MS: '0' } }, (l) =>
      l.startsWith('{') ? (JSON.parse(l).url as string) : undefined,
    );
    track('scripted model', llm.child);
    const serve = await startServe(bin, join(dir, 'serve'), db.url, { AGENTWS_SERVE_RUNS_WORKER: 'true', AGENTWS_RUNTIME_MAX: String(USERS + PREPARED), AGENTWS_RUNTIME_IDLE_MINUTES: '60' });
    track('aws serve', serve.child);
    const api = apiOf(serve.url, configValue(serve.config, 'AGENTWS_API_KEY'));
    await waitAgentsAvailable(api);
    await applyScriptedModel(api, llm.value);
    const users = await members(db.url, serve.config, serve.init.tenant.id);
    const serveIdleKb = rssKb(serve.child.pid!);

    const cold: Array<{ toEvent: number; toText: number; to202: number }> = [];
    let alone = { cpu: 0, rss: 0, pss: 0 };
    try {
      for (const [i, m] of users.slice(0, USERS).entries()) {
        process.stderr.write(`  [runtime-pool] user ${i + 1} of ${USERS}: first turn, cold\n`);
        cold.push(await firstTurn(serve.url, m));
        if (i === 0) {
          // One runtime, alone on the host, idle after its turn.
          process.stderr.write(`  [runtime-pool] one runtime idle for ${(SETTLE_MS + IDLE_MS) / 1000} s\n`);
          await new Promise((r) => setTimeout(r, SETTLE_MS));
          const [rt] = runtimesOf(serve.child.pid!);
          const mem = treeMemoryKb(rt.sandboxPid);
          alone = { cpu: (await idleCpu([rt.sandboxPid]))[0], rss: mem.rss, pss: mem.pss };
        }
      }
    } catch (err) {
      dumpLogs([join(dir, 'serve', 'serve.log')]);
      throw err;
    }
    const running = runtimesOf(serve.child.pid!);
    if (running.length !== USERS) throw new Error(`serve runs ${running.length} runtimes after ${USERS} users' turns`);

    process.stderr.write(`  [runtime-pool] ${USERS} runtimes idle for ${SETTLE_MS / 1000} s\n`);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const tree = processTree();
    const each = running.map((rt) => treeMemoryKb(rt.sandboxPid, tree));
    const total = each.reduce((a, b) => ({ rss: a.rss + b.rss, pss: a.pss + b.pss, processes: a.processes + b.processes }), { rss: 0, pss: 0, processes: 0 });
    const serveKb = rssKb(serve.child.pid!);
    process.stderr.write(`  [runtime-pool] ${USERS} runtimes: CPU over ${IDLE_MS / 1000} s\n`);
    const cpus = await idleCpu(running.map((rt) => rt.sandboxPid));
    const load = loadAvg();

    // Then a person's usual first turn: the session opened, the prompt typed and sent TYPING_MS later.
    const prepared: Array<{ toEvent: number; toText: number; to202: number }> = [];
    for (const [i, m] of users.slice(USERS).entries()) {
      process.stderr.write(`  [runtime-pool] user ${USERS + i + 1}: first turn, prompt ${TYPING_MS / 1000} s after the stream opened\n`);
      prepared.push(await firstTurn(serve.url, m, TYPING_MS));
    }

    const p50 = median(cold.map((c) => c.toEvent));
    const idleOk = alone.cpu <= IDLE_CPU_TARGET && median(cpus) <= IDLE_CPU_TARGET;
    const ok = p50 <= 3000 && idleOk;
    const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
    return report(
      `per-user sandboxed runtimes: cold start to the first event of the first turn, and memory (${USERS} users one after another, PostgreSQL, worker in serve)`,
      {
        'cold: prompt -> first event p50/p90/max': `${stats(cold.map((c) => c.toEvent))} ms  ${ok ? 'met' : 'NOT met'}`,
        'cold: first 5 users, one by one': cold.slice(0, 5).map((c) => `${c.toEvent.toFixed(0)} ms`).join(', '),
        'info: cold: prompt -> first streamed text p50/p90/max': `${stats(cold.map((c) => c.toText))} ms`,
        ...(prepared.length
          ? {
              [`info: prompt sent ${TYPING_MS / 1000} s after the stream opened (runtime started and prepared meanwhile) -> first event / first streamed text, p50/p90/max`]: `${stats(prepared.map((c) => c.toEvent))} / ${stats(prepared.map((c) => c.toText))} ms (${PREPARED} users)`,
            }
          : {}),
        'cold: prompt -> 202 p50/max': `${median(cold.map((c) => c.to202)).toFixed(1)} / ${Math.max(...cold.map((c) => c.to202)).toFixed(1)} ms`,
        'baseline: bare opencode exec -> health': `p50 ${median(bare).toFixed(0)} ms (of ${BASELINE_STARTS}); cold start is ${(p50 / median(bare)).toFixed(2)}x`,
        [`one idle runtime alone, after its turn: CPU over ${IDLE_MS / 1000} s / RSS / PSS`]: `${pct(alone.cpu)} of a core ${alone.cpu <= IDLE_CPU_TARGET ? 'met' : 'NOT met'} / ${mb(alone.rss)} / ${mb(alone.pss)}`,
        [`${USERS} idle runtimes: CPU per runtime median / max, all together`]: `${pct(median(cpus))} / ${pct(Math.max(...cpus))} of a core ${median(cpus) <= IDLE_CPU_TARGET ? 'met' : 'NOT met'}, ${pct(cpus.reduce((a, b) => a + b, 0))}`,
        [`${USERS} idle runtimes: RSS / PSS per runtime (median), all together`]: `${mb(median(each.map((e) => e.rss)))} / ${mb(median(each.map((e) => e.pss)))} (${each[0].processes} processes), ${mb(total.rss)} / ${mb(total.pss)}`,
        'baseline: bare opencode idle (no turn, no sandbox) CPU / RSS / PSS': `${pct(bareCpu)} of a core / ${mb(bareMem.rss)} / ${mb(bareMem.pss)}`,
        'aws serve RSS before / with the runtimes': `${mb(serveIdleKb)} / ${mb(serveKb)}`,
        'load average 1/5/15 min (2 cores)': load,
      },
      { ok, target: `cold start p50 <= 3 s; an idle runtime <= ${pct(IDLE_CPU_TARGET)} of a core; memory measured` },
    );
  } finally {
    await stopAll();
    await db.drop();
    removeDir(dir);
  }
}
