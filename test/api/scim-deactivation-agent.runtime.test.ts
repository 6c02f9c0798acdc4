import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBoss, createJobQueue } from '../../src/jobs/boss.js';
import { startWorker } from '../../src/jobs/worker.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { gatewayCredential, UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';
import { OWNER_INACTIVE } from '../../src/core/sessions/turn-runner.js';
import { PLAN_OWNER_INACTIVE } from '../../src/core/sessions/person-stop.js';
import { sendTurnJob } from '../../src/core/sessions/session-turns.js';
import { ascendingId } from '../../src/core/runtime/runtime-ids.js';
import { api, signToken } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

/**
 * A person deactivated by their identity provider (SCIM `active: false`) while their agent works:
 * against the real runtime in its sandbox, the scripted model and PostgreSQL. Their agent
 * in flight is stopped, a turn they had queued never runs, and a runtime that outlives the deactivation
 * (one the stop could not reach: here the very code path a runner's relay takes, with that runtime's own
 * credential) gets nothing from the gateway host: no model call, memory tool, git or MCP request.
 */
describe("a deactivated person's agent", { timeout: 300_000 }, () => {
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let scimToken = '';
  let max = { id: '', token: '' };
  const core = () => r.t.opened.core;
  const db = () => r.t.opened.db;
  const setActive = (userId: string, active: boolean) =>
    api(r.t, 'PATCH', `/scim/v2/Users/${userId}`, { token: scimToken, headers: { 'content-type': 'application/scim+json' }, body: { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active } }] } });
  const lastUserText = (q: { body: any }) => JSON.stringify(q.body?.messages?.filter((m: any) => m.role === 'user').at(-1) ?? '');

  beforeAll(async () => {
    r = await startRuntimeApp();
    acme = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    scimToken = (await core().scim.createToken(systemCtx(silentLogger, { tenantId: acme.tenantId }), { name: 'idp' })).token;
    const id = (await db().query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'max', 'max@acme.example', 'Max') returning id`, [acme.tenantId])).rows[0].id;
    await db().query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [acme.tenantId, id]);
    max = { id, token: await signToken(r.t, { sub: id, tid: acme.tenantId, roles: ['member'] }) };
  });
  afterAll(async () => {
    await r?.close();
  });

  it('refuses a runtime that outlived its person at the gateway host: the model, the memory tools, git and MCP', async () => {
    const mia = { tenantId: acme.tenantId, userId: acme.ids.mia };
    await agentTurn(r, acme.tokens.member, [{ text: 'Up and running.' }], { text: 'warm up' });
    const handle = await core().pool.runningHandle(mia);
    expect(handle).not.toBeNull();
    // What the runtime's agent holds (and can read): its credential for the gateway host.
    const credential = gatewayCredential(core().config.secrets.encryptionKey, handle!.endpoint.authorization);
    const identity = { ...mia, credential, self: UNKNOWN_SELF };
    // The gateway host as a runner's relay reaches it, for this runtime: it keeps working after the stop.
    const server = http.createServer((req, res) => void core().egress.forRunners.gateway(identity, req, res, new URL(req.url ?? '/', 'http://llm.agentws.internal')));
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const send = (path: string, body: unknown) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, text: await res.text() }));
    const model = () => send('/p/scripted/chat/completions', { model: 'fake-model', stream: false, messages: [{ role: 'user', content: 'a call of the agent itself' }] });
    const memory = () => send('/mcp/memory', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const git = () => fetch(`${base}/git/forge/acme/app.git/info/refs?service=git-upload-pack`, { headers: { authorization: `Bearer ${credential}` } }).then(async (res) => ({ status: res.status, text: await res.text() }));
    const mcp = () => send('/mcp/connectors/tracker', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    try {
      r.llm.script([{ text: 'Allowed.' }]);
      expect(await model()).toMatchObject({ status: 200, text: expect.stringContaining('Allowed.') });
      expect((await memory()).status).toBe(200);
      for (const other of [await git(), await mcp()]) expect(other.text).not.toContain('deactivated');

      const off = await setActive(mia.userId, false);
      expect(off.status, off.text).toBe(200);
      const calls = r.llm.requests.length;
      const refused = await model();
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.text).error).toMatchObject({ code: 'user_deactivated', message: expect.stringContaining('deactivated') });
      for (const other of [await memory(), await git(), await mcp()]) {
        expect(other.status).toBe(403);
        expect(other.text).toContain('deactivated');
      }
      expect(r.llm.requests.length).toBe(calls);
      // Her runtime itself is stopped (once the deactivation committed).
      await expect.poll(() => core().pool.live().map((l) => l.userId)).not.toContain(mia.userId);

      // Reactivated by the identity provider: let through again (within the second "inactive" is reused).
      expect((await setActive(mia.userId, true)).status).toBe(200);
      r.llm.script([{ text: 'Back.' }, { text: 'Back.' }, { text: 'Back.' }]);
      await expect.poll(async () => (await model()).status).toBe(200);
    } finally {
      server.close();
    }
  });

  it('cancels their plan: the running subtask is stopped, the next never starts', async () => {
    const id = (await db().query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'pia', 'pia@acme.example', 'Pia') returning id`, [acme.tenantId])).rows[0].id;
    await db().query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [acme.tenantId, id]);
    const token = await signToken(r.t, { sub: id, tid: acme.tenantId, roles: ['member'] });
    const parent = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'plan' } })).json.sessionId as string;
    const plan = { subtasks: [{ description: 'First: a long one', dependencies: [] }, { description: 'Second: after the first', dependencies: [0] }] };
    const subtasks: number[] = [];
    r.llm.respond((req) => {
      if (/You are planning how to carry out a task/.test(req.allText) && !/You are doing subtask/.test(req.lastUser)) return { text: JSON.stringify(plan) };
      const m = /You are doing subtask #(\d+)/.exec(req.lastUser);
      if (m) {
        subtasks.push(Number(m[1]));
        return { text: 'Took a while.', delayMs: 8000 };
      }
      return undefined;
    });
    const sse = await openSse(`${r.t.url}/v1/sessions/${parent}/events`, { authorization: `Bearer ${token}` });
    try {
      const post = await api(r.t, 'POST', '/v1/orchestrate', { token, body: { parentSessionId: parent, taskDescription: 'Do two things in order', maxSubtasks: 2 } });
      expect(post.status, post.text).toBe(202);
      await sse.until((e) => e.data.type === 'orchestration.subtask.updated' && e.data.properties.status === 'running', 90_000);
      await expect.poll(() => subtasks.length, { timeout: 30_000 }).toBe(1);
      const planId = sse.events.find((e) => e.data.type === 'orchestration.plan.created')!.data.properties.planId as string;

      expect((await setActive(id, false)).status).toBe(200);
      const sys = systemCtx(silentLogger, { tenantId: acme.tenantId });
      await expect.poll(async () => (await core().orchestrator.get(sys, planId)).plan.status).toBe('failed');
      const got = await core().orchestrator.get(sys, planId);
      expect(got.plan.error).toBe(PLAN_OWNER_INACTIVE);
      expect(got.subtasks.map((x) => [x.status, x.error])).toEqual([
        ['failed', 'cancelled'],
        ['failed', 'not started: the plan was cancelled'],
      ]);
      await expect.poll(() => core().pool.live().map((l) => l.userId)).not.toContain(id);
      // Past the first subtask's answer: the second never started.
      await new Promise((res) => setTimeout(res, 9000));
      expect(subtasks).toEqual([0]);
      const cancel = (await db().query<{ actor: string; details: any }>(`select actor, details from audit_log where action = 'orchestration.cancel' and target = $1`, [`plan:${planId}`])).rows;
      expect(cancel).toEqual([{ actor: 'system:scim', details: expect.objectContaining({ reason: PLAN_OWNER_INACTIVE }) }]);
    } finally {
      r.llm.respond(null);
      await sse.close();
    }
  });

  it('stops the runtime of a person removed (`user remove`, DELETE /v1/admin/users/:id), which it did not before', async () => {
    const vic = { tenantId: acme.tenantId, userId: acme.ids.vic };
    await core().pool.prestart(vic);
    expect(core().pool.live().map((l) => l.userId)).toContain(vic.userId);
    const removed = await api(r.t, 'DELETE', `/v1/admin/users/${vic.userId}`, { token: acme.tokens.owner });
    expect(removed.status, removed.text).toBe(204);
    await expect.poll(() => core().pool.live().map((l) => l.userId)).not.toContain(vic.userId);
  });

  it('stops their turn in flight, fails the turn they had queued (it never runs), and says why on its stream', async () => {
    const session = async (title: string) => (await api(r.t, 'POST', '/v1/sessions', { token: max.token, body: { title } })).json.sessionId as string;
    const busy = await session('in flight');
    const waiting = await session('queued');
    const busyStream = await openSse(`${r.t.url}/v1/sessions/${busy}/events`, { authorization: `Bearer ${max.token}` });
    const waitingStream = await openSse(`${r.t.url}/v1/sessions/${waiting}/events`, { authorization: `Bearer ${max.token}` });
    try {
      // In flight: the model asked for a tool, and the turn waits for Max to allow it.
      r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo hi', description: 'say hi' } } }, { text: 'Never said.' }]);
      expect((await api(r.t, 'POST', `/v1/sessions/${busy}/prompt`, { token: max.token, body: { text: 'run a command', agent: 'build' } })).status).toBe(202);
      await busyStream.until((e) => e.data.type === 'permission.asked', 90_000);
      // Queued: accepted while no worker takes jobs, so it waits in the queue.
      await r.worker.stop(2000);
      const prompt = await api(r.t, 'POST', `/v1/sessions/${waiting}/prompt`, { token: max.token, body: { text: 'QUEUED-MARKER do this later', agent: 'build' } });
      expect(prompt.status, prompt.text).toBe(202);
      const queued = (await db().query<{ id: string; status: string }>(`select t.id, t.status from agent_turns t where t.session_id = $1`, [waiting])).rows;
      expect(queued).toEqual([{ id: expect.any(String), status: 'queued' }]);
      const calls = r.llm.requests.length;

      const off = await setActive(max.id, false);
      expect(off.status, off.text).toBe(200);

      // The turn in flight ends with its runtime, which is stopped; the queued one failed, saying why.
      await busyStream.until((e) => e.data.type === 'session.error');
      await expect.poll(() => core().pool.live().map((l) => l.userId)).not.toContain(max.id);
      await waitingStream.until((e) => e.data.type === 'session.error' && e.data.properties.error.message === OWNER_INACTIVE);
      expect((await db().query(`select status, error from agent_turns where id = $1`, [queued[0].id])).rows[0]).toEqual({ status: 'failed', error: OWNER_INACTIVE });
      const entry = (await db().query<{ details: any }>(`select details from audit_log where action = 'user.deactivate' and target = $1`, [`user:${max.id}`])).rows;
      expect(entry).toEqual([{ details: expect.objectContaining({ queuedTurnsFailed: 1 }) }]);

      // A worker takes the queued job now: the turn does not run, no runtime starts, the model hears nothing.
      // (Stopping a worker closes its pg-boss: the new one has its own, as a new `aws worker` would.)
      const boss = createBoss(db(), silentLogger, { supervise: false });
      await boss.start();
      r.worker = await startWorker(core(), boss, silentLogger, { concurrency: 2 });
      await expect.poll(async () => (await db().query<{ state: string }>(`select state from pgboss.job where data->>'turnId' = $1`, [queued[0].id])).rows[0]?.state).toBe('completed');
      expect(core().pool.live().map((l) => l.userId)).not.toContain(max.id);
      expect(r.llm.requests.slice(calls).filter((q) => lastUserText(q).includes('QUEUED-MARKER'))).toEqual([]);
      expect(r.llm.requests.slice(calls).filter((q) => !q.title)).toEqual([]);
      // A turn queued for them afterwards by a path that does not sign them in (a plan moving on, a race
      // with the deactivation): the turn runner asks again before it starts a runtime, and fails it.
      const late = (
        await db().query<{ id: string }>(
          `insert into agent_turns (tenant_id, session_id, user_id, message_id, agent, parts) values ($1, $2, $3, $4, 'build', $5) returning id`,
          [acme.tenantId, waiting, max.id, ascendingId('msg'), JSON.stringify([{ type: 'text', text: 'LATE-MARKER' }])],
        )
      ).rows[0].id;
      await sendTurnJob(createJobQueue(boss, core().bus), late);
      await expect.poll(async () => (await db().query(`select status, error from agent_turns where id = $1`, [late])).rows[0]).toEqual({ status: 'failed', error: OWNER_INACTIVE });
      expect(core().pool.live().map((l) => l.userId)).not.toContain(max.id);
      expect(r.llm.requests.slice(calls).filter((q) => !q.title)).toEqual([]);
      // And Max's credentials are refused.
      expect((await api(r.t, 'GET', '/v1/sessions', { token: max.token })).status).toBe(401);
    } finally {
      await busyStream.close();
      await waitingStream.close();
    }
  });
});
