import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws plan list|show|cancel` run in-process (the built CLI), acting as the operator (system:cli). Plans are
 * inserted with SQL (making one for real needs an agent runtime); their sessions have no runtime
 * session, so cancelling has nothing to stop in a runtime.
 */
describe(`plan commands (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand(args, { env: t.env });
  const sql = async <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => (await t.opened.db.query<T>(text, params)).rows;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  /** acme: executing (4 subtasks: completed, running, 2 pending) and completed; beta: failed and planning. */
  const plans = { executing: '', completed: '', failed: '', planning: '' };
  let parent = '';
  const child: string[] = [];

  async function session(tenantId: string, ownerId: string, extra: { parentId?: string; planId?: string } = {}): Promise<string> {
    const [{ id }] = await sql<{ id: string }>(
      `insert into agent_sessions (tenant_id, owner_id, title, directory, parent_id, plan_id) values ($1, $2, 'work', '/tmp/x', $3, $4) returning id`,
      [tenantId, ownerId, extra.parentId ?? null, extra.planId ?? null],
    );
    return id;
  }

  async function plan(p: { tenantId: string; userId: string; parentSessionId: string; task: string; status: string; minutesAgo: number; error?: string; budgetUsd?: number }): Promise<string> {
    const [{ id }] = await sql<{ id: string }>(
      `insert into orchestration_plans (tenant_id, user_id, parent_session_id, job_id, task_description, max_subtasks, status, error, budget_usd, created_at, updated_at, finished_at)
       values ($1, $2, $3, gen_random_uuid(), $4, 5, $5, $6, $7, now() - make_interval(mins => $8::int), now() - make_interval(mins => $8::int),
               case when $5 in ('completed', 'failed') then now() end)
       returning id`,
      [p.tenantId, p.userId, p.parentSessionId, p.task, p.status, p.error ?? null, p.budgetUsd ?? null, p.minutesAgo],
    );
    return id;
  }

  async function subtask(planId: string, tenantId: string, s: { index: number; description: string; dependencies?: number[]; status: string; attempt?: number; sessionId?: string; result?: string }) {
    await sql(
      `insert into orchestration_subtasks (plan_id, tenant_id, idx, description, dependencies, status, attempt, session_id, result, started_at, completed_at)
       values ($1, $2, $3, $4, $5::int[], $6, $7, $8, $9, case when $6 <> 'pending' then now() end, case when $6 = 'completed' then now() end)`,
      [planId, tenantId, s.index, s.description, `{${(s.dependencies ?? []).join(',')}}`, s.status, s.attempt ?? 0, s.sessionId ?? null, s.result ?? null],
    );
    if (s.sessionId) {
      await sql(`insert into orchestration_attempts (plan_id, tenant_id, idx, attempt, session_id, ended_at) values ($1, $2, $3, 1, $4, case when $5 = 'completed' then now() end)`, [
        planId,
        tenantId,
        s.index,
        s.sessionId,
        s.status,
      ]);
    }
  }

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'ann', roles: ['member'] }]);
    beta = await seedTenant(t, 'beta', [{ handle: 'zoe', roles: ['member'] }]);

    parent = await session(acme.tenantId, acme.ids.ann);
    plans.executing = await plan({ tenantId: acme.tenantId, userId: acme.ids.ann, parentSessionId: parent, task: 'Write a two-part report\non the quarter, with a summary of every team and a long tail of details', status: 'executing', minutesAgo: 3, budgetUsd: 1.5 });
    child.push(await session(acme.tenantId, acme.ids.ann, { parentId: parent, planId: plans.executing }));
    child.push(await session(acme.tenantId, acme.ids.ann, { parentId: parent, planId: plans.executing }));
    await subtask(plans.executing, acme.tenantId, { index: 0, description: 'A: gather the facts', status: 'completed', attempt: 1, sessionId: child[0], result: 'Result of A' });
    await subtask(plans.executing, acme.tenantId, { index: 1, description: 'B: write the first half', dependencies: [0], status: 'running', attempt: 1, sessionId: child[1] });
    await subtask(plans.executing, acme.tenantId, { index: 2, description: 'C: write the second half', dependencies: [0, 1], status: 'pending' });
    await subtask(plans.executing, acme.tenantId, { index: 3, description: 'D: join the halves', dependencies: [2], status: 'pending' });
    await sql(`insert into usage_records (tenant_id, user_id, session_id, model, cost_usd) values ($1, $2, $3, 'm', 0.25), ($1, $2, $4, 'm', 0.125)`, [acme.tenantId, acme.ids.ann, child[0], child[1]]);

    plans.completed = await plan({ tenantId: acme.tenantId, userId: acme.ids.ann, parentSessionId: parent, task: 'Say hello', status: 'completed', minutesAgo: 2 });
    await subtask(plans.completed, acme.tenantId, { index: 0, description: 'hello', status: 'completed', attempt: 1, sessionId: await session(acme.tenantId, acme.ids.ann, { parentId: parent, planId: plans.completed }), result: 'hello' });

    const betaParent = await session(beta.tenantId, beta.ids.zoe);
    plans.failed = await plan({ tenantId: beta.tenantId, userId: beta.ids.zoe, parentSessionId: betaParent, task: 'Break things', status: 'failed', minutesAgo: 1, error: 'no subtask completed (#0: boom)' });
    await subtask(plans.failed, beta.tenantId, { index: 0, description: 'break', status: 'failed' });
    await sql(`update orchestration_subtasks set error = 'boom', completed_at = now() where plan_id = $1`, [plans.failed]);
    plans.planning = await plan({ tenantId: beta.tenantId, userId: beta.ids.zoe, parentSessionId: betaParent, task: 'Plan a party', status: 'planning', minutesAgo: 4 });
    const planning = await session(beta.tenantId, beta.ids.zoe, { parentId: betaParent, planId: plans.planning });
    await sql(`update orchestration_plans set planning_session_id = $2, planning_attempts = 1 where id = $1`, [plans.planning, planning]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('list: every tenant\'s plans newest first (table and --json), --status, --tenant, --limit', async () => {
    const all = await run(['plan', 'list', '--json']);
    expect(all.code, all.stderr).toBe(0);
    const doc = JSON.parse(all.stdout);
    expect(Object.keys(doc)).toEqual(['plans']);
    expect(doc.plans.map((p: any) => p.id)).toEqual([plans.failed, plans.completed, plans.executing, plans.planning]);
    expect(doc.plans[2]).toMatchObject({
      id: plans.executing,
      tenantId: acme.tenantId,
      status: 'executing',
      userId: acme.ids.ann,
      parentSessionId: parent,
      budgetUsd: 1.5,
      subtasks: { total: 4, pending: 2, running: 1, completed: 1, failed: 0 },
    });
    expect(doc.plans[0]).toMatchObject({ tenantId: beta.tenantId, status: 'failed', error: 'no subtask completed (#0: boom)', subtasks: { total: 1, failed: 1 } });

    const human = await run(['plan', 'list']);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+SUBTASKS\s+FAILED\s+CREATED\s+TASK$/);
    expect(lines).toHaveLength(5);
    // The task on one line, shortened.
    expect(lines[3]).toMatch(new RegExp(`^${plans.executing}\\s+executing\\s+1/4\\s+0\\s+\\d{4}-\\d\\d-\\d\\dT\\S+\\s+Write a two-part report on the quarter, with a summary of e…$`));
    expect(lines[1]).toMatch(new RegExp(`^${plans.failed}\\s+failed\\s+0/1\\s+1\\s+\\S+\\s+Break things$`));

    const ids = async (args: string[]) => {
      const r = await run(['plan', 'list', ...args, '--json']);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout).plans.map((p: any) => p.id);
    };
    expect(await ids(['--status', 'completed'])).toEqual([plans.completed]);
    expect(await ids(['--tenant', 'beta'])).toEqual([plans.failed, plans.planning]);
    expect(await ids(['--tenant', acme.tenantId, '--status', 'executing'])).toEqual([plans.executing]);
    expect(await ids(['--limit', '2'])).toEqual([plans.failed, plans.completed]);

    const none = await run(['plan', 'list', '--tenant', 'beta', '--status', 'synthesizing']);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/No plans in status synthesizing/);
    expect(JSON.parse((await run(['plan', 'list', '--tenant', 'beta', '--status', 'synthesizing', '--json'])).stdout)).toEqual({ plans: [] });

    // Flag mistakes and an unknown tenant: exit 1 with a message.
    const badStatus = await run(['plan', 'list', '--status', 'running']);
    expect(badStatus.code).toBe(1);
    expect(badStatus.stderr).toMatch(/--status/);
    expect((await run(['plan', 'list', '--limit', '101'])).code).toBe(1);
    const noTenant = await run(['plan', 'list', '--tenant', 'nope', '--json']);
    expect(noTenant.code).toBe(1);
    expect(JSON.parse(noTenant.stdout).error).toBe('not_found');
  });

  it('show: the plan and its subtasks (--json: the service\'s document); an unknown id is exit 1', async () => {
    const r = await run(['plan', 'show', plans.executing, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(Object.keys(doc).sort()).toEqual(['plan', 'subtasks']);
    expect(doc.plan).toMatchObject({ id: plans.executing, tenantId: acme.tenantId, status: 'executing', userId: acme.ids.ann, parentSessionId: parent, costUsd: 0.375, budgetUsd: 1.5 });
    expect(doc.plan.taskDescription).toMatch(/^Write a two-part report\non the quarter/);
    expect(doc.subtasks.map((s: any) => [s.index, s.status, s.dependencies, s.result, s.attempt, s.costUsd])).toEqual([
      [0, 'completed', undefined, 'Result of A', 1, 0.25],
      [1, 'running', [0], undefined, 1, 0.125],
      [2, 'pending', [0, 1], undefined, 0, 0],
      [3, 'pending', [2], undefined, 0, 0],
    ]);
    expect(doc.subtasks[0].attempts).toEqual([{ attempt: 1, sessionId: child[0], startedAt: expect.any(String), endedAt: expect.any(String), error: null }]);
    expect(doc.subtasks[1]).toMatchObject({ sessionId: child[1], attempts: [{ attempt: 1, sessionId: child[1], endedAt: null }] });

    const human = await run(['plan', 'show', plans.executing]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^status\s+executing$/m);
    expect(human.stdout).toMatch(new RegExp(`^owner\\s+${acme.ids.ann}$`, 'm'));
    expect(human.stdout).toMatch(/^cost\s+\$0\.375000$/m);
    expect(human.stdout).toMatch(/^budget\s+\$1\.500000$/m);
    expect(human.stdout).toMatch(/^INDEX\s+STATUS\s+DEPS\s+ATTEMPTS\s+COST\s+SUBTASK\s+OUTCOME$/m);
    expect(human.stdout).toMatch(/^0\s+completed\s+-\s+1\s+\$0\.250000\s+A: gather the facts\s+Result of A$/m);
    expect(human.stdout).toMatch(/^2\s+pending\s+0,1\s+0\s+\$0\.000000\s+C: write the second half\s+-$/m);

    const failed = await run(['plan', 'show', plans.failed]);
    expect(failed.stdout).toMatch(/^error\s+no subtask completed \(#0: boom\)$/m);
    expect(failed.stdout).toMatch(/^0\s+failed\s+-\s+0\s+\$0\.000000\s+break\s+error: boom$/m);
    expect(failed.stdout).toMatch(/^budget\s+no limit$/m);

    for (const id of ['0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11', 'nope']) {
      const missing = await run(['plan', 'show', id]);
      expect(missing.code).toBe(1);
      expect(missing.stdout).toBe('');
      expect(missing.stderr).toMatch(/^Error: plan not found$/m);
    }
    const missingJson = await run(['plan', 'show', '0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11', '--json']);
    expect(missingJson.code).toBe(1);
    expect(JSON.parse(missingJson.stdout)).toEqual({ error: 'not_found', message: 'plan not found' });
    expect((await run(['plan', 'show'])).code).toBe(1);
  });

  it('cancel: an executing plan fails, its running and pending subtasks with it, audited as the operator; a completed plan is exit 1', async () => {
    const r = await run(['plan', 'cancel', plans.executing, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(Object.keys(doc).sort()).toEqual(['plan', 'subtasks']);
    expect(doc.plan).toMatchObject({ id: plans.executing, status: 'failed', error: 'cancelled by the operator', finishedAt: expect.any(String) });
    expect(doc.subtasks.map((s: any) => [s.index, s.status, s.result ?? null, s.error ?? null])).toEqual([
      [0, 'completed', 'Result of A', null],
      [1, 'failed', null, 'cancelled'],
      [2, 'failed', null, 'not started: the plan was cancelled'],
      [3, 'failed', null, 'not started: the plan was cancelled'],
    ]);
    expect(doc.subtasks[1].attempts).toEqual([expect.objectContaining({ attempt: 1, endedAt: expect.any(String), error: 'cancelled' })]);
    // What the next reader sees.
    expect(JSON.parse((await run(['plan', 'show', plans.executing, '--json'])).stdout).plan).toMatchObject({ status: 'failed', error: 'cancelled by the operator' });
    expect(JSON.parse((await run(['plan', 'list', '--status', 'executing', '--json'])).stdout).plans).toEqual([]);

    const audit = async (planId: string) =>
      sql<{ action: string; actor: string; tenant_id: string; details: unknown }>(`select action, actor, tenant_id, details from audit_log where target = $1 order by ts`, [`plan:${planId}`]);
    expect(await audit(plans.executing)).toMatchObject([{ action: 'orchestration.cancel', actor: 'system:cli', tenant_id: acme.tenantId, details: { from: 'executing' } }]);

    // Again: it has already ended (failed), so nothing changes and nothing more is audited.
    const again = await run(['plan', 'cancel', plans.executing, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).plan).toMatchObject({ status: 'failed', error: 'cancelled by the operator' });
    expect(await audit(plans.executing)).toHaveLength(1);

    // Without --json: the new status on stderr, nothing on stdout (a plan still planning, of the other tenant).
    const human = await run(['plan', 'cancel', plans.planning]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toBe('');
    expect(human.stderr).toBe(`plan ${plans.planning} is failed: cancelled by the operator\n`);
    expect(await audit(plans.planning)).toMatchObject([{ action: 'orchestration.cancel', actor: 'system:cli', tenant_id: beta.tenantId, details: { from: 'planning' } }]);

    const completed = await run(['plan', 'cancel', plans.completed]);
    expect(completed.code).toBe(1);
    expect(completed.stderr).toMatch(/^Error: the plan has completed: there is nothing to cancel$/m);
    const completedJson = await run(['plan', 'cancel', plans.completed, '--json']);
    expect(completedJson.code).toBe(1);
    expect(JSON.parse(completedJson.stdout)).toEqual({ error: 'conflict', message: 'the plan has completed: there is nothing to cancel' });
    expect(JSON.parse((await run(['plan', 'show', plans.completed, '--json'])).stdout).plan.status).toBe('completed');
    expect(await audit(plans.completed)).toEqual([]);

    const missing = await run(['plan', 'cancel', '0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^Error: plan not found$/m);
  });
});
