import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createOrchestratorRepo } from '../../src/core/orchestrator/orchestrator.repo.js';
import { createOrchestratorService, ORCHESTRATE_STEP_JOB, type OrchestratorService } from '../../src/core/orchestrator/orchestrator.service.js';
import { SUBTASK_STALL_MS, SUBTASK_WALL_MS } from '../../src/core/orchestrator/plan-fns.js';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import type { RuntimeClient } from '../../src/core/runtime/runtime-client.js';
import { createSessionsRepo } from '../../src/core/sessions/sessions.repo.js';
import { createTurnsRepo } from '../../src/core/sessions/turns.repo.js';
import { AGENT_TURN_JOB } from '../../src/core/sessions/turn-runner.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The stall sweep and what follows it, against the real database with a clock the test moves: a
 * running subtask with no runtime event for SUBTASK_STALL_MS is stopped in its runtime and retried in a
 * fresh child session; one waiting for a person's permission answer is not, until SUBTASK_WALL_MS; the
 * third stalled attempt fails it and blocks its dependents.
 */
describe(`orchestrator: stalled subtasks (${DB_MODE})`, () => {
  let env: Awaited<ReturnType<typeof openTestCore>>;
  let service: OrchestratorService;
  let now = new Date('2026-11-25T12:00:00Z');
  const sent: Array<{ name: string; data: any; singletonKey?: string }> = [];
  const aborted: string[] = [];
  let tenantId = '';
  let userId = '';
  let planId = '';

  const runtime = { abort: async (id: string) => void aborted.push(id) } as unknown as RuntimeClient;

  beforeAll(async () => {
    env = await openTestCore();
    const { core, db } = env.opened;
    const seeded = await core.tenants.seedTenant(systemCtx(silentLogger), { name: 'acme', slug: 'acme', ownerEmail: 'owner@acme.example' });
    tenantId = seeded.tenant.id;
    userId = seeded.owner.id;
    const sessionsRepo = createSessionsRepo();
    service = createOrchestratorService({
      db,
      repo: createOrchestratorRepo(),
      sessionsRepo,
      turnsRepo: createTurnsRepo(),
      monthSpent: core.spending.monthSpent,
      audit: core.audit,
      queue: { send: async (name, data, options) => (sent.push({ name, data, singletonKey: options?.singletonKey }), crypto.randomUUID()) },
      runtime: { resolveTurnModel: async () => ({ providerID: 'p', modelID: 'm', ref: 'p/m', source: 'default' as const }) },
      pool: { client: async () => runtime, runningClient: async () => runtime },
      streams: { publish: async () => {} },
      permissionsOf: async () => systemRolePermissions('owner'),
      clock: { now: () => now },
      log: silentLogger,
    });
    // A plan executing: #0 running in a child session since `now`, #1 waiting for it.
    const parent = await sessionsRepo.insert(db, { tenantId, ownerId: userId, title: 'parent', templateSlug: null, systemPrompt: null, model: null, snapshotAt: null, directory: '/tmp/w', channel: 'web', browserSession: null });
    planId = (
      await db.query<{ id: string }>(
        `insert into orchestration_plans (tenant_id, user_id, parent_session_id, job_id, task_description, max_subtasks, status, created_at, updated_at)
         values ($1, $2, $3, $4, 'a task', 5, 'executing', $5, $5) returning id`,
        [tenantId, userId, parent.id, crypto.randomUUID(), now],
      )
    ).rows[0].id;
    const child = await sessionsRepo.insert(db, { tenantId, ownerId: userId, title: 'Subtask #0', templateSlug: null, systemPrompt: null, model: null, snapshotAt: null, directory: '/tmp/w', channel: 'web', browserSession: null, parentId: parent.id, planId });
    await sessionsRepo.bindUpstream(db, tenantId, child.id, 'ses_child_1');
    await db.query(
      `insert into orchestration_subtasks (plan_id, tenant_id, idx, description, dependencies, status, attempt, session_id, started_at, last_event_at)
       values ($1, $2, 0, 'first', '{}', 'running', 1, $3, $4, $4), ($1, $2, 1, 'second', '{0}', 'pending', 0, null, null, null)`,
      [planId, tenantId, child.id, now],
    );
    await db.query(`insert into orchestration_attempts (plan_id, tenant_id, idx, attempt, session_id, started_at) values ($1, $2, 0, 1, $3, $4)`, [planId, tenantId, child.id, now]);
  });
  afterAll(async () => env?.close());

  const at = (ms: number) => (now = new Date(now.getTime() + ms));
  const subtasks = async () => (await service.get(systemCtx(silentLogger, { tenantId }), planId)).subtasks;
  const stalledSteps = () => sent.filter((s) => s.name === ORCHESTRATE_STEP_JOB && s.data.reason === 'stalled');

  it('leaves a subtask alone while it is active, and a quiet one waiting for a permission answer until the wall time', async () => {
    at(SUBTASK_STALL_MS / 2);
    await service.sweepJob(systemCtx(silentLogger));
    expect(stalledSteps()).toHaveLength(0);
    const child = (await subtasks())[0].sessionId;
    await env.opened.db.query(`insert into runtime_permission_requests (id, tenant_id, session_id, permission) values ('per_1', $1, $2, 'bash')`, [tenantId, child]);
    at(SUBTASK_STALL_MS);
    await service.sweepJob(systemCtx(silentLogger));
    expect(stalledSteps()).toHaveLength(0);
    expect(aborted).toEqual([]);
  });

  it('stops a quiet subtask in its runtime and retries it in a fresh child session with the failure in its prompt', async () => {
    await env.opened.db.query(`delete from runtime_permission_requests where id = 'per_1'`);
    await service.sweepJob(systemCtx(silentLogger));
    expect(aborted).toEqual(['ses_child_1']);
    const [step] = stalledSteps();
    expect(step).toMatchObject({ data: { tenantId, planId, reason: 'stalled', error: `no activity for ${SUBTASK_STALL_MS / 60_000} minutes` } });
    await service.stepJob(systemCtx(silentLogger), step.data);
    const [first, second] = await subtasks();
    expect(first).toMatchObject({ status: 'running', attempt: 2 });
    expect(first.sessionId).not.toBe(step.data.sessionId);
    expect(first.attempts).toEqual([
      expect.objectContaining({ attempt: 1, sessionId: step.data.sessionId, error: `no activity for ${SUBTASK_STALL_MS / 60_000} minutes`, endedAt: expect.anything() }),
      expect.objectContaining({ attempt: 2, sessionId: first.sessionId, endedAt: null }),
    ]);
    expect(second.status).toBe('pending');
    const turn = sent.find((s) => s.name === AGENT_TURN_JOB)!;
    expect(turn.singletonKey).toBe(`subtask:${planId}:0:2`);
    const { rows } = await env.opened.db.query<{ parts: Array<{ text: string }> }>(`select parts from agent_turns where id = $1`, [turn.data.turnId]);
    expect(rows[0].parts[0].text).toMatch(/An earlier attempt at this subtask failed \(no activity for 2 minutes\)/);
    // The same stalled step again changes nothing (the attempt it names is over).
    await service.stepJob(systemCtx(silentLogger), step.data);
    expect((await subtasks())[0].attempt).toBe(2);
  });

  it('after the last attempt stalls too it fails, its dependents are blocked, and with nothing completed the plan fails', async () => {
    for (let attempt = 2; attempt <= 3; attempt++) {
      // Even with a permission pending, past the wall time the attempt is stopped.
      const child = (await subtasks())[0].sessionId;
      if (attempt === 3) await env.opened.db.query(`insert into runtime_permission_requests (id, tenant_id, session_id, permission) values ('per_2', $1, $2, 'bash')`, [tenantId, child]);
      at(attempt === 3 ? SUBTASK_WALL_MS + 1000 : SUBTASK_STALL_MS + 1000);
      const before = stalledSteps().length;
      await service.sweepJob(systemCtx(silentLogger));
      const step = stalledSteps()[before];
      expect(step.data.sessionId).toBe(child);
      if (attempt === 3) expect(step.data.error).toBe(`ran longer than ${SUBTASK_WALL_MS / 60_000} minutes`);
      await service.stepJob(systemCtx(silentLogger), step.data);
    }
    const [first, second] = await subtasks();
    expect(first).toMatchObject({ status: 'failed', attempt: 3, error: expect.stringMatching(/^attempt 3 of 3: ran longer than 15 minutes/) });
    expect(second).toMatchObject({ status: 'failed', error: 'blocked by #0' });
    const plan = (await service.get(systemCtx(silentLogger, { tenantId }), planId)).plan;
    expect(plan).toMatchObject({ status: 'failed', error: expect.stringMatching(/no subtask completed \(#0: attempt 3 of 3: .*; #1: blocked by #0\)/) });
    const audit = await env.opened.db.query(`select action, actor from audit_log where target = $1`, [`plan:${planId}`]);
    expect(audit.rows).toEqual([{ action: 'orchestration.fail', actor: 'system:orchestrator' }]);
  });
});
