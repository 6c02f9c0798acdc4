import type { OpenedCore } from '../../src/cli/open-core.js';
import type { Config } from '../../src/config/config.schema.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { createLogger } from '../../src/lib/logger.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { signToken, startTestApp } from '../helpers/app.js';
import { openSse, type SseEvent } from '../helpers/runtime.js';

/**
 * `aws serve` with its worker in the benchmark's own process (the tests' startTestApp: PostgreSQL in a
 * copy of the migrated template, the user's real sandboxed runtime, the scripted model on loopback), an
 * owner's token, and small clients of its API and event streams: what the agent benchmarks
 * (orchestrator, skills, ...) measure against.
 */
export interface Stream {
  events: SseEvent[];
  until(pred: (d: any) => boolean, timeoutMs?: number): Promise<SseEvent>;
  close(): void;
}

/** The tests' SSE client (openSse) on a session's stream; `until` answers the first matching event, with when it arrived. */
export async function openStream(url: string, token: string): Promise<Stream> {
  const sse = await openSse(url, { authorization: `Bearer ${token}` });
  if (sse.status !== 200) throw new Error(`stream: ${sse.status}`);
  const first = (pred: (d: any) => boolean) => sse.events.find((e) => pred(e.data))!;
  return {
    events: sse.events,
    async until(pred, timeoutMs = 120_000) {
      await sse.until((e) => pred(e.data), timeoutMs);
      return first(pred);
    },
    close: () => void sse.close(),
  };
}

export interface Setup {
  opened: OpenedCore;
  config: Config;
  worker: Worker;
  url: string;
  token: string;
  tenantId: string;
  ownerId: string;
  /** A token for another user of the tenant. */
  tokenFor(userId: string, roles: string[]): Promise<string>;
  llm: FakeLlm;
  close(): Promise<void>;
}

export async function setUp(_name: string, vars: Record<string, string> = {}): Promise<Setup> {
  const llm = await startFakeLlm();
  // AGENTWS_BENCH_LOG=<level>: the service's log on stderr, to see what a slow figure spent its time on.
  const log = process.env.AGENTWS_BENCH_LOG ? createLogger(process.env.AGENTWS_BENCH_LOG, 2) : silentLogger;
  const t = await startTestApp({ mode: 'postgres', vars, coreLogger: log, supervise: true });
  const { opened, url } = t;
  await opened.core.startRuntime();
  const worker = await startWorker(opened.core, opened.boss, log, { concurrency: 4 });
  const seeded = await opened.core.tenants.seedTenant(systemCtx(silentLogger), { name: 'bench', slug: 'bench', ownerEmail: 'owner@bench.example' });
  const ownerId = seeded.owner.id;
  const tokenFor = (userId: string, roles: string[]) => signToken(t, { sub: userId, tid: seeded.tenant.id, roles, expS: Math.floor(Date.now() / 1000) + 3600 });
  const token = await tokenFor(ownerId, ['owner']);
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined }).then(async (r) => ({
      status: r.status,
      json: await r.json().catch(() => null),
    }));
  const add = await call('POST', '/v1/admin/providers', { name: 'scripted', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: 'sk-bench', models: [{ id: 'fake-model' }] });
  if (add.status !== 201) throw new Error(`provider: ${JSON.stringify(add.json)}`);
  const apply = await call('POST', '/v1/admin/runtime/apply', { defaultModel: 'scripted/fake-model' });
  if (apply.status !== 200) throw new Error(`apply: ${JSON.stringify(apply.json)}`);
  return {
    opened,
    config: t.env.config(),
    worker,
    url,
    token,
    tenantId: seeded.tenant.id,
    ownerId,
    tokenFor,
    llm,
    async close() {
      await worker.stop(2000).catch(() => {});
      await opened.core.stopRuntime().catch(() => {});
      await t.close();
      await llm.close();
    },
  };
}

export async function post(s: Setup, path: string, body: unknown): Promise<{ status: number; json: any }> {
  const r = await fetch(`${s.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, json: await r.json().catch(() => null) };
}

export async function get(s: Setup, path: string): Promise<any> {
  return (await fetch(`${s.url}${path}`, { headers: { authorization: `Bearer ${s.token}` } })).json();
}

export async function newSession(s: Setup, title: string): Promise<string> {
  const r = await post(s, '/v1/sessions', { title });
  if (r.status !== 201) throw new Error(`session: ${JSON.stringify(r.json)}`);
  return r.json.sessionId;
}

