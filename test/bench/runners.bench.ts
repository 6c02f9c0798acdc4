import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { gatewayCredential } from '../../src/core/runtime/host/runtime-host.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { median, percentile, report } from './bench-utils.js';
import { personTurn, type Member } from './bench-members.js';
import { setUp, type Setup } from './in-process-serve.js';
import { waitUntil } from '../helpers/poll.js';

/**
 * Runner hosts, each figure against the same thing on one host in the same run: a control plane
 * whose agents run on `aws runner` processes (dialling it over loopback: the channel, the relay and the
 * tunnel are the same code across machines; the multi-host test runs them in network namespaces) against
 * `aws serve` running the agents itself.
 *
 *  - cold start: a new user's first prompt → first streamed text;
 *  - prompt accepted (202) → the runtime has the turn (agent_turns.sent_at - created_at), warm;
 *  - the model-call relay: a model call sent into a runtime's egress proxy socket, as the runtime sends
 *    it, to its last byte (runner: proxy → control plane → provider; local: proxy → gateway → provider);
 *  - warm first streamed text (the SSE fan-out through the runner channel and the bus);
 *  - 200 users arriving over 3 runners of unequal capacity: where they are placed;
 *  - a runner killed: its user's next prompt → first streamed text.
 */
const BIN = join(process.cwd(), 'bin', 'run.js');
const QUICK = !!process.env.AGENTWS_BENCH_QUICK;
const COLD = QUICK ? 2 : 4;
const WARM = QUICK ? 2 : 20;
const RELAY_CALLS = QUICK ? 5 : 200;

async function members(s: Setup, n: number, prefix: string): Promise<Member[]> {
  const out: Member[] = [];
  for (let i = 0; i < n; i++) {
    const { rows } = await s.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $2) returning id`, [s.tenantId, `${prefix}${i}`, `${prefix}${i}@bench.example`]);
    await s.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'bench' from roles where tenant_id = $1 and name = 'member'`, [s.tenantId, rows[0].id]);
    out.push({ userId: rows[0].id, token: await s.tokenFor(rows[0].id, ['member']) });
  }
  return out;
}

