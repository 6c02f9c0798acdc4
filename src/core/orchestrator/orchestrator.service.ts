import type { Database, Queryable, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, requireTokenScope, tenantOf } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitedError, UnauthenticatedError, ValidationError } from '../../kernel/errors.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import { MEMORY_MCP_SERVER } from '../memories/memory-mcp.js';
import { mcpToolName } from '../runtime/runtime-tools.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { SessionStreams } from '../sessions/session-stream.js';
import type { SessionRow, SessionsRepo } from '../sessions/sessions.repo.js';
import { AGENT_TURN_JOB, TURN_ATTEMPTS, TURN_EXPIRE_S } from '../sessions/turn-runner.js';
import type { OrchestratorRepo, PlanRow, SubtaskRow } from './orchestrator.repo.js';
import {
  allSettled,
  blockedSubtasks,
  extractJson,
  MAX_SUBTASKS_DEFAULT,
  MAX_SUBTASKS_LIMIT,
  PLAN_CONCURRENCY,
  PLAN_REASKS,
  PLAN_STATUSES,
  planningPrompt,
  readySubtasks,
  replanPrompt,
  RESULT_STORED_MAX,
  SUBTASK_RETRIES,
  SUBTASK_STALL_MS,
  SUBTASK_WALL_MS,
  subtaskPrompt,
  synthesisPrompt,
  TASK_DESCRIPTION_MAX,
  TENANT_CONCURRENCY,
  validatePlan,
  type PlanStatus,
} from './plan-fns.js';

/** The planning job POST /v1/orchestrate queues: it creates the plan and starts its planning turn. */
export const ORCHESTRATE_PLAN_JOB = 'orchestrate-plan';
/** A turn of a plan ended (planning, a subtask, the synthesis), or its budget ran out: the plan moves on. */
export const ORCHESTRATE_STEP_JOB = 'orchestrate-step';
/** Every minute: stalled subtasks are stopped and retried; plans whose turn end was missed move on. */
export const ORCHESTRATE_SWEEP_JOB = 'orchestrate-sweep';
export const ORCHESTRATE_SWEEP_CRON = '* * * * *';
/**
 * How plan and step jobs are queued: a step is short (reading a transcript, one transaction), so a job
 * whose worker stopped refreshing it for 15 s lost its worker and is run again (steps are idempotent:
 * each re-reads the plan under lock and does nothing a previous run already did).
 */
const STEP_SEND = { retryLimit: 5, retryDelay: 1, expireInSeconds: 300, heartbeatSeconds: 15 } as const;

/** The planning turn reads, and changes nothing: every tool that writes, runs or fetches is withheld. */
const PLANNING_TOOLS: Record<string, boolean> = Object.fromEntries(
  ['bash', 'edit', 'write', 'patch', 'multiedit', 'apply_patch', 'webfetch', 'websearch', 'task', 'todowrite', 'question', mcpToolName(MEMORY_MCP_SERVER, 'save')].map((t) => [t, false]),
);
/** Subtasks and the synthesis start no subagents of their own (no nesting). */
const SUBTASK_TOOLS: Record<string, boolean> = { task: false, question: false };

export interface PlanData {
  tenantId: string;
  userId: string;
  parentSessionId: string;
  taskDescription: string;
  maxSubtasks: number;
}

export interface StepData {
  tenantId: string;
  planId: string;
  /** The session whose turn ended (absent for a budget check). */
  sessionId?: string;
  reason: 'turn-ended' | 'budget' | 'stalled';
  /** With `stalled`: why the attempt was stopped. */
  error?: string;
  /**
   * With `budget`: the LLM gateway refused a call of the plan for its per-request limit. Calls hold
   * their worst case before they run, so what is recorded stays below the limit; the refusal is what
   * says the budget is spent.
   */
  refused?: boolean;
}

type Outcome = { done: false } | { done: true; error: string | null; text: string };

interface Published {
  sessionId: string;
  type: string;
  properties: Record<string, unknown>;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : undefined);
const roundUsd = (n: number) => Math.round(n * 1e6) / 1e6;

