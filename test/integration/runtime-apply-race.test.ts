import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.js';
import { createManagedRuntime } from '../../src/core/runtime/opencode-process.js';
import { startWorker } from '../../src/jobs/worker.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, startTestApp } from '../helpers/app.js';
import { runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { openSse, seedPeople } from '../helpers/runtime.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/**
 * A provider applied while serve's managed runtime is still starting is not undone by the runtime's
 * start-up configuration (issue 11, finding 19): whatever the order, the applied configuration wins and
 * the first turn runs on it. Real `aws serve` and CLI processes, the real runtime, the scripted model.
 */
describe(`runtime apply while the managed runtime starts (${DB_MODE})`, () => {
  let env: TestEnv | undefined;
  let serve: ServeProcess | undefined;
  let llm: FakeLlm | undefined;
  afterEach(async () => {
    if (serve && serve.child.exitCode === null) await Promise.race([serve.stop('SIGTERM'), new Promise((r) => setTimeout(r, 10_000))]);
    serve = undefined;
    await llm?.close();
    await env?.cleanup();
    env = undefined;
  });

  async function setUp() {
    llm = await startFakeLlm();
    env = await createTestEnv({ vars: { AGENTWS_OPERATOR_EMAIL: 'op@example.com', AGENTWS_RUNTIME_ASK_TOOLS: '', AGENTWS_SERVE_RUNS_WORKER: 'true' } });
    expect((await runCli(['migrate'], { env })).code).toBe(0);
    expect((await runCli(['tenant', 'seed', '--name', 'Acme', '--owner-email', 'op@example.com'], { env })).code).toBe(0);
    const added = await runCli(['provider', 'add', 'scripted', '--kind', 'openai-compatible', '--base-url', `${llm.url}/v1`, '--model', 'fake-model', '--api-key-stdin'], { env, input: 'sk-scripted' });
    expect(added.code, added.stderr).toBe(0);
    return { auth: { authorization: `Bearer ${env.vars.AGENTWS_API_KEY}` } };
  }

  const runtimeReady = () => serve!.logs().includes('"msg":"agent runtime ready"');

  /** One turn through serve's API (as the operator, with the API key): the scripted answer, or the error. */
  async function turn(auth: Record<string, string>) {
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${serve!.url}${path}`, { method, headers: { ...auth, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
      return { status: res.status, json: (await res.json().catch(() => null)) as any };
    };
    const created = await call('POST', '/v1/sessions', { title: 'first turn' });
    expect(created.status).toBe(201);
    const sessionId = created.json.sessionId;
    const sse = await openSse(`${serve!.url}/v1/sessions/${sessionId}/events`, auth);
    llm!.script([{ text: 'The applied model answers.' }]);
    expect((await call('POST', `/v1/sessions/${sessionId}/prompt`, { text: 'hello', agent: 'build' })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle' || e.data.type === 'session.error', 60_000);
    await sse.close();
    const error = sse.events.find((e) => e.data.type === 'session.error')?.data.properties.error;
    const text = sse.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');
    return { error, text };
  }

  it('over HTTP, while serve is still starting its runtime', async () => {
    const { auth } = await setUp();
    serve = await startServe(env!);
    expect(runtimeReady()).toBe(false);
    const res = await fetch(`${serve.url}/v1/admin/runtime/apply`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ defaultModel: 'scripted/fake-model' }) });
    expect(res.status).toBe(200);
    expect(await turn(auth)).toEqual({ error: undefined, text: 'The applied model answers.' });
  }, 120_000);

  it('from the CLI, while serve is still starting its runtime', async () => {
    const { auth } = await setUp();
    serve = await startServe(env!);
    expect(runtimeReady()).toBe(false);
    const applied = await runCli(['runtime', 'apply', '--default-model', 'scripted/fake-model', '--json'], { env });
    expect(applied.code, applied.stderr).toBe(0);
    await expect.poll(runtimeReady, { timeout: 30_000 }).toBe(true);
    expect(await turn(auth)).toEqual({ error: undefined, text: 'The applied model answers.' });
  }, 120_000);
});

/**
 * An external runtime that cannot be reached when the apply happens: the configuration is recorded
 * (`pushed: false`), and serve gives it to the runtime once it reconnects (PostgreSQL run only).
 */
describe.runIf(DB_MODE === 'postgres')('runtime apply with an external runtime that is away', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    cleanups.length = 0;
  });

  it('records the configuration, answers pushed: false, and pushes it when the runtime is back', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    const dataDir = mkdtempSync(join(tmpdir(), 'aws-ext-'));
    const runtime = createManagedRuntime({ dataDir, log: silentLogger });
    cleanups.push(async () => {
      await runtime.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    const ep = await runtime.start();
    // The runtime's address as serve sees it: a loopback proxy that can be taken away and brought back.
    const target = new URL(ep.url);
    let away = false;
    const proxy = http.createServer((req, res) => {
      if (away) return void req.socket.destroy();
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => (proxy.closeAllConnections(), proxy.close(r))));
    const password = Buffer.from(ep.authorization.slice(6), 'base64').toString().slice('opencode:'.length);
    const t = await startTestApp({ vars: { AGENTWS_RUNTIME_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, AGENTWS_RUNTIME_PASSWORD: password, AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    cleanups.push(() => t.close());
    await t.opened.core.startRuntime();
    cleanups.push(() => t.opened.core.stopRuntime());
    const worker = await startWorker(t.opened.core, t.opened.boss, silentLogger, { concurrency: 1 });
    cleanups.push(() => worker.stop(1000));
    const people = await seedPeople(t, 'acme');
    const token = people.tokens.owner;
    expect((await api(t, 'POST', '/v1/admin/providers', { token, body: { name: 'scripted', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: 'sk-x', models: [{ id: 'fake-model' }] } })).status).toBe(201);

    // The runtime goes away (its connections too, the event stream included).
    away = true;
    proxy.closeAllConnections();
    const applied = await api(t, 'POST', '/v1/admin/runtime/apply', { token, body: { defaultModel: 'scripted/fake-model' } });
    expect(applied.status, applied.text).toBe(200);
    expect(applied.json).toMatchObject({ applied: { defaultModel: 'scripted/fake-model' }, pushed: false, runtimeError: expect.stringContaining('not reachable') });
    expect((await api(t, 'GET', '/v1/admin/runtime', { token })).json).toMatchObject({ ready: true, pendingChanges: false, runtime: { reachable: false } });

    // Back: serve reconnects to its event stream and writes the recorded configuration; a turn runs on it.
    away = false;
    await expect
      .poll(async () => Object.keys(((await (await fetch(`${ep.url}/global/config`, { headers: { authorization: ep.authorization } })).json()) as any).provider ?? {}), { timeout: 30_000, interval: 500 })
      .toContainEqual(expect.stringMatching(/_scripted$/));
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'after' } })).json.sessionId;
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    llm.script([{ text: 'Back again.' }]);
    expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'hi', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => e.data.type === 'session.idle' || e.data.type === 'session.error', 60_000);
    await sse.close();
    expect(sse.events.find((e) => e.data.type === 'session.error')).toBeUndefined();
    expect(sse.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('')).toBe('Back again.');
  }, 150_000);
});