/** One model call through a runtime's egress proxy socket, as the runtime makes it: ms to its last byte. */
function modelCall(socketPath: string, credential: string): Promise<number> {
  const body = JSON.stringify({ model: 'fake-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: 'POST', path: 'http://llm.agentws.internal/p/scripted/chat/completions', headers: { host: 'llm.agentws.internal', authorization: `Bearer ${credential}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`model call: ${res.statusCode}`));
      res.resume();
      res.on('end', () => resolve(performance.now() - t0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function measure(s: Setup, label: string, dataDirOf: (userId: string) => Promise<string>) {
  const users = await members(s, COLD, label);
  const cold: number[] = [];
  const sessions: string[] = [];
  for (const m of users) {
    const t = await personTurn(s.url, m);
    if (t.failed) throw new Error(`${label} cold turn failed: ${t.failed}`);
    cold.push(t.toText);
    sessions.push(t.sessionId);
  }
  const warm: number[] = [];
  const since = new Date();
  for (let i = 0; i < WARM; i++) {
    const t = await personTurn(s.url, users[i % COLD], { sessionId: sessions[i % COLD] });
    if (t.failed) throw new Error(`${label} warm turn failed: ${t.failed}`);
    warm.push(t.toText);
  }
  const { rows } = await s.opened.db.query<{ ms: number }>(`select extract(epoch from (sent_at - created_at)) * 1000 as ms from agent_turns where created_at >= $1 and sent_at is not null`, [since]);
  const handedOver = rows.map((r) => Number(r.ms));
  // The relay: calls into the first user's runtime proxy, with that runtime's own credential.
  const row = (await s.opened.db.query<{ password_sealed: string }>(`select password_sealed from agent_runtimes where user_id = $1`, [users[0].userId])).rows[0];
  const box = createSecretBox([s.config.secrets.encryptionKey]);
  const credential = gatewayCredential(s.config.secrets.encryptionKey, box.open(row.password_sealed));
  const socket = join(await dataDirOf(users[0].userId), 'runtimes', users[0].userId, 'run', 'proxy.sock');
  for (let i = 0; i < 20; i++) await modelCall(socket, credential);
  const relay: number[] = [];
  for (let i = 0; i < RELAY_CALLS; i++) relay.push(await modelCall(socket, credential));
  return { users, sessions, cold, warm, handedOver, relay };
}

function startRunner(s: Setup, name: string, token: string, dataDir: string): Promise<ChildProcess> {
  mkdirSync(dataDir, { recursive: true });
  const child = spawn(process.execPath, [BIN, 'runner'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, AGENTWS_CONTROL_URL: s.url, AGENTWS_RUNNER_TOKEN: token, AGENTWS_RUNNER_NAME: name, AGENTWS_DATA_DIR: dataDir, AGENTWS_RUNTIME_MAX: '8', AGENTWS_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  return waitUntil(
    `runner ${name} to connect`,
    async () => (await s.opened.core.runners.list(systemCtx(silentLogger))).some((r) => r.name === name && r.healthy) && child,
    { timeoutMs: 20_000, intervalMs: 100 },
  );
}

const fmt = (xs: number[]) => `p50 ${median(xs).toFixed(1)} / p90 ${percentile(xs, 90).toFixed(1)} / p99 ${percentile(xs, 99).toFixed(1)} ms (n=${xs.length})`;

export async function runnersBench(): Promise<boolean> {
  // One host: serve runs the agents.
  const local = await setUp('runners_local');
  let here;
  try {
    here = await measure(local, 'local', async () => local.config.dataDir);
  } finally {
    await local.close();
  }

  // Runner hosts: the control plane runs none itself.
  const remote = await setUp('runners_remote', { AGENTWS_LOCAL_RUNNER: 'off' });
  const dir = mkdtempSync(join(tmpdir(), 'aws-rb-'));
  const children: ChildProcess[] = [];
  const kill = (c: ChildProcess) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  };
  let ok = true;
  try {
    // A ceiling above every capacity registered below (p1 reports 120): the bench measures placement, not the cap.
    const { token } = await remote.opened.core.runners.createToken(systemCtx(silentLogger), { name: 'bench', maxCapacity: 1000 });
    children.push(await startRunner(remote, 'r1', token, join(dir, 'r1')), await startRunner(remote, 'r2', token, join(dir, 'r2')));
    const placedOn = async (userId: string) => (await remote.opened.db.query<{ name: string }>(`select r.name from runtime_placements p join runners r on r.id = p.runner_id where p.user_id = $1`, [userId])).rows[0]?.name;
    // A runtime's proxy socket is in its runner's data dir.
    const there = await measure(remote, 'remote', async (userId) => join(dir, (await placedOn(userId))!));
    ok = report(
      'runner hosts: cold start and hand-over (runners.bench; 2 runners on loopback)',
      {
        'cold first text, one host': fmt(here.cold),
        'cold first text, on a runner': fmt(there.cold),
        'cold ratio (median)': `${(median(there.cold) / median(here.cold)).toFixed(2)}×`,
        '202 → runtime has the turn, one host': fmt(here.handedOver),
        '202 → runtime has the turn, runner': fmt(there.handedOver),
        'warm first text, one host': fmt(here.warm),
        'warm first text, runner': fmt(there.warm),
        'warm first text added (p99)': `${(percentile(there.warm, 99) - percentile(here.warm, 99)).toFixed(1)} ms`,
      },
      {
        ok: median(there.cold) <= 1.2 * median(here.cold) && percentile(there.handedOver, 99) < 250 && percentile(there.warm, 99) - percentile(here.warm, 99) < 50,
        target: 'cold ≤ 1.2× one host; 202 → turn p99 < 250 ms; fan-out added p99 < 50 ms',
      },
    ) && ok;
    ok = report(
      'runner hosts: the model-call relay',
      {
        'through a local runtime\'s proxy': fmt(here.relay),
        'through a runner\'s proxy': fmt(there.relay),
        'added p50 / p99': `${(median(there.relay) - median(here.relay)).toFixed(2)} / ${(percentile(there.relay, 99) - percentile(here.relay, 99)).toFixed(2)} ms`,
      },
      { ok: percentile(there.relay, 99) - percentile(here.relay, 99) <= 5, target: 'relay adds ≤ 5 ms p99' },
    ) && ok;

    // A runner killed: its user's next prompt → first streamed text.
    const victim = there.users[0];
    const on = await placedOn(victim.userId);
    if (on !== 'r1' && on !== 'r2') throw new Error(`the user is placed on ${on}`);
    const child = children[on === 'r1' ? 0 : 1];
    const killedAt = performance.now();
    kill(child);
    const timeline: string[] = [];
    const watch = setInterval(() => {
      void remote.opened.db
        .query<{ s: string }>(
          `select (select string_agg(name || ':' || state, ',') from runners where name in ('r1','r2')) || ' | ' ||
                  coalesce((select status || ' ' || attempts || ' ' || coalesce(error, '') from agent_turns where session_id = $1 order by created_at desc limit 1), '-') || ' | ' ||
                  coalesce((select r.name from runtime_placements p join runners r on r.id = p.runner_id where p.user_id = $2), '-') as s`,
          [there.sessions[0], victim.userId],
        )
        .then((r) => timeline.push(`${((performance.now() - killedAt) / 1000).toFixed(0)}s ${r.rows[0].s}`));
    }, 2000);
    const t = await personTurn(remote.url, victim, { sessionId: there.sessions[0], timeoutMs: 120_000 }).finally(() => clearInterval(watch));
    if (process.env.AGENTWS_BENCH_TIMELINE) console.log(timeline.join('\n'));
    // From the kill (the prompt went a few ms after it) to the end of the answered turn.
    const recovered = performance.now() - killedAt;
    const bound = 30_000 + median(there.cold);
    ok = report(
      'runner hosts: a runner killed',
      {
        'kill -9 → the user\'s next turn answered': `${recovered.toFixed(0)} ms (its first text ${t.toText.toFixed(0)} ms after the prompt; now on ${await placedOn(victim.userId)})`,
        'heartbeat timeout + one cold start': `${bound.toFixed(0)} ms (30000 + ${median(there.cold).toFixed(0)})`,
        'turn failed': t.failed ?? 'no',
      },
      { ok: !t.failed && recovered <= bound + 2000, target: 'within the heartbeat timeout plus one cold start (+2 s: the lost sweep runs every second)' },
    ) && ok;
    // 200 users arriving over 3 runners of capacity 120, 80 and 60 (registered here; the real ones drained).
    // The real runners are set aside (offline: no new placements, and nobody moved) while these place.
    await remote.opened.db.query(`update runners set state = 'offline' where name in ('r1', 'r2')`);
    const tokenId = (await remote.opened.core.runners.authenticate(token)).tokenId;
    const caps: Record<string, number> = { p1: 120, p2: 80, p3: 60 };
    for (const [name, capacity] of Object.entries(caps)) await remote.opened.core.runners.register(tokenId, { name, address: null, capacity, labels: {}, version: 'bench', sharedStorage: false, serveId: 'bench', relayUrl: null });
    const arrivals = await members(remote, 200, 'arrival');
    const t0 = performance.now();
    const decided: number[] = [];
    for (let i = 0; i < arrivals.length; i += 20) {
      await Promise.all(
        arrivals.slice(i, i + 20).map(async (m) => {
          const s = performance.now();
          await remote.opened.core.runners.place({ tenantId: remote.tenantId, userId: m.userId });
          decided.push(performance.now() - s);
        }),
      );
    }
    const placeMs = performance.now() - t0;
    const counts = (await remote.opened.db.query<{ name: string; n: number }>(`select r.name, count(*)::int as n from runtime_placements p join runners r on r.id = p.runner_id where r.name in ('p1','p2','p3') group by r.name`)).rows;
    const total = Object.values(caps).reduce((a, b) => a + b, 0);
    const spread = Object.entries(caps).map(([name, cap]) => {
      const got = counts.find((c) => c.name === name)?.n ?? 0;
      const share = (cap / total) * 200;
      return { name, got, share, off: Math.abs(got - share) / share };
    });
    ok = report(
      'runner hosts: 200 users arriving over 3 runners (capacity 120 / 80 / 60)',
      {
        placed: spread.map((x) => `${x.name} ${x.got} (share ${x.share.toFixed(0)}, ${(x.off * 100).toFixed(1)} % off)`).join('; '),
        'placement decision': `${fmt(decided)}; 200 in ${placeMs.toFixed(0)} ms, 20 at a time`,
      },
      { ok: spread.every((x) => x.off <= 0.1), target: 'each runner within ±10 % of its capacity share' },
    ) && ok;
    await remote.opened.db.query(`delete from runners where name in ('p1','p2','p3')`);
    await remote.opened.db.query(`update runners set state = 'active' where name in ('r1', 'r2')`);

  } finally {
    for (const c of children) kill(c);
    await remote.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return ok;
}
