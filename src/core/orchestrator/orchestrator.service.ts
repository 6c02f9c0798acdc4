import { isUuid } from '../../lib/ids.js';
import { requirePermission, requireTokenScope, requireUser, tenantOf } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitedError, ValidationError } from '../../kernel/errors.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { SessionRow } from '../sessions/sessions.repo.js';
import type { PlanRow, SubtaskRow } from './orchestrator.repo.js';
import { MAX_SUBTASKS_DEFAULT, MAX_SUBTASKS_LIMIT, PLAN_STATUSES, TASK_DESCRIPTION_MAX, type PlanStatus } from './plan-fns.js';
import { createPlanRunner, ORCHESTRATE_PLAN_JOB, roundUsd, STEP_SEND, type PlanData, type PlanRunnerDeps } from './plan-runner.js';

// Names the composition root and tests import from here; the jobs they name live in plan-runner.ts.
export { ORCHESTRATE_PLAN_JOB, ORCHESTRATE_STEP_JOB, ORCHESTRATE_SWEEP_CRON, ORCHESTRATE_SWEEP_JOB } from './plan-runner.js';

function publicPlan(p: PlanRow, extra: { costUsd?: number } = {}) {
  return {
    id: p.id,
    status: p.status,
    taskDescription: p.taskDescription,
    createdAt: p.createdAt,
    updatedAt: p.updatedAt,
    parentSessionId: p.parentSessionId,
    userId: p.userId,
    jobId: p.jobId,
    maxSubtasks: p.maxSubtasks,
    ...(p.error ? { error: p.error } : {}),
    ...(p.stopReason ? { stopReason: p.stopReason } : {}),
    ...(p.finishedAt ? { finishedAt: p.finishedAt } : {}),
    budgetUsd: p.budgetUsd,
    ...(extra.costUsd !== undefined ? { costUsd: roundUsd(extra.costUsd) } : {}),
  };
}

function publicSubtask(s: SubtaskRow, costUsd?: number) {
  return {
    index: s.index,
    description: s.description,
    status: s.status,
    ...(s.status === 'completed' && s.result !== null ? { result: s.result } : {}),
    ...(s.startedAt ? { startedAt: s.startedAt } : {}),
    ...(s.completedAt && s.status === 'completed' ? { completedAt: s.completedAt } : {}),
    ...(s.dependencies.length ? { dependencies: s.dependencies } : {}),
    ...(s.error ? { error: s.error } : {}),
    ...(s.status === 'failed' && s.completedAt ? { failedAt: s.completedAt } : {}),
    attempt: s.attempt,
    ...(s.sessionId ? { sessionId: s.sessionId } : {}),
    ...(costUsd !== undefined ? { costUsd: roundUsd(costUsd) } : {}),
  };
}

/**
 * Orchestration: a task planned into a dependency graph, each subtask run as its own turn in a child
 * session of the user's session (in their runtime, so in their sandbox), the results synthesised by a
 * last turn in that session. This is its API (who may start, list, read and cancel plans); the state
 * machine that runs a plan is plan-runner.ts, whose jobs and hooks the service hands on unchanged.
 */
