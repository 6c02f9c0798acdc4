import type { Database, Queryable, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import { ValidationError } from '../../kernel/errors.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { MEMORY_MCP_SERVER } from '../memories/memory-mcp.js';
import { mcpToolName } from '../runtime/runtime-tools.js';
import type { SessionStreams } from '../sessions/session-stream.js';
import { abortRunningTurn, insertChildSession, queueTurn as queueSessionTurn, textTurn, turnOutcome as readTurnOutcome, type TurnOutcome } from '../sessions/session-turns.js';
import type { SessionRow, SessionsRepo } from '../sessions/sessions.repo.js';
import type { TurnsRepo } from '../sessions/turns.repo.js';
import type { OrchestratorRepo, PlanRow, SubtaskRow } from './orchestrator.repo.js';
import {
  allSettled,
  blockedSubtasks,
  extractJson,
  PLAN_CONCURRENCY,
  PLAN_REASKS,
  planningPrompt,
  readySubtasks,
  replanPrompt,
  RESULT_STORED_MAX,
  SUBTASK_RETRIES,
  SUBTASK_STALL_MS,
  SUBTASK_WALL_MS,
  subtaskPrompt,
  synthesisPrompt,
  TENANT_CONCURRENCY,
  validatePlan,
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
export const STEP_SEND = { retryLimit: 5, retryDelay: 1, expireInSeconds: 300, heartbeatSeconds: 15 } as const;

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

type Outcome = TurnOutcome;

interface Published {
  sessionId: string;
  type: string;
  properties: Record<string, unknown>;
}

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : undefined);
export const roundUsd = (n: number) => Math.round(n * 1e6) / 1e6;

/**
 * A plan's state machine: the jobs that move a plan on (planning, each subtask's attempts, the
 * synthesis) and the hooks other capabilities call when a turn of a plan's session ends or its spending
 * moves. The pure rules are in plan-fns.ts; the API (who may start, read and cancel) in
 * orchestrator.service.ts. The graph runs here, in the database, not in the runtime: every move is a
 * transaction (a subtask's completion and the start of the dependents it releases commit together),
 * every turn is a job (started once: singleton keys, the turn runner's message ids), and a worker killed
 * anywhere leaves a state the next job continues from.
 */
export interface PlanRunnerDeps {
  db: Database;
  repo: OrchestratorRepo;
  sessionsRepo: SessionsRepo;
  turnsRepo: Pick<TurnsRepo, 'insertTurn' | 'turn'>;
  /** USD the user recorded this calendar month (what is left of a monthly limit bounds a plan's budget). */
  monthSpent: (tenantId: string, userId: string) => Promise<number>;
  audit: AuditService;
  queue: JobQueue;
  pool: Pick<RuntimePool, 'client' | 'runningClient'>;
  streams: Pick<SessionStreams, 'publish'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Whether the plan's person is still active (auth/active-users.ts); absent: always. */
  ownerActive?: (tenantId: string, userId: string) => Promise<boolean>;
  clock: Clock;
  log: Logger;
}

export function createPlanRunner(deps: PlanRunnerDeps) {
  const { db, repo, sessionsRepo, audit, queue, clock, log } = deps;

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
    return (await queueSessionTurn(tx, { repo: sessionsRepo, turnsRepo: deps.turnsRepo, queue }, textTurn(s, text, options), { singletonKey: options.singletonKey })).turnId;
  }

  /** A child session of the plan's parent, in the same workspace and runtime. */
  function childSession(tx: Tx, plan: PlanRow, parent: SessionRow, title: string): Promise<SessionRow> {
    return insertChildSession(tx, sessionsRepo, parent, { ownerId: plan.userId, title, planId: plan.id });
  }

  /** How a turn of a plan's session ended (the sessions capability reads the transcript). */
  const turnOutcome = (s: SessionRow, turnId: string | null): Promise<Outcome> => readTurnOutcome({ db, turnsRepo: deps.turnsRepo, pool: deps.pool }, s, turnId);

  async function sessionOf(tenantId: string, id: string | null): Promise<SessionRow | null> {
    return id ? sessionsRepo.byId(db, tenantId, id) : null;
  }

  /** Stops a session's running turn in the runtime (never starts a runtime for it). */
  const abortSession = (s: SessionRow | null): Promise<void> =>
    abortRunningTurn(deps.pool, s, (err) => log.warn({ err: err.message, sessionId: s?.id }, 'could not stop a session of a plan'));

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

  return {
    /** What the whole plan may spend (the API checks it before queueing a plan). */
    budgetOf,
    /** Stops a session's running turn (cancel stops a plan's). */
    abortSession,
    /** Publishes what a committed move changed. */
    announce,

    /** The orchestrate-plan job: creates the plan (once) and queues its planning turn in a child session. */
    async planJob(ctx: Ctx, data: PlanData, job: { id: string }): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.userId) || !isUuid(data?.parentSessionId)) throw new ValidationError('orchestrate-plan: malformed job data');
      const parent = await sessionsRepo.byId(db, data.tenantId, data.parentSessionId);
      if (!parent) {
        ctx.log.warn({ jobId: job.id }, 'the session of a plan is gone before it was planned');
        return;
      }
      // Deactivated since they asked for it: no plan is made in their name.
      if (deps.ownerActive && !(await deps.ownerActive(data.tenantId, data.userId))) {
        ctx.log.info({ jobId: job.id, userId: data.userId }, 'a plan was not made: its person was deactivated');
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
