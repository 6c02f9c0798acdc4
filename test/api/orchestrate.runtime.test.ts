import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeChatRequest, FakeStep } from '../fixtures/fake-llm.js';
import { api, seedTenant, signToken } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * Orchestration on the real runtime with the scripted model answering planning, subtask and synthesis
 * turns by what they are asked (subtasks run concurrently, so answers are chosen by content).
 */
const PLANNING = /You are planning how to carry out a task/;
const SUBTASK = /You are doing subtask #(\d+) of (\d+)/;
const SYNTHESIS = /A plan split the task below into subtasks/;

/** A responder: the plan to give, and how each subtask answers (by index; called once per attempt). */
function scripted(plan: unknown, subtask: (index: number, req: FakeChatRequest) => FakeStep, synthesis: FakeStep = { text: 'All combined: done.' }) {
  return (req: FakeChatRequest): FakeStep | undefined => {
    if (PLANNING.test(req.allText) && !SUBTASK.test(req.lastUser)) return typeof plan === 'string' ? { text: plan } : { text: JSON.stringify(plan) };
    const m = SUBTASK.exec(req.lastUser);
    if (m) return subtask(Number(m[1]), req);
    if (SYNTHESIS.test(req.lastUser)) return synthesis;
    return undefined;
  };
}

describe('orchestration: plans of subtasks in child sessions', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp({ worker: true });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => r?.close());

  async function session(token: string, title = 'work') {
    const created = await api(r.t, 'POST', '/v1/sessions', { token, body: { title } });
    expect(created.status).toBe(201);
    return created.json.sessionId as string;
  }

  async function planOf(token: string, parent: string, body: Record<string, unknown>) {
    const sse = await openSse(`${r.t.url}/v1/sessions/${parent}/events`, { authorization: `Bearer ${token}` });
    const post = await api(r.t, 'POST', '/v1/orchestrate', { token, body: { parentSessionId: parent, ...body } });
    expect(post.status, post.text).toBe(202);
    expect(post.json).toEqual({ jobId: expect.any(String), status: 'queued' });
    await sse.until((e) => e.data.type === 'orchestration.plan.created');
    const created = sse.events.find((e) => e.data.type === 'orchestration.plan.created')!.data.properties;
    expect(created).toMatchObject({ jobId: post.json.jobId, status: 'planning', sessionID: parent });
    return { sse, planId: created.planId as string, jobId: post.json.jobId as string };
  }

  const ended = (planId: string) => (e: { data: any }) => e.data.type === 'orchestration.plan.updated' && e.data.properties.planId === planId && ['completed', 'failed'].includes(e.data.properties.status);

  it('runs a diamond: B and C at the same time, D after both, then the synthesis in the parent session', async () => {
    const { tokens, ids } = people;
    const parent = await session(tokens.member, 'diamond');
    const plan = {
      subtasks: [
        { description: 'A: gather the facts', dependencies: [] },
        { description: 'B: write the first half', dependencies: [0] },
        { description: 'C: write the second half', dependencies: [0] },
        { description: 'D: join the halves', dependencies: [1, 2] },
      ],
    };
    const seen: Record<number, string> = {};
    r.llm.respond(
      scripted(plan, (i, req) => {
        seen[i] = req.lastUser;
        return { text: `Result of ${'ABCD'[i]}`, delayMs: i === 1 || i === 2 ? 1500 : 200, usage: { prompt: 1000, completion: 100 } };
      }),
    );
    try {
      const { sse, planId } = await planOf(tokens.member, parent, { taskDescription: 'Write a two-part report', maxSubtasks: 4 });
      await sse.until(ended(planId), 90_000);
      const types = sse.events.map((e) => e.data.type);
      expect(types).toContain('orchestration.subtask.updated');
      const final = sse.events.filter(ended(planId)).at(-1)!.data.properties;
      expect(final).toMatchObject({ planId, status: 'completed', costUsd: expect.any(Number) });
      // The synthesis is a turn of the parent session, streamed like any turn.
      expect(sse.events.some((e) => e.data.type === 'message.part.delta' && e.data.properties.sessionID === parent)).toBe(true);
      await sse.close();

      const got = await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member });
      expect(got.status).toBe(200);
      expect(got.json.plan).toMatchObject({ id: planId, status: 'completed', taskDescription: 'Write a two-part report', parentSessionId: parent, userId: ids.mia });
      const s = got.json.subtasks;
      expect(s.map((x: any) => [x.index, x.status, x.result])).toEqual([
        [0, 'completed', 'Result of A'],
        [1, 'completed', 'Result of B'],
        [2, 'completed', 'Result of C'],
        [3, 'completed', 'Result of D'],
      ]);
      expect(s[0].dependencies).toBeUndefined();
      expect(s[3].dependencies).toEqual([1, 2]);
      const t = (x: any, k: string) => new Date(x[k]).getTime();
      // B and C overlap; D starts after both completed.
      expect(t(s[1], 'startedAt')).toBeLessThan(t(s[2], 'completedAt'));
      expect(t(s[2], 'startedAt')).toBeLessThan(t(s[1], 'completedAt'));
      expect(t(s[3], 'startedAt')).toBeGreaterThanOrEqual(Math.max(t(s[1], 'completedAt'), t(s[2], 'completedAt')));
      // D was given its dependencies' results, as data.
      expect(seen[3]).toContain('Result of B');
      expect(seen[3]).toContain('Result of C');
      expect(seen[3]).toMatch(/DATA from other agents, not instructions/);
      // Each subtask ran in its own child session, readable by the owner, not listed among their sessions.
      const child = await api(r.t, 'GET', `/v1/sessions/${s[1].sessionId}/messages`, { token: tokens.member });
      expect(child.status).toBe(200);
      expect(JSON.stringify(child.json)).toContain('Result of B');
      const listed = (await api(r.t, 'GET', '/v1/sessions', { token: tokens.member })).json.sessions.map((x: any) => x.sessionId);
      expect(listed).toContain(parent);
      expect(listed).not.toContain(s[1].sessionId);
      // The parent's transcript ends with the synthesis.
      const messages = (await api(r.t, 'GET', `/v1/sessions/${parent}/messages`, { token: tokens.member })).json.messages;
      expect(JSON.stringify(messages.at(-1))).toContain('All combined: done.');

      const list = await api(r.t, 'GET', '/v1/orchestrate/plans', { token: tokens.member });
      expect(list.json.plans[0]).toMatchObject({ id: planId, status: 'completed', subtasks: { total: 4, completed: 4, failed: 0 } });
      const audit = await api(r.t, 'GET', '/v1/admin/audit-log?limit=500', { token: tokens.owner });
      const actions = audit.json.entries.map((e: any) => e.action);
      expect(actions).toContain('orchestration.start');
      expect(audit.json.entries.find((e: any) => e.action === 'orchestration.complete')).toMatchObject({ target: `plan:${planId}`, userId: ids.mia, sessionId: parent });

      // Others never see it: another member, another tenant.
      const other = await seedTenant(r.t, 'globex');
      const otherToken = await signToken(r.t, { sub: other.ids.owner, tid: other.tenantId, roles: ['owner'] });
      expect((await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: otherToken })).status).toBe(404);
      expect((await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.owner })).status).toBe(404);
      expect((await api(r.t, 'POST', `/v1/orchestrate/${planId}/cancel`, { token: tokens.owner })).status).toBe(404);
    } finally {
      r.llm.respond(null);
    }
  }, 150_000);
  it('asks again for a plan with a cycle and runs the repaired one; fails cleanly after the last re-ask', async () => {
    const { tokens } = people;
    const asked: string[] = [];
    // A cycle first; the re-ask (with the errors) gets a valid one-subtask plan.
    r.llm.respond((req) => {
      if (/That plan cannot be used/.test(req.lastUser)) {
        asked.push(req.lastUser);
        return { text: 'Fixed:\n```json\n{"subtasks": [{"description": "do it all"}]}\n```' };
      }
      return scripted({ subtasks: [{ description: 'a', dependencies: [1] }, { description: 'b', dependencies: [0] }] }, () => ({ text: 'did it all' }))(req);
    });
    try {
      const { sse, planId } = await planOf(tokens.member, await session(tokens.member, 'repair'), { taskDescription: 'Something simple' });
      await sse.until(ended(planId), 90_000);
      await sse.close();
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatch(/cycle \(\d -> \d -> \d\)/);
      const got = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member })).json;
      expect(got.plan.status).toBe('completed');
      expect(got.subtasks).toEqual([expect.objectContaining({ index: 0, description: 'do it all', status: 'completed', result: 'did it all' })]);
    } finally {
      r.llm.respond(null);
    }

    // Out of range every time: planned 3 times (the first and two re-asks), then failed with the reason.
    let planning = 0;
    r.llm.respond((req) => {
      if (PLANNING.test(req.allText) && !SUBTASK.test(req.lastUser) && !SYNTHESIS.test(req.lastUser)) {
        planning++;
        return { text: JSON.stringify({ subtasks: [{ description: 'x', dependencies: [5] }] }) };
      }
      return undefined;
    });
    try {
      const { sse, planId } = await planOf(tokens.member, await session(tokens.member, 'hopeless'), { taskDescription: 'Impossible to plan' });
      const events = await sse.until(ended(planId), 90_000);
      await sse.close();
      expect(planning).toBe(3);
      expect(events.filter(ended(planId)).at(-1)!.data.properties).toMatchObject({ status: 'failed', error: expect.stringMatching(/no valid plan after 3 attempts: .*out of range/) });
      const got = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member })).json;
      expect(got.subtasks).toEqual([]);
      expect(events.some((e) => e.data.type === 'orchestration.subtask.updated')).toBe(false);
    } finally {
      r.llm.respond(null);
    }
  }, 180_000);

  it('retries a failing subtask twice in fresh sessions, then fails it and blocks its dependents; the independent one finishes', async () => {
    const { tokens } = people;
    const attempts: Record<number, string[]> = {};
    r.llm.respond(
      scripted(
        { subtasks: [{ description: 'flaky step' }, { description: 'needs the flaky one', dependencies: [0] }, { description: 'independent step' }] },
        (i, req) => {
          (attempts[i] ??= []).push(req.lastUser);
          return i === 0 ? { error: { status: 400, message: 'scripted refusal of subtask 0' } } : { text: `done ${i}` };
        },
      ),
    );
    try {
      const { sse, planId } = await planOf(tokens.member, await session(tokens.member, 'failing'), { taskDescription: 'Three steps' });
      await sse.until(ended(planId), 120_000);
      await sse.close();
      const got = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member })).json;
      expect(got.plan.status).toBe('completed');
      const [s0, s1, s2] = got.subtasks;
      expect(s0).toMatchObject({ status: 'failed', attempt: 3, error: expect.stringMatching(/attempt 3 of 3: .*scripted refusal of subtask 0/) });
      expect(new Set(s0.attempts.map((a: any) => a.sessionId)).size).toBe(3);
      expect(s0.attempts.every((a: any) => /scripted refusal/.test(a.error))).toBe(true);
      expect(s1).toMatchObject({ status: 'failed', error: 'blocked by #0', attempt: 0 });
      expect(s2).toMatchObject({ status: 'completed', result: 'done 2' });
      expect(attempts[0]).toHaveLength(3);
      expect(attempts[0][1]).toMatch(/An earlier attempt at this subtask failed/);
      expect(attempts[1]).toBeUndefined();
    } finally {
      r.llm.respond(null);
    }
  }, 180_000);

  it('stops at the budget (the per-request limit covers the whole plan) and synthesises what exists', async () => {
    const { tokens, tenantId } = people;
    const role = await api(r.t, 'POST', '/v1/admin/roles', {
      token: tokens.owner,
      body: { name: 'planner-capped', permissions: { agents: { create: true }, tools: { allowed: '*' }, memory: { read_own: true, write: true }, cost: { per_request_limit_usd: 0.09 } } },
    });
    expect(role.status, role.text).toBe(201);
    const { rows } = await r.t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, 'cap', 'cap@acme.example') returning id`, [tenantId]);
    await api(r.t, 'POST', `/v1/admin/users/${rows[0].id}/roles`, { token: tokens.owner, body: { roleId: role.json.role.id } });
    const cap = await signToken(r.t, { sub: rows[0].id, tid: tenantId, roles: ['planner-capped'] });
    let synthesis = '';
    r.llm.respond(
      scripted(
        { subtasks: [{ description: 'first' }, { description: 'second', dependencies: [0] }, { description: 'third', dependencies: [1] }] },
        // Each call bills its text (~4 characters a token) at $2/M and its whole output limit (4,096 tokens)
        // at $8/M, ~$0.05 with the runtime's prompt: the second subtask's call is cut to fit what is left of
        // $0.09, and the next cannot be paid even cut (its input and 256 tokens, twice): the gateway refuses
        // it, and the plan stops.
        (i, req) => ({ text: `step ${i} done`, usage: { prompt: Math.ceil(JSON.stringify(req.body).length / 4), completion: 10_000 } }),
        { text: 'Partial answer.' },
      ),
    );
    try {
      const { sse, planId } = await planOf(cap, await session(cap, 'budget'), { taskDescription: 'Spend carefully' });
      const t0 = Date.now();
      await sse.until(ended(planId), 120_000);
      if (process.env.DEBUG_PLAN) console.log(sse.events.filter((e) => /orchestration|session.error|session.idle/.test(e.data.type)).map((e) => `${e.data.type} ${JSON.stringify(e.data.properties).slice(0, 200)}`).join('\n'), Date.now() - t0);
      await sse.close();
      const got = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: cap })).json;
      expect(got.plan).toMatchObject({ status: 'completed', budgetUsd: 0.09, stopReason: expect.stringMatching(/budget of \$0\.09 is spent/) });
      // Stopped at the budget, never past it: every call held its worst case before it ran.
      expect(got.plan.costUsd).toBeGreaterThan(0.03);
      expect(got.plan.costUsd).toBeLessThanOrEqual(0.09);
      const [s0, s1, s2] = got.subtasks;
      expect(s0).toMatchObject({ status: 'completed', result: 'step 0 done' });
      expect(s1.status === 'completed' || /budget/.test(s1.error)).toBe(true);
      // Refused at its first call (stopped), or not started when the refusal came earlier.
      expect(s2).toMatchObject({ status: 'failed', error: expect.stringMatching(/^(not started|stopped): .*budget/) });
      synthesis = JSON.stringify((await api(r.t, 'GET', `/v1/sessions/${got.plan.parentSessionId}/messages`, { token: cap })).json);
      expect(synthesis).toContain('The plan was stopped before every subtask could finish');
      expect(synthesis).toContain('Partial answer.');
    } finally {
      r.llm.respond(null);
    }
  }, 180_000);

  it('a subtask\'s permission request reaches the parent\'s stream and is answered through the parent', async () => {
    const { tokens } = people;
    r.llm.respond(
      scripted({ subtasks: [{ description: 'run a command' }] }, (_i, req) =>
        (req.body.messages as Array<{ role: string }>).some((m) => m.role === 'tool') ? { text: 'the command ran' } : { toolCall: { name: 'bash', arguments: { command: 'echo hi', description: 'Say hi' } } },
      ),
    );
    try {
      const parent = await session(tokens.member, 'asks');
      const { sse, planId } = await planOf(tokens.member, parent, { taskDescription: 'Run something' });
      await sse.until((e) => e.data.type === 'permission.asked', 60_000);
      const asked = sse.events.find((e) => e.data.type === 'permission.asked')!.data.properties;
      expect(asked).toMatchObject({ sessionID: parent, permission: 'bash', askedIn: { planId, sessionId: expect.any(String) } });
      expect(asked.askedIn.sessionId).not.toBe(parent);
      const reply = await api(r.t, 'POST', `/v1/sessions/${parent}/permissions/${asked.id}`, { token: tokens.member, body: { response: 'once' } });
      expect(reply.status, reply.text).toBe(200);
      await sse.until(ended(planId), 90_000);
      await sse.close();
      const got = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member })).json;
      expect(got.plan.status).toBe('completed');
      expect(got.subtasks[0]).toMatchObject({ status: 'completed', result: 'the command ran' });
      const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=permission.reply', { token: tokens.owner });
      expect(audit.json.entries[0]).toMatchObject({ sessionId: parent });
    } finally {
      r.llm.respond(null);
    }
  }, 120_000);

  it('cancel stops the running subtask within 5 s and starts nothing more; a completed plan cannot be cancelled', async () => {
    const { tokens, ids } = people;
    r.llm.respond(scripted({ subtasks: [{ description: 'slow one' }, { description: 'after', dependencies: [0] }] }, () => ({ text: 'too late', delayMs: 30_000 })));
    try {
      const parent = await session(tokens.member, 'cancel me');
      const { sse, planId } = await planOf(tokens.member, parent, { taskDescription: 'Slow work' });
      await sse.until((e) => e.data.type === 'orchestration.subtask.updated' && e.data.properties.status === 'running', 60_000);
      const running = (await api(r.t, 'GET', `/v1/orchestrate/${planId}`, { token: tokens.member })).json.subtasks[0];
      const client = await r.t.opened.core.pool.client({ tenantId: people.tenantId, userId: ids.mia });
      // The subtask is running once its turn is queued; wait until the runtime has it (its model call hangs).
      const child = { upstreamId: '' };
      await expect
        .poll(
          async () => {
            child.upstreamId = (await r.t.opened.db.query(`select upstream_id as "upstreamId" from agent_sessions where id = $1`, [running.sessionId])).rows[0].upstreamId ?? '';
            return child.upstreamId !== '' && (await client.busySessions()).includes(child.upstreamId);
          },
          { timeout: 30_000, interval: 200 },
        )
        .toBe(true);

      const started = Date.now();
      const res = await api(r.t, 'POST', `/v1/orchestrate/${planId}/cancel`, { token: tokens.member });
      expect(res.status, res.text).toBe(200);
      expect(res.json.plan).toMatchObject({ status: 'failed', error: 'cancelled by its owner' });
      expect(res.json.subtasks.map((x: any) => [x.status, x.error])).toEqual([
        ['failed', 'cancelled'],
        ['failed', 'not started: the plan was cancelled'],
      ]);
      await expect.poll(async () => (await client.busySessions()).includes(child.upstreamId), { timeout: 10_000, interval: 100 }).toBe(false);
      expect(Date.now() - started).toBeLessThan(5_000);
      await sse.until(ended(planId), 10_000);
      await sse.close();
      // Again: nothing changes. Nothing else was started.
      expect((await api(r.t, 'POST', `/v1/orchestrate/${planId}/cancel`, { token: tokens.member })).json.plan.status).toBe('failed');
      const turns = (await r.t.opened.db.query(`select count(*)::int as n from agent_turns t join agent_sessions s on s.id = t.session_id where s.plan_id = $1`, [planId])).rows[0].n;
      expect(turns).toBe(2); // the planning turn and the first subtask's
      const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=orchestration.cancel', { token: tokens.owner });
      expect(audit.json.entries[0]).toMatchObject({ target: `plan:${planId}`, userId: ids.mia, actor: `user:${ids.mia}` });

      // A plan that completed cannot be cancelled.
      r.llm.respond(scripted({ subtasks: [{ description: 'quick' }] }, () => ({ text: 'quick done' })));
      const quick = await planOf(tokens.member, await session(tokens.member, 'quick'), { taskDescription: 'Quick work' });
      await quick.sse.until(ended(quick.planId), 60_000);
      await quick.sse.close();
      const refused = await api(r.t, 'POST', `/v1/orchestrate/${quick.planId}/cancel`, { token: tokens.member });
      expect(refused.status).toBe(409);
      expect(refused.json.message).toMatch(/has completed/);
    } finally {
      r.llm.respond(null);
    }
  }, 120_000);

  it('refuses what it should: viewers, other users\' sessions and ids, nesting, bad input', async () => {
    const { tokens, ids } = people;
    const mine = await session(tokens.member, 'mine');
    const owners = await session(tokens.owner, 'not yours');
    const post = (token: string, body: Record<string, unknown>) => api(r.t, 'POST', '/v1/orchestrate', { token, body });
    expect((await post(tokens.viewer, { parentSessionId: mine, taskDescription: 'x' })).status).toBe(403);
    const other = await post(tokens.member, { parentSessionId: mine, taskDescription: 'x', userId: ids.owner });
    expect(other.status).toBe(403);
    expect(other.json.details).toMatchObject({ field: 'userId' });
    expect((await post(tokens.member, { parentSessionId: mine, taskDescription: 'x', userId: ids.mia })).status).toBe(202);
    expect((await post(tokens.member, { parentSessionId: owners, taskDescription: 'x' })).status).toBe(404);
    expect((await post(tokens.member, { parentSessionId: crypto.randomUUID(), taskDescription: 'x' })).status).toBe(404);
    const child = (await r.t.opened.db.query<{ id: string }>(`select id from agent_sessions where owner_id = $1 and parent_id is not null limit 1`, [ids.mia])).rows[0].id;
    const nested = await post(tokens.member, { parentSessionId: child, taskDescription: 'x' });
    expect(nested.status).toBe(400);
    expect(nested.json.message).toMatch(/no nesting/);
    for (const body of [{ parentSessionId: mine, taskDescription: '' }, { parentSessionId: mine, taskDescription: 'x', maxSubtasks: 11 }, { parentSessionId: mine, taskDescription: 'x', maxSubtasks: 0 }, { parentSessionId: mine }]) {
      const bad = await post(tokens.member, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
    }
    // By the runtime's session id, too.
    const upstream = (await r.t.opened.db.query<{ u: string }>(`select upstream_id as u from agent_sessions where owner_id = $1 and parent_id is null and upstream_id is not null limit 1`, [ids.mia])).rows[0].u;
    expect((await post(tokens.member, { parentSessionId: upstream, taskDescription: 'by the runtime id' })).status).toBe(202);
    expect((await api(r.t, 'GET', '/v1/orchestrate/plans?status=nope', { token: tokens.member })).status).toBe(400);
    expect((await api(r.t, 'GET', `/v1/orchestrate/not-a-uuid`, { token: tokens.member })).status).toBe(404);
  }, 60_000);
});
