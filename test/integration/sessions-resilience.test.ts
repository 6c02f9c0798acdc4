import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openCore } from '../../src/cli/open-core.js';
import { silentLogger } from '../../src/core/logger.js';
import { createManagedRuntime, type ManagedRuntime } from '../../src/core/runtime/opencode-process.js';
import { processStatFields } from '../../src/lib/process-state.js';
import { buildApp } from '../../src/http/build-app.js';
import { startWorker } from '../../src/jobs/worker.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, freePort, startTestApp, type TestApp } from '../helpers/app.js';
import { startServe } from '../helpers/cli.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/** A process's niceness (NaN once it is gone). */
const niceOf = (pid: number) => Number(processStatFields(pid)?.[16]);

/**
 * A runtime outside the app (external mode), optionally behind a loopback proxy that counts prompts
 * reaching the runtime and can keep their responses from the worker (to kill it mid-send).
 */
async function startExternalRuntime() {
  const dataDir = mkdtempSync(join(tmpdir(), 'aws-ext-'));
  const runtime: ManagedRuntime = createManagedRuntime({ dataDir, log: silentLogger });
  const ep = await runtime.start();
  const password = Buffer.from(ep.authorization.slice(6), 'base64').toString().slice('opencode:'.length);
  const target = new URL(ep.url);
  const proxy = { prompts: 0, hold: false };
  const server = http.createServer((req, res) => {
    const isPrompt = req.method === 'POST' && /\/prompt_async/.test(req.url ?? '');
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      if (isPrompt) proxy.prompts++;
      if (isPrompt && proxy.hold) {
        upRes.resume(); // delivered to the runtime; the caller never hears back
        return;
      }
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    password,
    proxy,
    vars: { AGENTWS_RUNTIME_URL: url, AGENTWS_RUNTIME_PASSWORD: password, AGENTWS_RUNTIME_ASK_TOOLS: 'bash' },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await runtime.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

describe.runIf(DB_MODE === 'postgres')('sessions: crashes, restarts and several processes', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('does not send a turn twice when the worker dies after sending it and the job is retried', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    const ext = await startExternalRuntime();
    cleanups.push(() => ext.close());
    const t = await startTestApp({ vars: ext.vars });
    cleanups.push(() => t.close());
    await t.opened.core.startRuntime();
    cleanups.push(() => t.opened.core.stopRuntime());
    const people = await seedPeople(t, 'acme');
    await applyScriptedProvider(t, people.tokens.owner, llm);
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'crash' } })).json.sessionId;
    const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());

    let worker = await startServe(t.env, { command: ['worker'], readyMsg: 'worker started' });
    cleanups.push(() => worker.stop('SIGKILL'));
    ext.proxy.hold = true;
    llm.script([{ text: 'Only once' }]);
    expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'once please', agent: 'build' } })).status).toBe(202);
    await expect.poll(() => ext.proxy.prompts, { timeout: 20_000 }).toBe(1);
    await worker.stop('SIGKILL');
    await sse.until((e) => e.data.type === 'session.idle');

    ext.proxy.hold = false;
    worker = await startServe(t.env, { command: ['worker'], readyMsg: 'worker started' });
    // The job expires (45 s), is retried, finds the turn already in the runtime, and completes.
    await expect
      .poll(async () => (await t.opened.db.query(`select status, attempts from agent_turns where session_id = $1`, [sessionId])).rows[0], { timeout: 90_000, interval: 500 })
      .toEqual({ status: 'sent', attempts: 2 });
    expect(ext.proxy.prompts).toBe(1);
    expect(llm.requests.filter((q) => !q.title)).toHaveLength(1);
    expect(worker.logs()).toContain('turn already reached the runtime');
    const messages = await api(t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: people.tokens.member });
    expect(messages.json.messages.filter((m: any) => m.info.role === 'user')).toHaveLength(1);
  }, 150_000);

  it('restarts a managed runtime that died, and the open stream carries on with the next turn', async () => {
    const r = await startRuntimeApp();
    cleanups.push(() => r.close());
    const people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'survivor' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => sse.close());
    r.llm.script([{ text: 'before the crash' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'one', agent: 'build' } });
    await sse.until((e) => e.data.type === 'session.idle');
    const seen = sse.events.length;

    const managed = r.t.opened.core.runtimeHost.managed!;
    const pid = managed.pid!;
    // The runtime runs at AGENTWS_RUNTIME_NICE (default 10) below serve, before and after a restart.
    expect(niceOf(pid)).toBe(10);
    process.kill(pid, 'SIGKILL');
    await expect.poll(() => managed.endpoint !== null && managed.pid !== pid, { timeout: 30_000, interval: 200 }).toBe(true);
    expect(niceOf(managed.pid!)).toBe(10);

    r.llm.script([{ text: 'after the crash' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'two', agent: 'build' } })).status).toBe(202);
    await sse.until((e) => sse.events.indexOf(e) >= seen && e.data.type === 'session.idle', 60_000);
    const after = sse.events.slice(seen).map((e) => e.data);
    expect(after.filter((e) => e.type === 'message.part.delta').map((e) => e.properties.delta).join('')).toBe('after the crash');
    expect(sse.ended).toBe(false);
  }, 150_000);

  it('delivers a session\'s events to a subscriber on another serve process', async () => {
    const llm = await startFakeLlm();
    cleanups.push(() => llm.close());
    const ext = await startExternalRuntime();
    cleanups.push(() => ext.close());
    const a: TestApp = await startTestApp({ vars: ext.vars });
    cleanups.push(() => a.close());
    await a.opened.core.startRuntime();
    cleanups.push(() => a.opened.core.stopRuntime());
    const worker = await startWorker(a.opened.core, a.opened.boss, silentLogger, { concurrency: 1 });
    cleanups.push(() => worker.stop(1000));

    // Process B: its own core, app and upstream connection on the same database and runtime.
    const b = await openCore(a.env.config(), silentLogger);
    cleanups.push(() => b.close());
    const appB = await buildApp(b.core, a.env.config());
    const portB = await freePort();
    await appB.listen({ host: '127.0.0.1', port: portB });
    cleanups.push(() => appB.close());
    await b.core.startRuntime();
    cleanups.push(() => b.core.stopRuntime());

    const people = await seedPeople(a, 'acme');
    await applyScriptedProvider(a, people.tokens.owner, llm);
    const sessionId = (await api(a, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'two processes' } })).json.sessionId;
    const onB = await openSse(`http://127.0.0.1:${portB}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    cleanups.push(() => onB.close());
    llm.script([{ text: 'seen from B' }]);
    expect((await api(a, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: people.tokens.member, body: { text: 'hi', agent: 'build' } })).status).toBe(202);
    await onB.until((e) => e.data.type === 'session.idle');
    expect(onB.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('')).toBe('seen from B');

    // Our own events travel through the database too: deleting on A ends the stream on B.
    expect((await api(a, 'DELETE', `/v1/sessions/${sessionId}`, { token: people.tokens.member })).status).toBe(204);
    await onB.until((e) => e.data.type === 'session.deleted', 10_000);
    await expect.poll(() => onB.ended, { timeout: 5000 }).toBe(true);
    // Usage was recorded once although both processes saw the turn.
    await expect.poll(async () => (await a.opened.db.query(`select count(*)::int as n from usage_records where session_id = $1`, [sessionId])).rows[0].n, { timeout: 15_000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await a.opened.db.query(`select count(*)::int as n from usage_records where session_id = $1`, [sessionId])).rows[0].n).toBe(1);
  }, 150_000);
});
