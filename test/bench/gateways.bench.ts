import http from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { sseFrameSplitter } from '../fixtures/sse-frames.js';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { median, percentile, report, scratchDatabase, startServe, type BenchServe } from './bench-utils.js';
import { stopChild } from '../helpers/cli.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin', 'run.js');

interface GatewaySetup {
  serve: BenchServe;
  platform: FakeChatPlatform;
  apiKey: string;
  gatewayId: string;
  secret: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }>;
  inbound(body: unknown): Promise<number>;
  close(): Promise<void>;
}

/** `aws serve` on PostgreSQL (worker in-process) with a bot_chat gateway whose platform is a loopback fake. */
async function setUp(prefix: string): Promise<GatewaySetup> {
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-gw-'));
  const db = await scratchDatabase(prefix);
  const platform = await startFakeChatPlatform();
  let child: ChildProcess | undefined;
  try {
    const serve = await startServe(BIN, dir, db.url, { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_SERVE_RUNS_WORKER: 'true' });
    child = serve.child;
    const apiKey = /^AGENTWS_API_KEY=(.+)$/m.exec(serve.config)![1];
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(serve.url + path, { method, headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : undefined };
    };
    const g = await call('POST', '/v1/gateways', { kind: 'bot_chat', botToken: '123456:bench-token', botUsername: 'bench_bot', botId: '123456' });
    if (g.status !== 201) throw new Error(`create gateway: ${g.status} ${JSON.stringify(g.json)}`);
    const reg = await call('POST', `/v1/gateways/${g.json.id}/webhook/register`, { webhookUrl: 'https://8.8.8.8/hook' });
    if (reg.status !== 200) throw new Error(`register: ${reg.status} ${JSON.stringify(reg.json)}`);
    const secret = platform.webhooks().at(-1)!.secret;
    const inbound = async (body: unknown) =>
      (await fetch(`${serve.url}/v1/gateways/${g.json.id}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret }, body: JSON.stringify(body) })).status;
    return {
      serve, platform, apiKey, gatewayId: g.json.id, secret, call, inbound,
      async close() {
        await stopChild(serve.child);
        await platform.close();
        await db.drop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    if (child) await stopChild(child);
    await platform.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A minimal SSE reader (raw http, the tests' frame splitter): calls onEvent(name, data) per message. */
function sse(url: string, headers: Record<string, string>, onEvent: (event: string, data: any) => void): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`SSE ${res.statusCode}`));
      res.on('data', sseFrameSplitter((f) => f.data !== null && onEvent(f.event ?? 'message', JSON.parse(f.data))));
      resolve(() => req.destroy());
    });
    req.on('error', reject);
  });
}

const N_APPROVALS = Number(process.env.BENCH_APPROVALS ?? 150);

/**
 * Approval -> `pairing.code_approved` on a connected SSE client, through the event bus (LISTEN/NOTIFY).
 * Each round: a new chat user writes, gets a code, the code is approved over the API; the latency runs
 * from sending the approval to the event arriving. Baseline: the 2 s poll that would otherwise find it.
 * Target: p99 < 100 ms.
 */
export async function gatewayApproval(): Promise<boolean> {
  const s = await setUp('agentws_bench_gw_appr');
  try {
    const seen = new Map<string, number>();
    const close = await sse(`${s.serve.url}/v1/gateways/${s.gatewayId}/events`, { authorization: `Bearer ${s.apiKey}` }, (event, data) => {
      if (event === 'pairing.code_approved') seen.set(data.userId, performance.now());
    });
    const latencies: number[] = [];
    const responses: number[] = [];
    for (let i = 0; i < N_APPROVALS; i++) {
      const userId = 10_000 + i;
      if ((await s.inbound(botChatUpdate({ userId, username: `u${userId}`, text: 'hi' }))) !== 200) throw new Error('inbound failed');
      const codes = (await s.call('GET', `/v1/gateways/${s.gatewayId}/pairing-codes`)).json.codes as Array<{ code: string; externalUserId: string }>;
      const code = codes.find((c) => c.externalUserId === String(userId))!.code;
      const t0 = performance.now();
      const r = await s.call('POST', `/v1/gateways/${s.gatewayId}/pairing-codes/${code}/approve`);
      responses.push(performance.now() - t0);
      if (r.status !== 200) throw new Error(`approve: ${r.status}`);
      while (!seen.has(String(userId))) {
        if (performance.now() - t0 > 5000) throw new Error('no pairing.code_approved within 5 s');
        await new Promise((res) => setImmediate(res));
      }
      latencies.push(seen.get(String(userId))! - t0);
    }
    close();
    const p99 = percentile(latencies, 99);
    return report(
      `Approval -> pairing.code_approved on an SSE client, aws serve on PostgreSQL (${N_APPROVALS} approvals)`,
      {
        'approval request -> event p50 (ms)': median(latencies).toFixed(1),
        'approval request -> event p99 (ms)': p99.toFixed(1),
        'approval request -> event max (ms)': Math.max(...latencies).toFixed(1),
        'approval response p50 (ms)': median(responses).toFixed(1),
        'baseline: the stream poll interval (ms)': 2000,
        'p99 / poll interval': `${((p99 / 2000) * 100).toFixed(1)}%`,
      },
      { ok: p99 < 100, target: 'p99 < 100 ms' },
    );
  } finally {
    await s.close();
  }
}

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * Inbound webhook handling for an unpaired user whose code is pending (each request verifies the
 * secret, finds the pending code and queues the message that repeats it), against GET /v1/auth/status on
 * the same serve, alternating rounds. Target: >= 500 requests/s.
 */
export async function gatewayInbound(): Promise<boolean> {
  const s = await setUp('agentws_bench_gw_in');
  try {
    const body = JSON.stringify(botChatUpdate({ userId: 777, username: 'storm', text: 'hello?' }));
    if ((await s.inbound(JSON.parse(body))) !== 200) throw new Error('inbound failed');
    const load = async (kind: 'webhook' | 'status') => {
      const r = await autocannon({
        url: kind === 'webhook' ? `${s.serve.url}/v1/gateways/${s.gatewayId}/webhook` : `${s.serve.url}/v1/auth/status`,
        method: kind === 'webhook' ? 'POST' : 'GET',
        connections: 16,
        duration: DURATION_S,
        ...(kind === 'webhook' ? { headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': s.secret }, body } : {}),
      });
      return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
    };
    await load('webhook');
    const runs = { webhook: [] as Array<Awaited<ReturnType<typeof load>>>, status: [] as Array<Awaited<ReturnType<typeof load>>> };
    for (let i = 0; i < ROUNDS; i++) for (const k of i % 2 ? (['status', 'webhook'] as const) : (['webhook', 'status'] as const)) runs[k].push(await load(k));
    const rps = (k: 'webhook' | 'status') => median(runs[k].map((r) => r.rps));
    const codes = (await s.call('GET', `/v1/gateways/${s.gatewayId}/pairing-codes`)).json.codes;
    const errors = runs.webhook.reduce((a, r) => a + r.errors, 0);
    return report(
      `Inbound webhook, unpaired user with a pending code, aws serve on PostgreSQL (autocannon, 16 connections, ${ROUNDS} rounds of ${DURATION_S} s, medians)`,
      {
        'webhook (req/s)': rps('webhook').toFixed(0),
        'webhook p99 latency (ms)': median(runs.webhook.map((r) => r.p99)),
        'rounds webhook (req/s)': runs.webhook.map((r) => r.rps.toFixed(0)).join(', '),
        'baseline /v1/auth/status (req/s)': rps('status').toFixed(0),
        'ratio webhook / status': `${((rps('webhook') / rps('status')) * 100).toFixed(1)}%`,
        'errors / non-2xx': errors,
        'pending codes afterwards (must be 1)': codes.length,
      },
      { ok: rps('webhook') >= 500 && errors === 0 && codes.length === 1, target: '>= 500 req/s, no errors, still one code' },
    );
  } finally {
    await s.close();
  }
}