export function publicPlan(p: PlanRow, extra: { costUsd?: number } = {}) {
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

export function publicSubtask(s: SubtaskRow, costUsd?: number) {
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
 * last turn in that session. The graph runs here, in the database, not in the runtime: every move is a
 * transaction (a subtask's completion and the start of the dependents it releases commit together),
 * every turn is a job (started once: singleton keys, the turn runner's message ids), and a worker killed
 * anywhere leaves a state the next job continues from.
 */
export function createOrchestratorService(deps: {
  db: Database;
  repo: OrchestratorRepo;
  sessionsRepo: SessionsRepo;
  /** USD the user recorded this calendar month (what is left of a monthly limit bounds a plan's budget). */
  monthSpent: (tenantId: string, userId: string) => Promise<number>;
  audit: AuditService;
  queue: JobQueue;
  runtime: Pick<RuntimeService, 'resolveModel'>;
  pool: Pick<RuntimePool, 'client' | 'runningClient'>;
  streams: Pick<SessionStreams, 'publish'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  clock: Clock;
  log: Logger;
}) {
  const { db, repo, sessionsRepo, audit, queue, clock, log } = deps;

  function userOf(ctx: Ctx): UserActor {
    if (ctx.actor.kind === 'anonymous') throw new UnauthenticatedError();
    if (ctx.actor.kind !== 'user') throw new ForbiddenError('plans are started by users: the operator reads and cancels them');
    return ctx.actor;
  }

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

  /** What the whole plan may spend: the per-request limit, and what is left of the monthly one. */
  async function budgetOf(tenantId: string, userId: string): Promise<number | null> {
    const { monthly_limit_usd: monthly, per_request_limit_usd: perRequest } = (await deps.permissionsOf(tenantId, userId)).cost;
    const limits: number[] = [];
    if (perRequest !== undefined) limits.push(perRequest);
    if (monthly !== undefined) {
      const spent = await deps.monthSpent(tenantId, userId);
      limits.push(Math.max(0, monthly - spent));
    }
    return limits.length ? Math.min(...limits) : null;
  }

  /** Events to publish once the transaction that decided them has committed. */
  function publishAll(events: Published[]): void {
    for (const e of events) void deps.streams.publish(e.sessionId, e.type, e.properties).catch((err) => log.error({ err: (err as Error).message }, 'could not publish an orchestration event'));
  }

  async function planEvent(plan: PlanRow, type = 'orchestration.plan.updated'): Promise<Published> {
    const fresh = (await repo.plan(db, plan.tenantId, plan.id)) ?? plan;
    return {
      sessionId: plan.parentSessionId,
      type,
      properties: { planId: plan.id, status: fresh.status, ...(fresh.error ? { error: fresh.error } : {}), costUsd: roundUsd(await repo.spent(db, plan.tenantId, plan.id)) },
    };
  }

  async function subtaskEvents(plan: PlanRow, indexes: Iterable<number>): Promise<Published[]> {
    const wanted = new Set(indexes);
    if (!wanted.size) return [];
    const [subs, costs] = await Promise.all([repo.subtasks(db, plan.tenantId, plan.id), repo.subtaskCosts(db, plan.tenantId, plan.id)]);
    return subs
      .filter((s) => wanted.has(s.index))
      .map((s) => ({
        sessionId: plan.parentSessionId,
        type: 'orchestration.subtask.updated',
        properties: { planId: plan.id, index: s.index, status: s.status, costUsd: roundUsd(costs.get(s.index) ?? 0), ...(s.error ? { error: s.error } : {}), attempt: s.attempt },
      }));
  }

  /** Publishes what a committed move changed: the subtasks touched, and the plan when its state moved. */
  async function announce(plan: PlanRow, changed: { subtasks: Set<number>; plan: boolean }): Promise<void> {
    const events = await subtaskEvents(plan, changed.subtasks);
    if (changed.plan) {
      // A plan that starts executing says so before its subtasks start; one that ends, after they did.
      const e = await planEvent(plan);
      if (e.properties.status === 'executing') events.unshift(e);
      else events.push(e);
    }
    publishAll(events);
  }

  /** A new turn in a session, queued in the caller's transaction (the turn runner sends it once). */
  async function queueTurn(tx: Tx, s: SessionRow, text: string, options: { agent: string; tools: Record<string, boolean>; singletonKey: string }): Promise<string> {
    const turnId = await sessionsRepo.insertTurn(tx, {
      tenantId: s.tenantId,
      sessionId: s.id,
      userId: s.ownerId,
      messageId: ascendingId('msg'),
      agent: options.agent,
      agentProfileId: null,
      parts: [{ id: ascendingId('prt'), type: 'text', text }],
      tools: options.tools,
    });
    await sessionsRepo.touch(tx, s.tenantId, s.id);
    await queue.send(AGENT_TURN_JOB, { turnId }, { tx, singletonKey: options.singletonKey, retryLimit: TURN_ATTEMPTS - 1, retryDelay: 1, expireInSeconds: TURN_EXPIRE_S });
    return turnId;
  }

  /** A child session of the plan's parent, in the same workspace and runtime. */
  function childSession(tx: Tx, plan: PlanRow, parent: SessionRow, title: string): Promise<SessionRow> {
    return sessionsRepo.insert(tx, {
      tenantId: plan.tenantId,
      ownerId: plan.userId,
      title: title.slice(0, 200),
      templateSlug: null,
      systemPrompt: parent.systemPrompt,
      model: parent.model,
      snapshotAt: parent.snapshotAt,
      directory: parent.directory,
      channel: parent.channel,
      browserSession: null,
      parentId: parent.id,
      planId: plan.id,
    });
  }

  /**
   * How a turn ended, read from the runtime's transcript: the assistant messages answering its user
   * message; an error on any of them (the provider refused, the turn was aborted) or a turn the runner
   * gave up on is a failure. `done: false` while it has not ended.
   */
  async function turnOutcome(s: SessionRow, turnId: string | null): Promise<Outcome> {
    if (!turnId) return { done: false };
    const turn = await repo.turn(db, s.tenantId, turnId);
    if (!turn) return { done: true, error: 'its turn is gone', text: '' };
    if (turn.status === 'failed') return { done: true, error: turn.error ?? 'the turn could not be sent to the agent runtime', text: '' };
    if (turn.status === 'lost') return { done: true, error: turn.error ?? 'the agent runtime stopped during the turn', text: '' };
    // Handed over: in flight ('sent') or ended ('done'); the transcript says how.
    if (!s.upstreamId || (turn.status !== 'sent' && turn.status !== 'done')) return { done: false };
    const messages = await (await deps.pool.client({ tenantId: s.tenantId, userId: s.ownerId })).messages(s.upstreamId);
    const answers = messages.filter((m) => m.info.role === 'assistant' && m.info.parentID === turn.messageId);
    const failed = answers.find((m) => m.info.error);
    if (failed) {
      const e = failed.info.error as { name?: string; data?: { message?: string } };
      return { done: true, error: `${e.name ?? 'error'}: ${e.data?.message ?? 'the turn failed'}`.slice(0, 500), text: '' };
    }
    const last = answers.at(-1);
    if (!last || !last.info.time.completed) return { done: false };
    const textOf = (m: (typeof answers)[number]) =>
      m.parts
        .filter((p) => p.type === 'text' && !p.synthetic)
        .map((p) => String(p.text ?? ''))
        .join('\n')
        .trim();
    const text = textOf(last) || answers.map(textOf).filter(Boolean).join('\n\n');
    return { done: true, error: null, text };
  }

  async function sessionOf(tenantId: string, id: string | null): Promise<SessionRow | null> {
    return id ? sessionsRepo.byId(db, tenantId, id) : null;
  }

  /** Stops a session's running turn in the runtime; a runtime that does not run has nothing running (never started for this). */
  async function abortSession(s: SessionRow | null): Promise<void> {
    if (!s?.upstreamId) return;
    try {
      await (await deps.pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId }))?.abort(s.upstreamId);
    } catch (err) {
      log.warn({ err: (err as Error).message, sessionId: s.id }, 'could not stop a session of a plan');
    }
  }

  /** Plan failed for good (or completed): its end, audited as what it is. */
  async function finish(tx: Tx, plan: PlanRow, status: 'completed' | 'failed', error: string | null): Promise<void> {
    await repo.updatePlan(tx, plan.tenantId, plan.id, clock.now(), { status, error, finishedAt: clock.now() });
    const ctx = { tenantId: plan.tenantId, actor: { kind: 'system' as const, name: 'orchestrator' }, requestId: plan.id, log, channel: 'worker' };
    await audit.record(tx, ctx, {
      action: status === 'completed' ? 'orchestration.complete' : 'orchestration.fail',
      target: `plan:${plan.id}`,
      sessionId: plan.parentSessionId,
      userId: plan.userId,
      details: { ...(error ? { error } : {}), costUsd: roundUsd(await repo.spent(tx, plan.tenantId, plan.id)) },
    });
  }

  /** Starts an attempt at a subtask: a fresh child session, its turn queued once (singleton key). */
  async function startAttempt(tx: Tx, plan: PlanRow, parent: SessionRow, subs: SubtaskRow[], sub: SubtaskRow, retryOf: string | null): Promise<void> {
    const attempt = sub.attempt + 1;
    const child = await childSession(tx, plan, parent, `Subtask #${sub.index}${attempt > 1 ? ` (attempt ${attempt})` : ''}: ${sub.description}`);
    const dependencies = sub.dependencies.map((d) => {
      const dep = subs.find((s) => s.index === d)!;
      return { index: d, description: dep.description, result: dep.result ?? '', sessionId: dep.sessionId };
    });
    const text = subtaskPrompt({ task: plan.taskDescription, index: sub.index, total: subs.length, description: sub.description, dependencies, retryOf });
    const turnId = await queueTurn(tx, child, text, { agent: 'build', tools: SUBTASK_TOOLS, singletonKey: `subtask:${plan.id}:${sub.index}:${attempt}` });
    const now = clock.now();
    await repo.updateSubtask(tx, plan.tenantId, plan.id, sub.index, { status: 'running', attempt, sessionId: child.id, turnId, startedAt: sub.startedAt ?? now, lastEventAt: now, error: null });
    await repo.insertAttempt(tx, { tenantId: plan.tenantId, planId: plan.id, index: sub.index, attempt, sessionId: child.id, at: now });
    Object.assign(sub, { status: 'running', attempt, sessionId: child.id, turnId });
  }

  /**
   * Moves every executing plan of the tenant on, in the caller's transaction: subtasks a failure
   * blocks fail ("blocked by #k"), ready ones start while the plan (PLAN_CONCURRENCY) and the tenant
   * (TENANT_CONCURRENCY) have room, a plan whose budget is spent stops, a plan whose subtasks all ended
   * goes to synthesis. Returns what changed, by plan.
   */
  async function advance(tx: Tx, tenantId: string): Promise<Map<string, { plan: PlanRow; subtasks: Set<number>; moved: boolean; abort: SessionRow[] }>> {
    const out = new Map<string, { plan: PlanRow; subtasks: Set<number>; moved: boolean; abort: SessionRow[] }>();
    const plans = await repo.lockExecuting(tx, tenantId);
    let tenantRunning = await repo.runningCount(tx, tenantId);
    for (const plan of plans) {
      const changed = { plan, subtasks: new Set<number>(), moved: false, abort: [] as SessionRow[] };
      out.set(plan.id, changed);
      const subs = await repo.subtasks(tx, tenantId, plan.id);
      const parent = await sessionsRepo.byId(tx, tenantId, plan.parentSessionId);
      const now = clock.now();
      if (!plan.stopReason && plan.budgetUsd !== null && (await repo.spent(tx, tenantId, plan.id)) >= plan.budgetUsd) {
        plan.stopReason = `its budget of $${plan.budgetUsd} is spent`;
        await repo.updatePlan(tx, tenantId, plan.id, clock.now(), { stopReason: plan.stopReason });
      }
      if (plan.stopReason) {
        for (const s of subs) {
          if (s.status !== 'running' && s.status !== 'pending') continue;
          const error = s.status === 'running' ? `stopped: ${plan.stopReason}` : `not started: ${plan.stopReason}`;
          if (s.status === 'running') {
            tenantRunning--;
            await repo.endAttempt(tx, tenantId, plan.id, s.index, s.attempt, clock.now(), error);
            const session = s.sessionId ? await sessionsRepo.byId(tx, tenantId, s.sessionId) : null;
            if (session) changed.abort.push(session);
          }
          await repo.updateSubtask(tx, tenantId, plan.id, s.index, { status: 'failed', error, completedAt: now });
          Object.assign(s, { status: 'failed', error });
          changed.subtasks.add(s.index);
        }
      }
      for (const b of blockedSubtasks(subs)) {
        const error = `blocked by #${b.by}`;
        await repo.updateSubtask(tx, tenantId, plan.id, b.index, { status: 'failed', error, completedAt: now });
        Object.assign(subs.find((s) => s.index === b.index)!, { status: 'failed', error });
        changed.subtasks.add(b.index);
      }
      if (allSettled(subs)) {
        changed.moved = true;
        const completed = subs.filter((s) => s.status === 'completed');
        if (!parent || !completed.length) {
          const why = !parent ? 'its session is gone' : `no subtask completed (${subs.map((s) => `#${s.index}: ${s.error ?? s.status}`).join('; ')})`;
          await finish(tx, plan, 'failed', why.slice(0, 2000));
          continue;
        }
        const text = synthesisPrompt({
          task: plan.taskDescription,
          stoppedBecause: plan.stopReason,
          subtasks: subs.map((s) => ({ index: s.index, description: s.description, status: s.status, result: s.result, error: s.error })),
        });
        const turnId = await queueTurn(tx, parent, text, { agent: 'build', tools: SUBTASK_TOOLS, singletonKey: `synthesis:${plan.id}` });
        await repo.updatePlan(tx, tenantId, plan.id, clock.now(), { status: 'synthesizing', synthesisTurnId: turnId });
        continue;
      }
      if (!parent) continue;
      const running = subs.filter((s) => s.status === 'running').length;
      for (const index of readySubtasks(subs, Math.min(PLAN_CONCURRENCY - running, TENANT_CONCURRENCY - tenantRunning))) {
        await startAttempt(tx, plan, parent, subs, subs.find((s) => s.index === index)!, null);
        tenantRunning++;
        changed.subtasks.add(index);
      }
    }
    return out;
  }

  /** Publishes what advance changed and stops the sessions it stopped (after commit). */
  async function afterAdvance(changes: Awaited<ReturnType<typeof advance>>): Promise<void> {
    for (const c of changes.values()) {
      await Promise.all(c.abort.map(abortSession));
      if (c.subtasks.size || c.moved) await announce(c.plan, { subtasks: c.subtasks, plan: c.moved });
    }
  }

  /**
   * A planning or synthesis turn not over after SUBTASK_WALL_MS (its runtime died with it, or it hangs)
   * is stopped and counts as failed, like a stalled subtask.
   */
  async function overdue(plan: PlanRow, session: SessionRow, outcome: Outcome): Promise<Outcome> {
    if (outcome.done || clock.now().getTime() - new Date(plan.updatedAt).getTime() <= SUBTASK_WALL_MS) return outcome;
    await abortSession(session);
    return { done: true, error: `it did not end within ${SUBTASK_WALL_MS / 60_000} minutes`, text: '' };
  }

  /** The planning turn ended: a valid plan starts executing; an invalid one is asked again, then fails. */
  async function planned(plan: PlanRow): Promise<void> {
    const session = await sessionOf(plan.tenantId, plan.planningSessionId);
    if (!session) return;
    const outcome = await overdue(plan, session, await turnOutcome(session, plan.planningTurnId));
    if (!outcome.done) return;
    let errors: string[];
    let subtasks: Array<{ description: string; dependencies: number[] }> = [];
    if (outcome.error) errors = [`the planning turn failed: ${outcome.error}`];
    else {
      const json = extractJson(outcome.text);
      const reading = json === null ? { ok: false as const, errors: ['the answer holds no JSON object'] } : validatePlan(json, plan.maxSubtasks);
      errors = reading.ok ? [] : reading.errors;
      if (reading.ok) subtasks = reading.subtasks;
    }
    let changes: Awaited<ReturnType<typeof advance>> | null = null;
    let moved = false;
    await db.transaction(async (tx) => {
      await repo.lockTenant(tx, plan.tenantId);
      const p = await repo.plan(tx, plan.tenantId, plan.id, { lock: true });
      if (!p || p.status !== 'planning' || p.planningTurnId !== plan.planningTurnId) return;
      moved = true;
      if (!errors.length) {
        await repo.insertSubtasks(tx, p.tenantId, p.id, subtasks);
        await repo.updatePlan(tx, p.tenantId, p.id, clock.now(), { status: 'executing' });
        changes = await advance(tx, p.tenantId);
      } else if (p.planningAttempts <= PLAN_REASKS) {
        const turnId = await queueTurn(tx, session, replanPrompt(errors, p.maxSubtasks), { agent: 'plan', tools: PLANNING_TOOLS, singletonKey: `planning:${p.id}:${p.planningAttempts + 1}` });
        await repo.updatePlan(tx, p.tenantId, p.id, clock.now(), { planningTurnId: turnId, planningAttempts: p.planningAttempts + 1 });
        moved = false;
      } else {
        await finish(tx, p, 'failed', `no valid plan after ${p.planningAttempts} attempts: ${errors.join('; ')}`.slice(0, 2000));
      }
    });
    if (changes) {
      // Every subtask of the new plan is news, once, with the plan's move to executing.
      const mine = (changes as Awaited<ReturnType<typeof advance>>).get(plan.id);
      if (mine) {
        mine.moved = true;
        for (const sub of await repo.subtasks(db, plan.tenantId, plan.id)) mine.subtasks.add(sub.index);
      }
      await afterAdvance(changes);
    } else if (moved) await announce(plan, { subtasks: new Set(), plan: true });
  }

  /** A subtask's turn ended (or it was stopped as stalled): completed, retried, or failed. */
  async function subtaskEnded(plan: PlanRow, sessionId: string, stalled: string | null): Promise<void> {
    const sub = (await repo.subtasks(db, plan.tenantId, plan.id)).find((s) => s.sessionId === sessionId && s.status === 'running');
    const session = await sessionOf(plan.tenantId, sessionId);
    if (!sub || !session) return;
    const outcome: Outcome = stalled ? { done: true, error: stalled, text: '' } : await turnOutcome(session, sub.turnId);
    if (!outcome.done) return;
    let changes: Awaited<ReturnType<typeof advance>> | null = null;
    const touched = new Set<number>([sub.index]);
    await db.transaction(async (tx) => {
      await repo.lockTenant(tx, plan.tenantId);
      const p = await repo.plan(tx, plan.tenantId, plan.id, { lock: true });
      const current = p?.status === 'executing' ? (await repo.subtasks(tx, plan.tenantId, plan.id)).find((s) => s.index === sub.index) : null;
      if (!p || !current || current.status !== 'running' || current.sessionId !== sessionId) return;
      await repo.endAttempt(tx, p.tenantId, p.id, sub.index, current.attempt, clock.now(), outcome.error);
      // No retry once the budget is spent (the gateway would refuse its calls anyway): the plan stops.
      const spentOut = p.budgetUsd !== null && (await repo.spent(tx, p.tenantId, p.id)) >= p.budgetUsd;
      if (outcome.error && current.attempt <= SUBTASK_RETRIES && !p.stopReason && !spentOut) {
        const parent = await sessionsRepo.byId(tx, p.tenantId, p.parentSessionId);
        if (parent) {
          await startAttempt(tx, p, parent, await repo.subtasks(tx, p.tenantId, p.id), current, outcome.error);
          return;
        }
      }
      if (outcome.error) await repo.updateSubtask(tx, p.tenantId, p.id, sub.index, { status: 'failed', error: `attempt ${current.attempt} of ${SUBTASK_RETRIES + 1}: ${outcome.error}`.slice(0, 2000), completedAt: clock.now() });
      else await repo.updateSubtask(tx, p.tenantId, p.id, sub.index, { status: 'completed', result: outcome.text.slice(0, RESULT_STORED_MAX), completedAt: clock.now() });
      changes = await advance(tx, p.tenantId);
    });
    await announce(plan, { subtasks: touched, plan: false });
    if (changes) await afterAdvance(changes);
  }

  /** The synthesis turn ended: the plan is completed, or failed when that turn failed. */
  async function synthesized(plan: PlanRow): Promise<void> {
    const parent = await sessionOf(plan.tenantId, plan.parentSessionId);
    if (!parent) return;
    const outcome = await overdue(plan, parent, await turnOutcome(parent, plan.synthesisTurnId));
    if (!outcome.done) return;
    let moved = false;
    await db.transaction(async (tx) => {
      await repo.lockTenant(tx, plan.tenantId);
      const p = await repo.plan(tx, plan.tenantId, plan.id, { lock: true });
      if (!p || p.status !== 'synthesizing' || p.synthesisTurnId !== plan.synthesisTurnId) return;
      await finish(tx, p, outcome.error ? 'failed' : 'completed', outcome.error ? `the synthesis failed: ${outcome.error}` : null);
      moved = true;
    });
    if (moved) await announce(plan, { subtasks: new Set(), plan: true });
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

  return {
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
      await deps.runtime.resolveModel(tenantId, parent.model);
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
     * ("cancelled"). The owner or the operator; a completed plan is 409, a failed one is left as it is.
     */
    async cancel(ctx: Ctx, planId: string) {
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
        await repo.updatePlan(tx, p.tenantId, p.id, clock.now(), { status: 'failed', error: `cancelled by ${by}`, cancelledAt: now, finishedAt: now });
        await audit.record(tx, { ...ctx, tenantId: p.tenantId }, { action: 'orchestration.cancel', target: `plan:${p.id}`, sessionId: p.parentSessionId, userId: p.userId, details: { from: p.status } });
      });
      if (cancelled) {
        await Promise.all(toStop.map(abortSession));
        await announce(plan, { subtasks: touched, plan: true });
      }
      return get(ctx, planId);
    },

    /** The orchestrate-plan job: creates the plan (once) and queues its planning turn in a child session. */
    async planJob(ctx: Ctx, data: PlanData, job: { id: string }): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.userId) || !isUuid(data?.parentSessionId)) throw new ValidationError('orchestrate-plan: malformed job data');
      const parent = await sessionsRepo.byId(db, data.tenantId, data.parentSessionId);
      if (!parent) {
        ctx.log.warn({ jobId: job.id }, 'the session of a plan is gone before it was planned');
        return;
      }
      const budgetUsd = await budgetOf(data.tenantId, data.userId);
      const { plan, created } = await db.transaction(async (tx) => {
        const r = await repo.insertPlan(tx, { ...data, jobId: job.id, budgetUsd, at: clock.now() });
        if (r.plan.status === 'planning' && !r.plan.planningTurnId) {
          const session = await childSession(tx, r.plan, parent, `Planning: ${r.plan.taskDescription}`);
          const turnId = await queueTurn(tx, session, planningPrompt(r.plan.taskDescription, r.plan.maxSubtasks), { agent: 'plan', tools: PLANNING_TOOLS, singletonKey: `planning:${r.plan.id}:1` });
          await repo.updatePlan(tx, r.plan.tenantId, r.plan.id, clock.now(), { planningSessionId: session.id, planningTurnId: turnId, planningAttempts: 1 });
        }
        return r;
      });
      if (created) {
        publishAll([
          { sessionId: plan.parentSessionId, type: 'orchestration.plan.created', properties: { planId: plan.id, jobId: job.id, status: plan.status, taskDescription: plan.taskDescription, createdAt: iso(plan.createdAt) } },
        ]);
      }
    },

    /** The orchestrate-step job: the plan moves on from the turn that ended (or its budget ran out). */
    async stepJob(ctx: Ctx, data: StepData): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.planId)) throw new ValidationError('orchestrate-step: malformed job data');
      const plan = await repo.plan(db, data.tenantId, data.planId);
      if (!plan || plan.status === 'completed' || plan.status === 'failed') return;
      if (data.reason === 'budget') {
        if (plan.status !== 'executing') return;
        let changes: Awaited<ReturnType<typeof advance>> | null = null;
        await db.transaction(async (tx) => {
          await repo.lockTenant(tx, plan.tenantId);
          const p = data.refused ? await repo.plan(tx, plan.tenantId, plan.id, { lock: true }) : null;
          if (p && p.status === 'executing' && !p.stopReason && p.budgetUsd !== null) {
            await repo.updatePlan(tx, p.tenantId, p.id, clock.now(), { stopReason: `its budget of $${p.budgetUsd} is spent` });
          }
          changes = await advance(tx, plan.tenantId);
        });
        if (changes) await afterAdvance(changes);
        return;
      }
      if (!data.sessionId) return;
      if (plan.status === 'planning' && data.sessionId === plan.planningSessionId) await planned(plan);
      else if (plan.status === 'synthesizing' && data.sessionId === plan.parentSessionId) await synthesized(plan);
      else if (plan.status === 'executing') await subtaskEnded(plan, data.sessionId, data.reason === 'stalled' ? (data.error ?? 'stalled') : null);
      ctx.log.debug({ planId: plan.id, reason: data.reason }, 'plan step');
    },

    /**
     * The orchestrate-sweep job (every minute): a running subtask with no runtime event for
     * SUBTASK_STALL_MS (and nobody being asked a permission) or running for SUBTASK_WALL_MS is stopped
     * and handled as a failed attempt (retried in a fresh session, or failed); a plan planning or
     * synthesising with no change for SUBTASK_STALL_MS is looked at again (a turn end may have been
     * missed while no runtime host was up).
     */
    async sweepJob(ctx: Ctx): Promise<void> {
      const now = clock.now().getTime();
      for (const s of await repo.possiblyStalled(db, new Date(now - SUBTASK_STALL_MS), new Date(now - SUBTASK_WALL_MS))) {
        if (!s.sessionId) continue;
        const overdue = now - new Date(s.attemptStartedAt).getTime() > SUBTASK_WALL_MS;
        if (!overdue && (await repo.asksPermission(db, s.tenantId, s.sessionId))) continue;
        const error = overdue ? `ran longer than ${SUBTASK_WALL_MS / 60_000} minutes` : `no activity for ${SUBTASK_STALL_MS / 60_000} minutes`;
        await abortSession(await sessionOf(s.tenantId, s.sessionId));
        await queue.send(ORCHESTRATE_STEP_JOB, { tenantId: s.tenantId, planId: s.planId, sessionId: s.sessionId, reason: 'stalled', error } satisfies StepData, { ...STEP_SEND, singletonKey: `stalled:${s.sessionId}` }).catch(() => {});
        ctx.log.warn({ planId: s.planId, index: s.index, error }, 'stopped a stalled subtask');
      }
      for (const p of await repo.activeBefore(db, new Date(now - SUBTASK_STALL_MS))) {
        const sessionId = p.status === 'planning' ? p.planningSessionId : p.parentSessionId;
        if (sessionId) await queue.send(ORCHESTRATE_STEP_JOB, { tenantId: p.tenantId, planId: p.id, sessionId, reason: 'turn-ended' } satisfies StepData, { ...STEP_SEND, singletonKey: `recheck:${p.id}` }).catch(() => {});
      }
    },

    /**
     * A turn ended in a session (the session stream heard it, or the turn runner gave up on it): if the
     * session is a plan's child, or a parent whose plan is synthesising, the plan's step job is queued.
     */
    async turnEnded(s: { id: string; tenantId: string; planId: string | null }, eventId: string): Promise<void> {
      const planId = s.planId ?? (await repo.synthesizingIn(db, s.tenantId, s.id));
      if (!planId) return;
      await queue
        .send(ORCHESTRATE_STEP_JOB, { tenantId: s.tenantId, planId, sessionId: s.id, reason: 'turn-ended' } satisfies StepData, { ...STEP_SEND, singletonKey: `step:${s.id}:${eventId}` })
        .catch((err: Error) => {
          // The same turn end heard twice: its step is queued already.
          if (!(err instanceof JobAlreadyQueuedError)) throw err;
        });
    },

    /** The LLM gateway refused a call of the plan for its per-request limit: the plan stops there. */
    async refused(tenantId: string, planId: string): Promise<void> {
      await queue.send(ORCHESTRATE_STEP_JOB, { tenantId, planId, reason: 'budget', refused: true } satisfies StepData, { ...STEP_SEND, singletonKey: `budget-refused:${planId}` }).catch(() => {});
    },

    /** A model call was recorded for a session: when it is a plan's and the plan's budget is spent, the plan stops. */
    async spent(tenantId: string, sessionId: string): Promise<void> {
      const planId = await repo.planOfSession(db, tenantId, sessionId);
      if (!planId) return;
      const plan = await repo.plan(db, tenantId, planId);
      if (!plan || plan.status !== 'executing' || plan.budgetUsd === null || plan.stopReason) return;
      if ((await repo.spent(db, tenantId, planId)) < plan.budgetUsd) return;
      await queue.send(ORCHESTRATE_STEP_JOB, { tenantId, planId, reason: 'budget' } satisfies StepData, { ...STEP_SEND, singletonKey: `budget:${planId}` }).catch(() => {});
    },

    /**
     * What the LLM gateway counts against the per-request limit for a call in one of a plan's child
     * sessions (planning, subtasks): the plan's whole spending, read in the gateway's transaction. The
     * synthesis is a turn of the parent, under the limit like any turn.
     */
    planSpent: (q: Queryable, tenantId: string, planId: string): Promise<number> => repo.spent(q, tenantId, planId),

    /**
     * Whether a queued turn of a plan's session should still go to the runtime: not once its plan has
     * ended, nor for a subtask attempt that was superseded. The reason not to, or null.
     */
    async turnUnwanted(s: SessionRow, turnId: string): Promise<string | null> {
      // The synthesis is a turn of the parent: not once its plan ended (cancelled before it was sent).
      if (!s.planId) return (await repo.endedSynthesis(db, s.tenantId, turnId)) ? 'its plan has ended' : null;
      const plan = await repo.plan(db, s.tenantId, s.planId);
      if (!plan || plan.status === 'completed' || plan.status === 'failed') return 'its plan has ended';
      if (plan.planningSessionId === s.id) return plan.status === 'planning' ? null : 'its plan is past planning';
      const current = (await repo.subtasks(db, s.tenantId, plan.id)).find((x) => x.sessionId === s.id);
      return current?.status === 'running' ? null : 'its subtask attempt was stopped';
    },

    /** Notes a runtime event of a plan's child session (the stall sweep reads it); throttled per session. */
    touch: (() => {
      const last = new Map<string, number>();
      return (tenantId: string, sessionId: string): void => {
        const now = clock.now().getTime();
        if (now - (last.get(sessionId) ?? 0) < 10_000) return;
        if (last.size > 10_000) last.clear();
        last.set(sessionId, now);
        void repo.touchSession(db, tenantId, sessionId, clock.now()).catch(() => last.delete(sessionId));
      };
    })(),
  };
}

export type OrchestratorService = ReturnType<typeof createOrchestratorService>;
