import type { Queryable } from '../../db/database.js';
import type { PlanStatus, SubtaskStatus } from './plan-fns.js';

export interface PlanRow {
  id: string;
  tenantId: string;
  userId: string;
  parentSessionId: string;
  jobId: string;
  taskDescription: string;
  maxSubtasks: number;
  status: PlanStatus;
  error: string | null;
  budgetUsd: number | null;
  stopReason: string | null;
  planningSessionId: string | null;
  planningAttempts: number;
  planningTurnId: string | null;
  synthesisTurnId: string | null;
  cancelledAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

export interface SubtaskRow {
  planId: string;
  tenantId: string;
  index: number;
  description: string;
  dependencies: number[];
  status: SubtaskStatus;
  attempt: number;
  sessionId: string | null;
  turnId: string | null;
  result: string | null;
  error: string | null;
  startedAt: Date | null;
  completedAt: Date | null;
  lastEventAt: Date | null;
}

const PLAN = `p.id, p.tenant_id as "tenantId", p.user_id as "userId", p.parent_session_id as "parentSessionId", p.job_id as "jobId",
  p.task_description as "taskDescription", p.max_subtasks as "maxSubtasks", p.status, p.error, p.budget_usd::float8 as "budgetUsd",
  p.stop_reason as "stopReason", p.planning_session_id as "planningSessionId", p.planning_attempts as "planningAttempts",
  p.planning_turn_id as "planningTurnId", p.synthesis_turn_id as "synthesisTurnId", p.cancelled_at as "cancelledAt",
  p.created_at as "createdAt", p.updated_at as "updatedAt", p.finished_at as "finishedAt"`;

const SUBTASK = `s.plan_id as "planId", s.tenant_id as "tenantId", s.idx as index, s.description, s.dependencies, s.status, s.attempt,
  s.session_id as "sessionId", s.turn_id as "turnId", s.result, s.error, s.started_at as "startedAt", s.completed_at as "completedAt",
  s.last_event_at as "lastEventAt"`;

/** Columns of a plan a step may change (camelCase -> column). */
const PLAN_FIELDS = {
  status: 'status',
  error: 'error',
  stopReason: 'stop_reason',
  planningSessionId: 'planning_session_id',
  planningAttempts: 'planning_attempts',
  planningTurnId: 'planning_turn_id',
  synthesisTurnId: 'synthesis_turn_id',
  cancelledAt: 'cancelled_at',
  finishedAt: 'finished_at',
} as const;
const SUBTASK_FIELDS = {
  status: 'status',
  attempt: 'attempt',
  sessionId: 'session_id',
  turnId: 'turn_id',
  result: 'result',
  error: 'error',
  startedAt: 'started_at',
  completedAt: 'completed_at',
  lastEventAt: 'last_event_at',
} as const;

function setClause<F extends Record<string, string>>(fields: F, changes: Partial<Record<keyof F, unknown>>, first: number): { sql: string; values: unknown[] } {
  const parts: string[] = [];
  const values: unknown[] = [];
  for (const [k, col] of Object.entries(fields)) {
    if (!(k in changes)) continue;
    values.push(changes[k as keyof F]);
    parts.push(`${col} = $${first + values.length - 1}`);
  }
  return { sql: parts.join(', '), values };
}

/** All SQL of orchestration. Every statement names the tenant. */
export function createOrchestratorRepo() {
  return {
    /** Creates the plan of a planning job once: a retried job finds the one it made (false: not new). */
    async insertPlan(
      q: Queryable,
      p: { tenantId: string; userId: string; parentSessionId: string; jobId: string; taskDescription: string; maxSubtasks: number; budgetUsd: number | null; at: Date },
    ): Promise<{ plan: PlanRow; created: boolean }> {
      const { rows } = await q.query<PlanRow>(
        `insert into orchestration_plans as p (tenant_id, user_id, parent_session_id, job_id, task_description, max_subtasks, budget_usd, created_at, updated_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $8) on conflict (job_id) do nothing returning ${PLAN}`,
        [p.tenantId, p.userId, p.parentSessionId, p.jobId, p.taskDescription, p.maxSubtasks, p.budgetUsd, p.at],
      );
      if (rows[0]) return { plan: rows[0], created: true };
      const existing = await q.query<PlanRow>(`select ${PLAN} from orchestration_plans p where p.job_id = $1 and p.tenant_id = $2`, [p.jobId, p.tenantId]);
      return { plan: existing.rows[0], created: false };
    },

    async plan(q: Queryable, tenantId: string, id: string, options: { lock?: boolean } = {}): Promise<PlanRow | null> {
      const { rows } = await q.query<PlanRow>(`select ${PLAN} from orchestration_plans p where p.id = $1 and p.tenant_id = $2${options.lock ? ' for update' : ''}`, [id, tenantId]);
      return rows[0] ?? null;
    },

    /** Plans newest first: a user's, or (userId null) the tenant's, or (tenantId null, the operator) everyone's. */
    async list(q: Queryable, f: { tenantId: string | null; userId: string | null; status?: PlanStatus; limit: number }): Promise<Array<PlanRow & { counts: Record<SubtaskStatus, number> }>> {
      const { rows } = await q.query<PlanRow & { counts: Record<SubtaskStatus, number> }>(
        `select ${PLAN},
           (select json_build_object(
              'pending', count(*) filter (where s.status = 'pending'), 'running', count(*) filter (where s.status = 'running'),
              'completed', count(*) filter (where s.status = 'completed'), 'failed', count(*) filter (where s.status = 'failed'))
              from orchestration_subtasks s where s.plan_id = p.id) as counts
           from orchestration_plans p
          where ($1::uuid is null or p.tenant_id = $1) and ($2::uuid is null or p.user_id = $2) and ($3::text is null or p.status = $3)
          order by p.created_at desc, p.id limit $4`,
        [f.tenantId, f.userId, f.status ?? null, f.limit],
      );
      return rows;
    },

    /** The tenant of a plan, for the operator (who names plans by id alone). */
    async tenantOfPlan(q: Queryable, id: string): Promise<string | null> {
      const { rows } = await q.query<{ tenantId: string }>(`select tenant_id as "tenantId" from orchestration_plans where id = $1`, [id]);
      return rows[0]?.tenantId ?? null;
    },

    /**
     * A live session of this user that a plan may start from, named by our id or by the runtime's
     * (`ses_…`, what a runtime client knows); null when it is not theirs.
     */
    async ownSession(q: Queryable, tenantId: string, userId: string, ref: string): Promise<{ id: string; model: string | null; chosenModel: string | null; parentId: string | null } | null> {
      const byOurs = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref);
      const { rows } = await q.query<{ id: string; model: string | null; chosenModel: string | null; parentId: string | null }>(
        `select id, model, chosen_model as "chosenModel", parent_id as "parentId" from agent_sessions
          where ${byOurs ? 'id = $1' : 'upstream_id = $1'} and tenant_id = $2 and owner_id = $3 and deleted_at is null`,
        [ref, tenantId, userId],
      );
      return rows[0] ?? null;
    },

    /** The plan a child session belongs to. */
    async planOfSession(q: Queryable, tenantId: string, sessionId: string): Promise<string | null> {
      const { rows } = await q.query<{ planId: string | null }>(`select plan_id as "planId" from agent_sessions where id = $1 and tenant_id = $2`, [sessionId, tenantId]);
      return rows[0]?.planId ?? null;
    },

    /** `at`: the service's clock (updated_at is compared with it: a plan's turn overdue). */
    async updatePlan(q: Queryable, tenantId: string, id: string, at: Date, changes: Partial<Record<keyof typeof PLAN_FIELDS, unknown>>): Promise<void> {
      const set = setClause(PLAN_FIELDS, changes, 4);
      await q.query(`update orchestration_plans set ${set.sql ? `${set.sql}, ` : ''}updated_at = $3 where id = $1 and tenant_id = $2`, [id, tenantId, at, ...set.values]);
    },

    async insertSubtasks(q: Queryable, tenantId: string, planId: string, subtasks: Array<{ description: string; dependencies: number[] }>): Promise<void> {
      await q.query(
        `insert into orchestration_subtasks (plan_id, tenant_id, idx, description, dependencies)
         select $1, $2, t.ord - 1, t.description, coalesce((select array_agg(d::int) from jsonb_array_elements_text(t.deps) d), '{}')
           from unnest($3::text[], $4::jsonb[]) with ordinality as t(description, deps, ord)`,
        [planId, tenantId, subtasks.map((s) => s.description), subtasks.map((s) => JSON.stringify(s.dependencies))],
      );
    },

    async subtasks(q: Queryable, tenantId: string, planId: string): Promise<SubtaskRow[]> {
      const { rows } = await q.query<SubtaskRow>(`select ${SUBTASK} from orchestration_subtasks s where s.plan_id = $1 and s.tenant_id = $2 order by s.idx`, [planId, tenantId]);
      return rows;
    },

    async updateSubtask(q: Queryable, tenantId: string, planId: string, index: number, changes: Partial<Record<keyof typeof SUBTASK_FIELDS, unknown>>): Promise<void> {
      const set = setClause(SUBTASK_FIELDS, changes, 4);
      if (!set.sql) return;
      await q.query(`update orchestration_subtasks set ${set.sql} where plan_id = $1 and tenant_id = $2 and idx = $3`, [planId, tenantId, index, ...set.values]);
    },

    /**
     * Serialises every move of the tenant's plans until the transaction ends: steps of two plans of one
     * tenant count the same free slots, and would otherwise lock each other's plans in opposite orders.
     * (On the embedded database transactions run one at a time anyway; its advisory locks do nothing.)
     */
    async lockTenant(q: Queryable, tenantId: string): Promise<void> {
      await q.query(`select pg_advisory_xact_lock(hashtextextended('orchestrator:' || $1::text, 0))`, [tenantId]);
    },

    /**
     * The tenant's executing plans, oldest first, locked: whoever starts subtasks holds them, so two
     * steps of one tenant never both count a free slot.
     */
    async lockExecuting(q: Queryable, tenantId: string): Promise<PlanRow[]> {
      const { rows } = await q.query<PlanRow>(`select ${PLAN} from orchestration_plans p where p.tenant_id = $1 and p.status = 'executing' order by p.created_at, p.id for update`, [tenantId]);
      return rows;
    },

    async runningCount(q: Queryable, tenantId: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from orchestration_subtasks where tenant_id = $1 and status = 'running'`, [tenantId]);
      return rows[0].n;
    },

    /** Whether this turn is the synthesis of a plan that has ended (a synthesis queued, then the plan cancelled). */
    async endedSynthesis(q: Queryable, tenantId: string, turnId: string): Promise<boolean> {
      const { rows } = await q.query(`select 1 from orchestration_plans where tenant_id = $1 and synthesis_turn_id = $2 and status in ('completed', 'failed')`, [tenantId, turnId]);
      return rows.length > 0;
    },

    /** The plan synthesising in this (parent) session, if any. */
    async synthesizingIn(q: Queryable, tenantId: string, parentSessionId: string): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `select id from orchestration_plans where tenant_id = $1 and parent_session_id = $2 and status = 'synthesizing' order by created_at limit 1`,
        [tenantId, parentSessionId],
      );
      return rows[0]?.id ?? null;
    },

    /**
     * USD the plan has spent: every model call of its child sessions (planning, every attempt of every
     * subtask), and of its parent session since the synthesis turn was queued.
     */
    async spent(q: Queryable, tenantId: string, planId: string): Promise<number> {
      const { rows } = await q.query<{ spent: string | null }>(
        `select (coalesce((select sum(u.cost_usd) from usage_records u join agent_sessions c on c.id = u.session_id
                            where u.tenant_id = $1 and c.plan_id = $2 and c.tenant_id = $1), 0)
               + coalesce((select sum(u.cost_usd) from orchestration_plans p join agent_turns t on t.id = p.synthesis_turn_id
                             join usage_records u on u.session_id = p.parent_session_id and u.tenant_id = $1 and u.created_at >= t.created_at
                            where p.id = $2 and p.tenant_id = $1), 0))::text as spent`,
        [tenantId, planId],
      );
      return Number(rows[0].spent ?? 0);
    },

    /** USD each subtask spent over all its attempts (by index). */
    async subtaskCosts(q: Queryable, tenantId: string, planId: string): Promise<Map<number, number>> {
      const { rows } = await q.query<{ index: number; cost: string }>(
        `select a.idx as index, coalesce(sum(u.cost_usd), 0)::text as cost
           from orchestration_attempts a left join usage_records u on u.session_id = a.session_id and u.tenant_id = a.tenant_id
          where a.plan_id = $1 and a.tenant_id = $2
          group by a.idx`,
        [planId, tenantId],
      );
      return new Map(rows.map((r) => [r.index, Number(r.cost)]));
    },

    async insertAttempt(q: Queryable, a: { tenantId: string; planId: string; index: number; attempt: number; sessionId: string; at: Date }): Promise<void> {
      await q.query(`insert into orchestration_attempts (plan_id, tenant_id, idx, attempt, session_id, started_at) values ($1, $2, $3, $4, $5, $6)`, [
        a.planId,
        a.tenantId,
        a.index,
        a.attempt,
        a.sessionId,
        a.at,
      ]);
    },

    async endAttempt(q: Queryable, tenantId: string, planId: string, index: number, attempt: number, at: Date, error: string | null): Promise<void> {
      await q.query(`update orchestration_attempts set ended_at = $5, error = $6 where plan_id = $1 and tenant_id = $2 and idx = $3 and attempt = $4 and ended_at is null`, [
        planId,
        tenantId,
        index,
        attempt,
        at,
        error,
      ]);
    },

    async attempts(q: Queryable, tenantId: string, planId: string): Promise<Array<{ index: number; attempt: number; sessionId: string; startedAt: Date; endedAt: Date | null; error: string | null }>> {
      const { rows } = await q.query<{ index: number; attempt: number; sessionId: string; startedAt: Date; endedAt: Date | null; error: string | null }>(
        `select idx as index, attempt, session_id as "sessionId", started_at as "startedAt", ended_at as "endedAt", error
           from orchestration_attempts where plan_id = $1 and tenant_id = $2 order by idx, attempt`,
        [planId, tenantId],
      );
      return rows;
    },

    /**
     * Running subtasks of every tenant whose current attempt may be stalled: no event since
     * `quietSince`, or the attempt started before `startedBefore` (`attemptStartedAt`).
     */
    async possiblyStalled(q: Queryable, quietSince: Date, startedBefore: Date): Promise<Array<SubtaskRow & { attemptStartedAt: Date }>> {
      // Maintenance across tenants (the sweep), by time alone; each row names its tenant.
      const { rows } = await q.query<SubtaskRow & { attemptStartedAt: Date }>(
        `select ${SUBTASK}, a.started_at as "attemptStartedAt" from orchestration_subtasks s
           join orchestration_attempts a on a.plan_id = s.plan_id and a.idx = s.idx and a.attempt = s.attempt
          where s.status = 'running' and (coalesce(s.last_event_at, a.started_at) < $1 or a.started_at < $2)
          order by a.started_at limit 200`,
        [quietSince, startedBefore],
      );
      return rows;
    },

    /** Whether a person is being asked for a permission in this session (then it is not stalled). */
    async asksPermission(q: Queryable, tenantId: string, sessionId: string): Promise<boolean> {
      const { rows } = await q.query(`select 1 from runtime_permission_requests where tenant_id = $1 and session_id = $2 limit 1`, [tenantId, sessionId]);
      return rows.length > 0;
    },

    /** Notes a runtime event of a subtask's session (throttled by the caller). */
    async touchSession(q: Queryable, tenantId: string, sessionId: string, at: Date): Promise<void> {
      await q.query(`update orchestration_subtasks set last_event_at = $3 where tenant_id = $1 and session_id = $2 and status = 'running'`, [tenantId, sessionId, at]);
    },

    /** Plans left in progress whose work lives in sessions: for the sweep (planning or synthesising for too long). */
    async activeBefore(q: Queryable, before: Date): Promise<PlanRow[]> {
      // Maintenance across tenants, by time alone.
      const { rows } = await q.query<PlanRow>(`select ${PLAN} from orchestration_plans p where p.status in ('planning', 'synthesizing') and p.updated_at < $1 order by p.updated_at limit 100`, [before]);
      return rows;
    },
  };
}

export type OrchestratorRepo = ReturnType<typeof createOrchestratorRepo>;
