import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { SignJWT } from 'jose';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { parseConfigValues } from '../../src/config/load-config.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createLogger } from '../../src/lib/logger.js';
import { buildApp } from '../../src/http/build-app.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { freePort, readSseFrames } from '../fixtures/sse-frames.js';
import { scratchDatabase } from './bench-utils.js';

/**
 * `aws serve` with its worker in the benchmark's own process (PostgreSQL in a scratch database, the
 * user's real sandboxed runtime, the scripted model on loopback), an owner's token, and small clients
 * of its API and event streams: what the agent benchmarks (orchestrator, skills) measure against.
 */
export interface Stream {
  events: Array<{ at: number; data: any }>;
  until(pred: (d: any) => boolean, timeoutMs?: number): Promise<{ at: number; data: any }>;
  close(): void;
}

/** An SSE client of a session's stream, noting when each event arrived. */
export async function openStream(url: string, token: string): Promise<Stream> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` }, signal: ac.signal });
  if (res.status !== 200) throw new Error(`stream: ${res.status}`);
  const events: Stream['events'] = [];
  void readSseFrames(res.body as unknown as AsyncIterable<Uint8Array>, (f) => {
    if (f.data !== null) events.push({ at: performance.now(), data: JSON.parse(f.data) });
  });
  return {
    events,
    async until(pred, timeoutMs = 120_000) {
      const start = performance.now();
      for (;;) {
        const hit = events.find((e) => pred(e.data));
        if (hit) return hit;
        if (performance.now() - start > timeoutMs) throw new Error(`no matching event in ${timeoutMs} ms: ${events.map((e) => e.data.type).join(', ')}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    close: () => ac.abort(),
  };
}

export interface Setup {
  opened: OpenedCore;
  config: ReturnType<typeof parseConfigValues>;
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

export async function setUp(prefix: string, vars: Record<string, string> = {}): Promise<Setup> {
  const db = await scratchDatabase(`agentws_bench_${prefix}`);
  const dir = mkdtempSync(join(tmpdir(), 'aws-bo-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const jwtSecret = randomSecret(32);
  const config = parseConfigValues({
    fileValues: {
      DATABASE_URL: db.url,
      AGENTWS_JWT_SECRET: jwtSecret,
      AGENTWS_ENCRYPTION_KEY: randomSecret(32),
      AGENTWS_DATA_DIR: join(dir, 'data'),
      AGENTWS_PUBLIC_URL: url,
      AGENTWS_HOST: '127.0.0.1',
      AGENTWS_PORT: String(port),
      ...vars,
    },
    configFile: null,
    env: {},
    cwd: dir,
  });
  const llm = await startFakeLlm();
  // AGENTWS_BENCH_LOG=<level>: the service's log on stderr, to see what a slow figure spent its time on.
  const log = process.env.AGENTWS_BENCH_LOG ? createLogger(process.env.AGENTWS_BENCH_LOG, 2) : silentLogger;
  const opened = await openCore(config, log, { supervise: true });
  await opened.core.migrator.up();
  const app = await buildApp(opened.core, config);
  await app.listen({ host: '127.0.0.1', port });
  await opened.core.startRuntime();
  const worker = await startWorker(opened.core, opened.boss, log, { concurrency: 4 });
  const { core } = opened;
  const seeded = await core.tenants.seedTenant(systemCtx(silentLogger), { name: 'bench', slug: 'bench', ownerEmail: 'owner@bench.example' });
  const ownerId = seeded.owner.id;
  const tokenFor = async (userId: string, roles: string[]) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ tid: seeded.tenant.id, roles, typ: 'access' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(userId)
      .setIssuer(url)
      .setAudience('agentws')
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .setJti(crypto.randomUUID())
      .sign(new TextEncoder().encode(jwtSecret));
  };
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
    config,
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
      await app.close();
      await opened.close();
      await llm.close();
      await db.drop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
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