export function createOrchestratorService(deps: PlanRunnerDeps & { runtime: Pick<RuntimeService, 'resolveTurnModel'> }) {
  const { db, repo, sessionsRepo, audit, queue, clock } = deps;
  const runner = createPlanRunner(deps);
  const { budgetOf, abortSession, announce } = runner;


  const userOf = (ctx: Ctx): UserActor => requireUser(ctx, 'plans');

  /** A plan the caller may see: their own (a user), any of the tenant (the operator); else 404. */
  async function visiblePlan(ctx: Ctx, planId: string): Promise<PlanRow> {
    if (!isUuid(planId)) throw new NotFoundError('plan not found');
    let tenantId: string | null;
    if (ctx.actor.kind === 'system') tenantId = ctx.tenantId ?? (await repo.tenantOfPlan(db, planId));
    else tenantId = tenantOf(ctx);
    const plan = tenantId ? await repo.plan(db, tenantId, planId) : null;
    if (!plan || (ctx.actor.kind === 'user' && plan.userId !== ctx.actor.userId)) throw new NotFoundError('plan not found');
    return plan;
  }

  /** One plan with its subtasks (SPEC.md shape, plus costs, attempts and their sessions). */
  async function get(ctx: Ctx, planId: string) {
    const plan = await visiblePlan(ctx, planId);
    const [subs, costs, spent, attempts] = await Promise.all([
      repo.subtasks(db, plan.tenantId, plan.id),
      repo.subtaskCosts(db, plan.tenantId, plan.id),
      repo.spent(db, plan.tenantId, plan.id),
      repo.attempts(db, plan.tenantId, plan.id),
    ]);
    return {
      plan: { ...publicPlan(plan, { costUsd: spent }), tenantId: plan.tenantId, ...(plan.planningSessionId ? { planningSessionId: plan.planningSessionId } : {}) },
      subtasks: subs.map((s) => ({ ...publicSubtask(s, costs.get(s.index) ?? 0), attempts: attempts.filter((a) => a.index === s.index).map(({ index: _i, ...a }) => a) })),
    };
  }

  const service = {
    /**
     * POST /v1/orchestrate: queues the planning job for a session the caller owns (by our id or the
     * runtime's), after the checks a prompt gets (agents.create, cost limits, a ready runtime). The
     * plan itself is created by that job (SPEC.md); the job and the audit entry commit together.
     */
    async start(ctx: Ctx, input: { parentSessionId: string; taskDescription: string; maxSubtasks?: number; userId?: string }): Promise<{ jobId: string; status: 'queued' }> {
      const tenantId = requirePermission(ctx, 'agents.create');
      const actor = userOf(ctx);
      if (input.userId !== undefined && input.userId !== actor.userId) {
        throw new ForbiddenError('userId: a plan runs as the caller; it may only name yourself', { details: { field: 'userId' } });
      }
      const task = typeof input.taskDescription === 'string' ? input.taskDescription.trim() : '';
      if (!task) throw new ValidationError('taskDescription: must not be empty', { details: { field: 'taskDescription' } });
      if (task.length > TASK_DESCRIPTION_MAX) throw new ValidationError(`taskDescription: at most ${TASK_DESCRIPTION_MAX} characters`, { details: { field: 'taskDescription' } });
      const maxSubtasks = input.maxSubtasks ?? MAX_SUBTASKS_DEFAULT;
      if (!Number.isInteger(maxSubtasks) || maxSubtasks < 1 || maxSubtasks > MAX_SUBTASKS_LIMIT) {
        throw new ValidationError(`maxSubtasks: a whole number from 1 to ${MAX_SUBTASKS_LIMIT}`, { details: { field: 'maxSubtasks' } });
      }
      const parent = await repo.ownSession(db, tenantId, actor.userId, String(input.parentSessionId ?? ''));
      if (!parent) throw new NotFoundError('session not found', { details: { field: 'parentSessionId' } });
      if (parent.parentId) throw new ValidationError('parentSessionId: a plan\'s own sessions cannot start plans (no nesting)', { details: { field: 'parentSessionId' } });
      const budget = await budgetOf(tenantId, actor.userId);
      if (budget !== null && budget <= 0) {
        throw new RateLimitedError('your cost limits leave nothing for a plan to spend', { code: 'cost_limit_exceeded', details: { budgetUsd: budget } });
      }
      // The plan's turns run on the session's model: the person's choice must still be theirs to make.
      await deps.runtime.resolveTurnModel(tenantId, { session: parent.chosenModel, template: parent.model }, actor.permissions);
      return db.transaction(async (tx) => {
        const data: PlanData = { tenantId, userId: actor.userId, parentSessionId: parent.id, taskDescription: task, maxSubtasks };
        const jobId = await queue.send(ORCHESTRATE_PLAN_JOB, data, { tx, ...STEP_SEND });
        await audit.record(tx, ctx, { action: 'orchestration.start', target: `job:${jobId}`, sessionId: parent.id, details: { maxSubtasks, budgetUsd: budget } });
        return { jobId, status: 'queued' as const };
      });
    },

    /** The caller's plans, newest first (the operator: every plan of the tenant, or of every tenant). */
    async list(ctx: Ctx, input: { status?: string; limit?: number }) {
      const limit = input.limit ?? 20;
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ValidationError('limit: a whole number from 1 to 100', { details: { field: 'limit' } });
      if (input.status !== undefined && !(PLAN_STATUSES as readonly string[]).includes(input.status)) {
        throw new ValidationError(`status: one of ${PLAN_STATUSES.join(', ')}`, { details: { field: 'status' } });
      }
      const status = input.status as PlanStatus | undefined;
      let rows;
      if (ctx.actor.kind === 'system') rows = await repo.list(db, { tenantId: ctx.tenantId, userId: null, status, limit });
      else {
        const actor = userOf(ctx);
        rows = await repo.list(db, { tenantId: actor.tenantId, userId: actor.userId, status, limit });
      }
      return {
        plans: rows.map((p) => {
          const n = (k: keyof typeof p.counts) => Number(p.counts?.[k] ?? 0);
          const counts = { pending: n('pending'), running: n('running'), completed: n('completed'), failed: n('failed') };
          return { ...publicPlan(p), tenantId: p.tenantId, subtasks: { total: counts.pending + counts.running + counts.completed + counts.failed, ...counts } };
        }),
      };
    },

    /** One plan with its subtasks (SPEC.md shape, plus costs, attempts and their sessions). */
    get,

    /**
     * Stops a plan: its running turns are aborted, pending subtasks never start, the plan is `failed`
     * ("cancelled", or `o.reason`). The owner or the operator; a completed plan is 409, a failed one is
     * left as it is.
     */
    async cancel(ctx: Ctx, planId: string, o: { reason?: string } = {}) {
      requireTokenScope(ctx, 'sessions');
      const plan = await visiblePlan(ctx, planId);
      if (plan.status === 'completed') throw new ConflictError('the plan has completed: there is nothing to cancel');
      if (plan.status === 'failed') return get(ctx, planId);
      const toStop: Array<SessionRow | null> = [];
      const touched = new Set<number>();
      let cancelled = false;
      await db.transaction(async (tx) => {
        await repo.lockTenant(tx, plan.tenantId);
        const p = await repo.plan(tx, plan.tenantId, plan.id, { lock: true });
        // It completed while we looked: that is still a completed plan.
        if (p?.status === 'completed') throw new ConflictError('the plan has completed: there is nothing to cancel');
        if (!p || p.status === 'failed') return;
        cancelled = true;
        const now = clock.now();
        for (const s of await repo.subtasks(tx, p.tenantId, p.id)) {
          if (s.status !== 'running' && s.status !== 'pending') continue;
          if (s.status === 'running') {
            await repo.endAttempt(tx, p.tenantId, p.id, s.index, s.attempt, clock.now(), 'cancelled');
            if (s.sessionId) toStop.push(await sessionsRepo.byId(tx, p.tenantId, s.sessionId));
          }
          await repo.updateSubtask(tx, p.tenantId, p.id, s.index, { status: 'failed', error: s.status === 'running' ? 'cancelled' : 'not started: the plan was cancelled', completedAt: now });
          touched.add(s.index);
        }
        if (p.status === 'planning' && p.planningSessionId) toStop.push(await sessionsRepo.byId(tx, p.tenantId, p.planningSessionId));
        // The synthesis is a turn of the parent session: stopping it stops what runs there (a turn the
        // person started meanwhile waits behind it in the runtime, so it is the synthesis).
        if (p.status === 'synthesizing') toStop.push(await sessionsRepo.byId(tx, p.tenantId, p.parentSessionId));
        const by = ctx.actor.kind === 'user' ? 'its owner' : 'the operator';
        await repo.updatePlan(tx, p.tenantId, p.id, clock.now(), { status: 'failed', error: o.reason ?? `cancelled by ${by}`, cancelledAt: now, finishedAt: now });
        await audit.record(tx, { ...ctx, tenantId: p.tenantId }, { action: 'orchestration.cancel', target: `plan:${p.id}`, sessionId: p.parentSessionId, userId: p.userId, details: { from: p.status, ...(o.reason ? { reason: o.reason } : {}) } });
      });
      if (cancelled) {
        await Promise.all(toStop.map(abortSession));
        await announce(plan, { subtasks: touched, plan: true });
      }
      return get(ctx, planId);
    },

    /**
     * Cancels every unfinished plan of a person (their deactivation), as the operator would, with `reason`
     * as each plan's error. How many were cancelled.
     */
    async cancelAllOf(ctx: Ctx, owner: { tenantId: string; userId: string }, reason: string): Promise<number> {
      const open = (await repo.list(db, { tenantId: owner.tenantId, userId: owner.userId, limit: 1000 })).filter((p) => p.status !== 'completed' && p.status !== 'failed');
      for (const p of open) await service.cancel({ ...ctx, tenantId: owner.tenantId }, p.id, { reason });
      return open.length;
    },

    /** The orchestrate-plan job: creates the plan (once) and queues its planning turn in a child session. */
    planJob: runner.planJob,
    /** The orchestrate-step job: the plan moves on from the turn that ended (or its budget ran out). */
    stepJob: runner.stepJob,
    /** The orchestrate-sweep job (every minute): stalled subtasks stopped, missed turn ends looked at again. */
    sweepJob: runner.sweepJob,
    /** A turn ended in a session: when it is a plan's, the plan's step job is queued. */
    turnEnded: runner.turnEnded,
    /** The LLM gateway refused a call of the plan for its per-request limit: the plan stops there. */
    refused: runner.refused,
    /** A model call was recorded for a session: a plan whose budget is spent stops. */
    spent: runner.spent,
    /** What the LLM gateway counts against the per-request limit for a call of a plan's child session. */
    planSpent: runner.planSpent,
    /** Whether a queued turn of a plan's session should still go to the runtime (a reason not to, or null). */
    turnUnwanted: runner.turnUnwanted,
    /** Notes a runtime event of a plan's child session (the stall sweep reads it); throttled per session. */
    touch: runner.touch,
  };
  return service;
}

export type OrchestratorService = ReturnType<typeof createOrchestratorService>;
