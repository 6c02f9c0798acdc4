import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeChatRequest, FakeStep } from '../fixtures/fake-llm.js';
import { api } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

const MiB = 1024 ** 2;
const root = process.getuid?.() === 0;

/**
 * One agent cannot take the host from everyone else: a hostile member's scripted model makes
 * its agent allocate 8 GiB, fork 5,000 processes, write past the workspace quota and burn every core,
 * each while another person's turn runs. That turn completes, the serve stays ready (/readyz answers
 * 200 all along), and the hostile turn gets a clear error. Real runtimes in real sandboxes, their
 * limits in real cgroups (root here and in CI; this VM: cgroup v1 memory, pids and cpu).
 *
 * The limits are the test's, small so that each case is quick on a shared machine: 1.5 GiB of memory,
 * 300 processes, a 150 MiB quota. Whether the other turn keeps its pace (within 1.5x its time alone) is
 * measured by the benchmark (`npm run bench -- limits`), not asserted here: a loaded CI machine would
 * make a timed assertion flaky.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project security test/security/limits-agent.test.ts
 */
describe.runIf(root)('limits: a hostile agent beside another person\'s turn, on this host', { timeout: 180_000 }, () => {
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let beta: Awaited<ReturnType<typeof seedPeople>>;

  /** The scripted model: "run <label>: <command>" runs the command in bash once, then says "done <label>". */
  const respond = (req: FakeChatRequest): FakeStep | undefined => {
    const m = /^run ([\w-]+)(?: (\d+))?: ([\s\S]+)$/.exec(req.lastUser.trim());
    if (!m) return undefined;
    const toolDone = (req.body.messages as Array<{ role: string }>).some((x) => x.role === 'tool');
    if (toolDone) return { text: `done ${m[1]}` };
    return { toolCall: { name: 'bash', arguments: { command: m[3], description: m[1], ...(m[2] ? { timeout: Number(m[2]) } : {}) } } };
  };

  /**
   * A turn of `token`: resolves once it ended (idle, or an error), with its stream's events and its tools'
   * outputs. `onToolRunning` is called once its tool runs (or the turn ended without one). A limit's notice
   * that comes after the end is not waited for here: limitsOf reads it back with Last-Event-ID.
   */
  async function turn(token: string, text: string, o: { onToolRunning?: () => void } = {}) {
    const id = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: text.slice(0, 30) } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${id}/events`, { authorization: `Bearer ${token}` });
    const t0 = performance.now();
    const sent = await api(r.t, 'POST', `/v1/sessions/${id}/prompt`, { token, body: { text, agent: 'build' } });
    expect(sent.status, sent.text).toBe(202);
    const ended = (e: { data: any }) => e.data.type === 'session.idle' || e.data.type === 'session.error';
    if (o.onToolRunning) {
      const cb = o.onToolRunning;
      void sse.until((e) => ended(e) || (e.data.type === 'message.part.updated' && e.data.properties.part?.type === 'tool' && e.data.properties.part?.state?.status === 'running'), 150_000).then(cb, cb);
    }
    await sse.until(ended, 150_000);
    const ms = performance.now() - t0;
    await sse.close();
    const messages = ((await api(r.t, 'GET', `/v1/sessions/${id}/messages`, { token })).json.messages ?? []) as Array<{ parts: Array<Record<string, any>> }>;
    const output = messages
      .flatMap((x) => x.parts)
      .filter((p) => p.type === 'tool')
      .map((p) => `${p.state?.output ?? ''}${p.state?.error ?? ''}${JSON.stringify(p.state?.metadata ?? {})}`)
      .join('\n');
    const events = sse.events.map((e) => e.data);
    return { sessionId: id, token, lastId: sse.events.at(-1)?.id, ms, events, output, error: events.find((e) => e.type === 'session.error')?.properties?.error, limits: events.filter((e) => e.type === 'runtime.limit').map((e) => e.properties) };
  }

  /** /readyz every 250 ms while `work` runs: every answer must be 200. */
  async function readyAllAlong<T>(work: Promise<T>): Promise<{ result: T; statuses: number[] }> {
    const statuses: number[] = [];
    let done = false;
    const poll = (async () => {
      while (!done) {
        const res = await fetch(`${r.t.url}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
        statuses.push(res?.status ?? 0);
        await res?.text().catch(() => {});
        await new Promise((x) => setTimeout(x, 250));
      }
    })();
    try {
      return { result: await work, statuses };
    } finally {
      done = true;
      await poll;
    }
  }

  /** The victim's turn: real work in its own runtime (a little CPU, a file), then an answer. */
  const victimWork = (n: number) => `run victim-${n}: python3 -c 'print(sum(i*i for i in range(2_000_000)))' && echo victim-${n} > v${n}.txt && cat v${n}.txt`;

  /** Starts the hostile turn, waits until its tool runs, then runs the victim's turn beside it. */
  async function beside(hostile: string, victim: number) {
    // The hostile command is under way (its tool runs) before the other person's turn starts.
    let running!: () => void;
    const underWay = new Promise<void>((x) => (running = x));
    const h = turn(acme.tokens.member, hostile, { onToolRunning: running });
    await underWay;
    const { result, statuses } = await readyAllAlong(Promise.all([h, turn(beta.tokens.member, victimWork(victim))]));
    const [hostileTurn, victimTurn] = result;
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200), `readyz: ${statuses.join(',')}`).toBe(true);
    expect(victimTurn.error, JSON.stringify(victimTurn.events.map((e) => e.type))).toBeUndefined();
    expect(victimTurn.output).toContain(`victim-${victim}`);
    expect(victimTurn.events.at(-1)?.type === 'session.idle' || victimTurn.events.some((e) => e.type === 'session.idle')).toBe(true);
    return hostileTurn;
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
    r = await startRuntimeApp({
      vars: {
        AGENTWS_RUNTIME_ASK_TOOLS: '',
        AGENTWS_RUNTIME_MEMORY_MAX: '1536MiB',
        AGENTWS_RUNTIME_PIDS_MAX: '300',
        AGENTWS_WORKSPACE_QUOTA: '150MiB',
        AGENTWS_RUNTIME_TMP_SIZE: '64MiB',
      },
    });
    r.llm.respond(respond);
    acme = await seedPeople(r.t, 'acme');
    beta = await seedPeople(r.t, 'beta');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    await applyScriptedProvider(r.t, beta.tokens.owner, r.llm);
    // Both runtimes up before the cases (a cold start is not what they measure); started side by side.
    await Promise.all([turn(acme.tokens.member, 'run warm-a: echo warm'), turn(beta.tokens.member, 'run warm-b: echo warm')]);
  }, 180_000);
  afterAll(async () => {
    r?.llm.respond(null);
    await r?.close();
  });

  it('says which limits hold here: memory, processes and CPU in cgroups, the quota measured (status, /readyz)', async () => {
    const ready = (await (await fetch(`${r.t.url}/readyz`)).json()) as { agents: { limits?: Record<string, unknown> } };
    expect(ready.agents.limits).toMatchObject({ memory: expect.stringMatching(/^cgroup[12]$/), processes: expect.stringMatching(/^cgroup[12]$/), cpu: expect.stringMatching(/^cgroup[12]$/), disk: 'measured' });
    expect((ready.agents.limits!.unavailable as Record<string, string>).disk).toMatch(/not enforced by the kernel/);
    const status = await api(r.t, 'GET', '/v1/admin/runtime', { token: acme.tokens.owner });
    expect(status.status).toBe(200);
    const host = status.json.runtime.hosts[0];
    expect(host.limits).toMatchObject({ memory: expect.stringMatching(/^cgroup/), memoryMaxBytes: 1536 * MiB, processesMax: 300, tmpBytes: 64 * MiB, disk: 'measured' });
    expect(status.json.runtime.workspaceQuotaBytes).toBe(150 * MiB);
  });

  it('allocating 8 GiB: the kernel ends that process at the runtime\'s memory limit, the tool says killed and the person is told; the other turn completes', async () => {
    const hostile = await beside(`run alloc: python3 -c 'l = []\nfor _ in range(32): l.append(b"x" * (256 << 20))\nprint("allocated", len(l))'; echo "exit=$?"`, 1);
    // The process was killed (exit 137), never reached its print; opencode itself lived and ended the turn.
    expect(hostile.output).toMatch(/exit=137/);
    expect(hostile.output).not.toMatch(/allocated 32/);
    const told = await limitsOf(hostile);
    expect(told.map((l) => `${l.kind}:${l.ended}`), JSON.stringify(hostile.events.map((e) => e.type))).toContain('memory:process');
    expect(told[0].message).toMatch(/memory limit of 1\.5 GiB/);
    // The tenant's admins see it in the audit log.
    await expect.poll(async () => (await r.t.opened.db.query(`select details from audit_log where action = 'runtime.limit_reached' and user_id = $1`, [acme.ids.mia])).rows.map((x) => x.details.kind)).toContain('memory');
    const status = await api(r.t, 'GET', '/v1/admin/runtime', { token: acme.tokens.owner });
    await expect.poll(async () => ((await api(r.t, 'GET', '/v1/admin/runtime', { token: acme.tokens.owner })).json.runtime.people as Array<{ handle: string; oomKills: number }>).find((p) => p.handle === 'mia')?.oomKills ?? 0).toBeGreaterThan(0);
    expect(status.status).toBe(200);
  });

  it('burning every core: the other turn completes beside it (equal CPU shares), the hostile tool call ends at its timeout', async () => {
    const hostile = await beside(`run burn 10000: for i in $(seq 16); do timeout 12 sh -c 'while :; do :; done' & done; wait`, 3);
    // The tool call was cut at its timeout: the model is told, the turn goes on and ends.
    expect(hostile.output).toMatch(/timeout|terminated|exceed/i);
    expect(hostile.error).toBeUndefined();
  });

  it('forking 5,000 processes: forks stop at the process limit, the runtime is stopped and the hostile turn ends with a clear error; the other turn completes', async () => {
    const hostile = await beside(`run forks 120000: for i in $(seq 5000); do sleep 60 & done 2>&1 | tail -2; wait`, 2);
    expect(hostile.error, JSON.stringify(hostile.events.map((e) => e.type))).toMatchObject({ code: 'turn_lost' });
    expect(hostile.error.message).toMatch(/process limit of 300/);
    expect((await limitsOf(hostile)).some((l) => l.kind === 'processes')).toBe(true);
    // The next turn gets a fresh runtime, its processes gone.
    const after = await turn(acme.tokens.member, 'run count: ps -e | wc -l');
    expect(after.error).toBeUndefined();
    expect(Number(/\d+/.exec(after.output)?.[0] ?? 999)).toBeLessThan(50);
  });

  it('writing past the quota: one file stops at the quota (the kernel), many files get the runtime stopped (measured), and the next turns are refused until an admin raises it', async () => {
    // One file larger than the whole quota: refused by the kernel at once (RLIMIT_FSIZE). It stops at the
    // quota's size, which the host's measure would find past the quota (and stop the runtime) if it came
    // before the file is removed: removed at once, with nothing run in between.
    const one = await turn(acme.tokens.member, `run bigfile: head -c ${400 * MiB} /dev/zero > big.bin; s=$?; rm -f big.bin; echo "exit=$s"`);
    expect(one.output).toMatch(/exit=153|File size limit exceeded/);
    // Many files, each under it: measured, past the quota the runtime is stopped.
    const hostile = await beside(`run fill 120000: for i in $(seq 20); do head -c ${40 * MiB} /dev/zero > fill-$i.bin; sleep 0.5; done; echo wrote-all`, 4);
    expect(hostile.error, JSON.stringify(hostile.events.map((e) => e.type))).toMatchObject({ code: 'turn_lost' });
    expect(hostile.error.message).toMatch(/quota/);
    expect(hostile.output).not.toMatch(/wrote-all/);
    expect((await limitsOf(hostile)).some((l) => l.kind === 'disk')).toBe(true);
    // The next turn is refused: the workspace is past its quota.
    const refused = await turn(acme.tokens.member, 'run after: echo hello');
    expect(refused.error).toMatchObject({ code: 'workspace_quota_exceeded' });
    expect(refused.error.message).toMatch(/past its quota of 150 MiB/);
    // Status names the person past their quota.
    const people = (await api(r.t, 'GET', '/v1/admin/runtime', { token: acme.tokens.owner })).json.runtime.people as Array<{ handle: string; overQuota: boolean; near: string[] }>;
    expect(people.find((p) => p.handle === 'mia')).toMatchObject({ overQuota: true, near: expect.arrayContaining(['disk']) });
    // An admin raises the quota (400 past the operator's ceiling), and the person cleans up.
    const tooBig = await api(r.t, 'PATCH', '/v1/admin/tenant', { token: acme.tokens.owner, body: { settings: { workspace: { quotaMb: 10_000_000 } } } });
    expect(tooBig.status).toBe(400);
    expect(tooBig.json.message).toMatch(/settings\.workspace\.quotaMb/);
    const raised = await api(r.t, 'PATCH', '/v1/admin/tenant', { token: acme.tokens.owner, body: { settings: { workspace: { quotaMb: 2048 } } } });
    expect(raised.status, raised.text).toBe(200);
    await expect.poll(async () => (await turn(acme.tokens.member, 'run clean: rm -f fill-*.bin; echo cleaned')).output, { timeout: 20_000, interval: 500 }).toMatch(/cleaned/);
  });
});
