import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net, { type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { FakeChatRequest, FakeStep } from '../fixtures/fake-llm.js';
import { api } from '../helpers/app.js';
import { BIN, cleanEnv } from '../helpers/cli.js';
import { createNetwork, netnsAvailable, type Network } from '../helpers/netns.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

const can = netnsAvailable();
const root = process.getuid?.() === 0;

/**
 * The limits on a runner host: `aws runner` in a network namespace of its own (a machine that
 * reaches the control plane over its link only), hosting two people's runtimes; the control plane (this
 * process) hosts none. One person's agent allocates 8 GiB while the other's turn runs on the same runner:
 * the kernel ends the allocation at the runtime's memory limit there, the runner tells the control plane
 * (its notice, for a user it holds) and the person reads it on their stream, the other turn completes, and
 * the control plane stays ready. What the runner's limits are and who is near one reach `GET
 * /v1/admin/runtime` through its sync.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project security test/security/limits-runner.test.ts
 */
describe.runIf(can.ok && root)('limits: a hostile agent on a runner host (network namespace)', { timeout: 180_000 }, () => {
  let r: RuntimeApp;
  let network: Network;
  let forward: Server;
  let runner: ChildProcess;
  let logs = '';
  let dataDir = '';
  let acme: Awaited<ReturnType<typeof seedPeople>>;

  const respond = (req: FakeChatRequest): FakeStep | undefined => {
    const m = /^run ([\w-]+): ([\s\S]+)$/.exec(req.lastUser.trim());
    if (!m) return undefined;
    if ((req.body.messages as Array<{ role: string }>).some((x) => x.role === 'tool')) return { text: `done ${m[1]}` };
    return { toolCall: { name: 'bash', arguments: { command: m[2], description: m[1] } } };
  };

  /**
   * A turn of `token`, once it ended. `onToolRunning` is called once its tool runs (or the turn ended
   * without one). A limit's notice that comes after the end is not waited for here: limitsOf reads it back.
   */
  async function turn(token: string, text: string, o: { onToolRunning?: () => void } = {}) {
    const id = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: text.slice(0, 30) } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${id}/events`, { authorization: `Bearer ${token}` });
    const sent = await api(r.t, 'POST', `/v1/sessions/${id}/prompt`, { token, body: { text, agent: 'build' } });
    expect(sent.status, sent.text).toBe(202);
    const ended = (e: { data: any }) => e.data.type === 'session.idle' || e.data.type === 'session.error';
    if (o.onToolRunning) {
      const cb = o.onToolRunning;
      void sse.until((e) => ended(e) || (e.data.type === 'message.part.updated' && e.data.properties.part?.type === 'tool' && e.data.properties.part?.state?.status === 'running'), 150_000).then(cb, cb);
    }
    await sse.until(ended, 150_000);
    await sse.close();
    const messages = ((await api(r.t, 'GET', `/v1/sessions/${id}/messages`, { token })).json.messages ?? []) as Array<{ parts: Array<Record<string, any>> }>;
    const output = messages
      .flatMap((x) => x.parts)
      .filter((p) => p.type === 'tool')
      .map((p) => `${p.state?.output ?? ''}${p.state?.error ?? ''}`)
      .join('\n');
    const events = sse.events.map((e) => e.data);
    return { sessionId: id, token, lastId: sse.events.at(-1)?.id, events, output, error: events.find((e) => e.type === 'session.error')?.properties?.error, limits: events.filter((e) => e.type === 'runtime.limit').map((e) => e.properties) };
  }

  /**
   * The limits a turn's stream told of: those it carried, or, when the host read the kernel's counter a
   * moment after the turn ended (the notice still goes to that session), those that came after its end
   * (read back with Last-Event-ID).
   */
  async function limitsOf(t: { sessionId: string; token: string; lastId?: string; limits: Array<Record<string, any>> }): Promise<Array<Record<string, any>>> {
    if (t.limits.length) return t.limits;
    const sse = await openSse(`${r.t.url}/v1/sessions/${t.sessionId}/events`, { authorization: `Bearer ${t.token}`, ...(t.lastId ? { 'last-event-id': t.lastId } : {}) });
    try {
      await sse.until((e) => e.data.type === 'runtime.limit', 15_000);
    } catch {
      // none came: the caller's assertion says so
    }
    await sse.close();
    return sse.events.filter((e) => e.data.type === 'runtime.limit').map((e) => e.data.properties);
  }

  beforeAll(async () => {
    network = createNetwork({ hosts: ['r1'] });
    r = await startRuntimeApp({ vars: { AGENTWS_LOCAL_RUNNER: 'off', AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    r.llm.respond(respond);
    // The app listens on loopback; the runner's machine reaches it on the bridge, as a LAN's would.
    const port = Number(new URL(r.t.url).port);
    forward = net.createServer((c) => {
      const up = net.connect(port, '127.0.0.1');
      c.pipe(up).pipe(c);
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
    });
    await new Promise<void>((res) => forward.listen(0, network.controlAddress, res));
    const controlUrl = `http://${network.controlAddress}:${(forward.address() as net.AddressInfo).port}`;
    const created = await r.t.opened.core.runners.createToken(systemCtx(silentLogger, { name: 'test' }), { name: 'limits' });
    dataDir = mkdtempSync(join(tmpdir(), 'agentws-limits-runner-'));
    mkdirSync(dataDir, { recursive: true });
    // Into the host's network namespace only (nsenter --net): `ip netns exec` also gives the process a /sys
    // of its own, without the host's cgroup filesystems, which a real machine has.
    runner = spawn('nsenter', [`--net=/run/netns/${network.hosts.get('r1')!.ns}`, '--', process.execPath, BIN, 'runner'], {
      env: cleanEnv({
        AGENTWS_CONTROL_URL: controlUrl,
        AGENTWS_RUNNER_TOKEN: created.token,
        AGENTWS_RUNNER_NAME: 'r1',
        AGENTWS_DATA_DIR: dataDir,
        AGENTWS_RUNTIME_MAX: '4',
        AGENTWS_RUNTIME_MEMORY_MAX: '1536MiB',
        AGENTWS_RUNTIME_PIDS_MAX: '300',
        AGENTWS_LOG_LEVEL: 'info',
      }),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    runner.stdout!.on('data', (c) => (logs += c));
    runner.stderr!.on('data', (c) => (logs += c));
    const deadline = Date.now() + 30_000;
    while ((await r.t.opened.core.runners.list(systemCtx(silentLogger))).filter((x) => x.healthy).length < 1) {
      if (Date.now() > deadline) throw new Error(`the runner did not connect: ${logs.slice(-2000)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    acme = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    await Promise.all([turn(acme.tokens.member, 'run warm-a: echo warm'), turn(acme.tokens.owner, 'run warm-b: echo warm')]);
  }, 180_000);
  afterAll(async () => {
    if (process.env.AGENTWS_KEEP_LOGS) console.log(logs);
    try {
      if (runner?.pid) process.kill(-runner.pid, 'SIGTERM');
    } catch {
      // gone
    }
    // A second for it to stop its runtimes, less once it has exited.
    if (runner && runner.exitCode === null && runner.signalCode === null) await Promise.race([new Promise((res) => runner.once('exit', res)), new Promise((res) => setTimeout(res, 1000))]);
    try {
      if (runner?.pid) process.kill(-runner.pid, 'SIGKILL');
    } catch {
      // gone
    }
    r?.llm.respond(null);
    forward?.close();
    await r?.close();
    network?.destroy();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('allocating 8 GiB on the runner: that process is ended at the limit there, the person is told through the control plane, the other person\'s turn on the same runner completes, the control plane stays ready', async () => {
    const { rows } = await r.t.opened.db.query<{ socket_path: string }>(`select socket_path from agent_runtimes where tenant_id = $1`, [acme.tenantId]);
    expect(rows.length).toBe(2);
    expect(rows.every((x) => x.socket_path.startsWith('runner:')), logs.slice(-2000)).toBe(true);
    // The allocation is under way (its tool runs) before the other person's turn starts.
    let running!: () => void;
    const underWay = new Promise<void>((res) => (running = res));
    const hostile = turn(acme.tokens.member, `run alloc: python3 -c 'l = []\nfor _ in range(32): l.append(b"x" * (256 << 20))\nprint("allocated", len(l))'; echo "exit=$?"`, { onToolRunning: running });
    await underWay;
    const statuses: number[] = [];
    let done = false;
    const poll = (async () => {
      while (!done) {
        statuses.push((await fetch(`${r.t.url}/readyz`).catch(() => null))?.status ?? 0);
        await new Promise((res) => setTimeout(res, 250));
      }
    })();
    const [h, v] = await Promise.all([hostile, turn(acme.tokens.owner, `run victim: python3 -c 'print(sum(i*i for i in range(2_000_000)))' && echo victim-ok`)]);
    done = true;
    await poll;
    expect(statuses.every((s) => s === 200), statuses.join(',')).toBe(true);
    expect(v.error).toBeUndefined();
    expect(v.output).toContain('victim-ok');
    expect(h.output).toMatch(/exit=137/);
    expect(h.output).not.toMatch(/allocated 32/);
    expect((await limitsOf(h)).map((l) => `${l.kind}:${l.ended}`), `${JSON.stringify(h.events.map((e) => e.type))}\n${logs.slice(-3000)}`).toContain('memory:process');
  });

  it('status shows the runner\'s limits (as `runner r1`) and its people against theirs, from its sync', async () => {
    await expect
      .poll(async () => {
        const s = (await api(r.t, 'GET', '/v1/admin/runtime', { token: acme.tokens.owner })).json.runtime;
        const host = (s.hosts as Array<{ hostname: string; limits: { memory: string | null; memoryMaxBytes: number; processesMax: number } | null }>).find((x) => x.hostname === 'runner r1');
        const mia = (s.people as Array<{ handle: string; host: string; oomKills: number; memoryMaxBytes: number }>).find((p) => p.handle === 'mia');
        return { memory: host?.limits?.memory, memoryMaxBytes: host?.limits?.memoryMaxBytes, processesMax: host?.limits?.processesMax, miaHost: mia?.host, miaOom: (mia?.oomKills ?? 0) > 0 };
      }, { timeout: 20_000 })
      .toEqual({ memory: expect.stringMatching(/^cgroup[12]$/), memoryMaxBytes: 1536 * 1024 ** 2, processesMax: 300, miaHost: 'runner r1', miaOom: true });
  });
});
