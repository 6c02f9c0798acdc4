import { runtimeCapacity } from '../../src/core/runtime/host/runtime-capacity.js';
import { readHostMemory } from '../../src/lib/host-memory.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, runCommand, type ServeProcess, startServe } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

describe(`aws serve as a subprocess (${DB_MODE})`, () => {
  let env: TestEnv | undefined;
  let serve: ServeProcess | undefined;
  afterEach(async () => {
    // SIGTERM, so that serve stops its managed runtime too; env.cleanup() kills whatever still runs.
    if (serve && serve.child.exitCode === null) await Promise.race([serve.stop('SIGTERM'), new Promise((r) => setTimeout(r, 10_000))]);
    serve = undefined;
    await env?.cleanup();
    env = undefined;
  });

  it('serves status, health, readiness and the OpenAPI document; SIGTERM exits 0 within 5 s', async () => {
    // Paging off: the capacity then follows the memory alone, whatever swap a test beside this one set up.
    env = await createTestEnv({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'op@example.com', AGENTWS_RUNTIME_PAGEOUT_SECONDS: '0' } });
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    serve = await startServe(env);

    const status = await fetch(`${serve.url}/v1/auth/status`);
    expect(status.status).toBe(200);
    expect(await status.json()).toEqual({ auth: { allowAnonymous: true, entraConfigured: false, gatewaysProtected: true } });
    expect(status.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    const traced = await fetch(`${serve.url}/healthz`, { headers: { 'x-request-id': 'trace-123' } });
    expect(await traced.json()).toEqual({ status: 'ok' });
    expect(traced.headers.get('x-request-id')).toBe('trace-123');

    let readyzCalls = 0;
    const readyz = (url: string) => (readyzCalls++, fetch(`${url}/readyz`));
    const ready = await readyz(serve.url);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, database: 'ok', migrations: 'current', pending: [], agents: { sandbox: 'on', available: true } });
    // The runtime host opens in the background once serve listens: from then on /readyz says which limits hold.
    const url = serve.url;
    await expect
      .poll(async () => (await readyz(url)).json())
      .toEqual({ ready: true, database: 'ok', migrations: 'current', pending: [], agents: { sandbox: 'on', available: true, limits: expect.objectContaining({ disk: 'measured' }) } });

    const openapi = (await (await fetch(`${serve.url}/v1/openapi.json`)).json()) as any;
    expect(openapi.openapi).toBe('3.0.3');
    expect(Object.keys(openapi.paths)).toContain('/v1/auth/status');
    expect(openapi.paths['/v1/auth/status'].get.responses['200'].content['application/json'].schema.properties.auth).toBeDefined();
    // Probes are not part of the API document; /metrics is, for its credentials and content type.
    expect(Object.keys(openapi.paths).filter((p) => !p.startsWith('/v1/'))).toEqual(['/metrics']);

    // Prometheus metrics, for the API key (or the metrics token) only, even in demo mode.
    expect((await fetch(`${serve.url}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${serve.url}/metrics`, { headers: { authorization: `Bearer ${env.vars.AGENTWS_API_KEY}` } });
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await metrics.text();
    expect(text).toMatch(new RegExp(`^agentws_http_requests_total\\{method="GET",route="/readyz",status="200"\\} ${readyzCalls}$`, 'm'));
    // How many runtimes this host holds: from its memory by default (AGENTWS_RUNTIME_MAX=auto).
    expect(Number(/^agentws_runtimes_max (\d+)$/m.exec(text)?.[1])).toBe(runtimeCapacity(readHostMemory()));

    const missing = await fetch(`${serve.url}/v1/nope?code=ABCD2345`);
    expect(missing.status).toBe(404);
    const missingBody = (await missing.json()) as { requestId: string };
    expect(missingBody).toMatchObject({ error: 'not_found', requestId: expect.any(String) });

    // Logs are JSON lines and never carry the bearer token.
    await fetch(`${serve.url}/v1/auth/status`, { headers: { authorization: 'Bearer very-secret-token' } });
    const { code, ms } = await serve.stop('SIGTERM');
    expect(code).toBe(0);
    expect(ms).toBeLessThan(5000);
    expect(serve.logs()).not.toContain('very-secret-token');
    const lines = serve.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    // Default access log (AGENTWS_ACCESS_LOG=errors): the failed requests are logged, without their query
    // string; the successful ones are not.
    const access = lines.filter((l) => l.msg === 'request completed');
    expect(access).toEqual([
      expect.objectContaining({ method: 'GET', path: '/metrics', status: 401 }),
      expect.objectContaining({ requestId: missingBody.requestId, method: 'GET', path: '/v1/nope', status: 404 }),
    ]);
    expect(serve.logs()).not.toContain('ABCD2345');
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['agentws ready', 'shutting down', 'stopped']));
  });

  it('reports pending migrations on /readyz until `aws migrate` runs beside it', async () => {
    env = await createTestEnv();
    serve = await startServe(env);
    const before = await fetch(`${serve.url}/readyz`);
    expect(before.status).toBe(503);
    const body = (await before.json()) as { pending: string[] };
    expect(body.pending.length).toBeGreaterThan(0);
    // In embedded mode this command reaches the database through the running server's socket.
    const migrate = await runCommand(['migrate', '--json'], { env });
    expect(migrate.code).toBe(0);
    expect(JSON.parse(migrate.stdout).applied).toEqual(body.pending);
    expect((await fetch(`${serve.url}/readyz`)).status).toBe(200);
    expect((await serve.stop()).code).toBe(0);
  });

  it('fails fast on a bad config, naming every problem', async () => {
    env = await createTestEnv();
    writeFileSync(env.configPath, `AGENTWS_PORT=-1\nAGENTWS_WORKER_CONCURRENCY=0\nDATABASE_URL=ftp://x\nAGENTWS_DATA_DIR=${env.dataDir}\n`);
    const r = await runCli(['serve'], { env, timeoutMs: 10_000 });
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(5000);
    for (const v of ['AGENTWS_PORT', 'AGENTWS_WORKER_CONCURRENCY', 'DATABASE_URL', 'AGENTWS_JWT_SECRET', 'AGENTWS_ENCRYPTION_KEY']) {
      expect(r.stderr).toContain(v);
    }
  });

  it.runIf(DB_MODE === 'embedded')('keeps its data across a restart', async () => {
    env = await createTestEnv();
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    serve = await startServe(env);
    const seeded = await runCommand(['tenant', 'seed', '--json', '--name', 'Persisted', '--owner-email', 'p@example.com'], { env });
    expect(seeded.code).toBe(0);
    const id = JSON.parse(seeded.stdout).tenant.id;
    expect((await serve.stop()).code).toBe(0);

    serve = await startServe(env);
    const list = await runCommand(['tenant', 'list', '--json'], { env });
    expect(JSON.parse(list.stdout).tenants).toEqual([expect.objectContaining({ id, slug: 'persisted', users: 1 })]);
    expect((await fetch(`${serve.url}/readyz`)).status).toBe(200);
    expect((await serve.stop()).code).toBe(0);

    // With serve stopped, the command hosts the database itself.
    const offline = await runCommand(['tenant', 'list', '--json'], { env });
    expect(JSON.parse(offline.stdout).tenants[0].id).toBe(id);
  });

  it.runIf(DB_MODE === 'postgres')('runs separate `aws worker` processes that work the queues and stop on SIGTERM', async () => {
    env = await createTestEnv();
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    const workers = [
      await startServe(env, { command: ['worker', '--concurrency', '2'], readyMsg: 'worker started' }),
      await startServe(env, { command: ['worker'], readyMsg: 'worker started' }),
    ];
    try {
      const seeded = await runCommand(['tenant', 'seed', '--json', '--name', 'Queued', '--owner-email', 'q@example.com'], { env });
      const id = JSON.parse(seeded.stdout).tenant.id;
      const dir = join(env.dataDir, 'workspaces', id);
      const { existsSync } = await import('node:fs');
      await expect.poll(() => existsSync(dir), { timeout: 15_000, interval: 100 }).toBe(true);
      // Exactly one worker took the job (other queues' jobs, e.g. scheduled ones, may run meanwhile).
      const done = /"queue":"tenant-provision-workspace"[^\n]*"msg":"job completed"/g;
      await expect.poll(() => workers.map((w) => (w.logs().match(done) ?? []).length).reduce((a, b) => a + b), { timeout: 10_000 }).toBe(1);
    } finally {
      for (const w of workers) {
        const { code, ms } = await w.stop('SIGTERM');
        expect(code).toBe(0);
        expect(ms).toBeLessThan(5000);
      }
    }
  });

});
