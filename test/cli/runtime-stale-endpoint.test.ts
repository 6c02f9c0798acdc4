import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isProcessAlive } from '../../src/lib/process-state.js';
import { runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/**
 * A stopped serve's runtime endpoint is not trusted (issue 11, finding 16): once the runtime a serve
 * recorded is gone, its port may belong to anybody (here: a server answering 401, as another
 * appliance's runtime would), and `aws runtime apply` must say "not running; recorded", not fail.
 */
describe(`runtime apply after serve stopped (${DB_MODE})`, () => {
  let env: TestEnv | undefined;
  let serve: ServeProcess | undefined;
  let squatter: { port: number; hits: string[]; close(): Promise<void> } | undefined;
  afterEach(async () => {
    if (serve && serve.child.exitCode === null) await Promise.race([serve.stop('SIGTERM'), new Promise((r) => setTimeout(r, 10_000))]);
    serve = undefined;
    await squatter?.close();
    squatter = undefined;
    await env?.cleanup();
    env = undefined;
  });

  /**
   * Another process listening on the port the runtime had, refusing our credentials. Undefined when some
   * other process took the port first: runtimes started with --port 0 all try 4096 first, so another
   * test's runtime may be there, which is the very situation of the finding (and answers 401 to us too).
   */
  async function squat(port: number) {
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
    });
    const taken = await new Promise<boolean>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(true) : reject(err)));
      server.listen(port, '127.0.0.1', () => resolve(false));
    });
    if (taken) return undefined;
    expect((server.address() as AddressInfo).port).toBe(port);
    return { port, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
  }

  async function setUp() {
    env = await createTestEnv();
    expect((await runCli(['migrate'], { env })).code).toBe(0);
    expect((await runCli(['tenant', 'seed', '--name', 'Acme', '--owner-email', 'op@example.com'], { env })).code).toBe(0);
    const added = await runCli(['provider', 'add', 'local', '--kind', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm1'], { env });
    expect(added.code, added.stderr).toBe(0);
    serve = await startServe(env);
    // Wait until serve recorded its runtime (what other processes use): `runtime status` reaches it then.
    await expect
      .poll(async () => JSON.parse((await runCli(['runtime', 'status', '--json'], { env })).stdout).runtime.reachable, { timeout: 30_000, interval: 500 })
      .toBe(true);
    const ready = JSON.parse(serve.logs().split('\n').find((l) => l.includes('"msg":"agent runtime ready"'))!);
    return { port: Number(new URL(ready.url).port), runtimePid: Number(ready.runtimePid) };
  }

  async function applyNotRunning() {
    const r = await runCli(['runtime', 'apply', '--default-model', 'local/m1', '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ applied: { defaultModel: 'local/m1', providers: ['local'] }, pushed: false, runtimeError: expect.stringMatching(/not running/) });
    const human = await runCli(['runtime', 'apply'], { env });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stderr).toMatch(/not pushed: the runtime is not running/);
    expect(human.stderr).toMatch(/It is recorded/);
    const status = JSON.parse((await runCli(['runtime', 'status', '--json'], { env })).stdout);
    expect(status).toMatchObject({ ready: true, runtime: { reachable: false, error: expect.stringMatching(/not running/) } });
  }

  it('forgets the endpoint on a clean stop, so a process now on that port is never asked', async () => {
    const { port } = await setUp();
    expect((await serve!.stop('SIGTERM')).code).toBe(0);
    squatter = await squat(port);
    await applyNotRunning();
    expect(squatter?.hits ?? []).toEqual([]);
  }, 120_000);

  it('does not trust the record a killed serve left when its runtime died too', async () => {
    const { port, runtimePid } = await setUp();
    await serve!.stop('SIGKILL');
    // The runtime outlives a killed serve; here it dies as well (an out-of-memory kill, a reboot).
    process.kill(runtimePid, 'SIGKILL');
    await expect.poll(() => isProcessAlive(runtimePid), { timeout: 10_000 }).toBe(false);
    squatter = await squat(port);
    await applyNotRunning();
    expect(squatter?.hits ?? []).toEqual([]);
  }, 120_000);
});
