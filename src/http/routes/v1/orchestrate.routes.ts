import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { MAX_SUBTASKS_DEFAULT, MAX_SUBTASKS_LIMIT, PLAN_STATUSES, SUBTASK_STATUSES, TASK_DESCRIPTION_MAX } from '../../../core/orchestrator/plan-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Usd = Type.Number({ description: 'USD' });

const Plan = Type.Object({
  id: Type.String({ format: 'uuid' }),
  status: Type.Union(PLAN_STATUSES.map((s) => Type.Literal(s)), { description: 'planning -> executing -> synthesizing -> completed | failed' }),
  taskDescription: Type.String(),
  createdAt: DateTime,
  updatedAt: DateTime,
  parentSessionId: Type.String({ format: 'uuid', description: 'Our id of the session the plan started from (its synthesis is a turn there)' }),
  userId: Type.String({ format: 'uuid' }),
  jobId: Type.String({ format: 'uuid', description: 'The planning job POST /v1/orchestrate answered with' }),
  maxSubtasks: Type.Integer(),
  error: Type.Optional(Type.String({ description: 'Why it failed (cancelled, no valid plan, no subtask completed, the synthesis failed)' })),
  stopReason: Type.Optional(Type.String({ description: 'Why subtasks were stopped early (the budget)' })),
  finishedAt: Type.Optional(DateTime),
  budgetUsd: Type.Union([Usd, Type.Null()], { description: 'What the plan may spend: the per-request limit, or what is left of the monthly one; null: no limit' }),
  costUsd: Type.Optional(Usd),
  tenantId: Type.Optional(Type.String({ format: 'uuid' })),
  planningSessionId: Type.Optional(Type.String({ format: 'uuid', description: 'The child session of the planning turn (its transcript)' })),
});

const Attempt = Type.Object({
  attempt: Type.Integer(),
  sessionId: Type.String({ format: 'uuid', description: 'The child session of this attempt: GET /v1/sessions/:id/messages is its full transcript' }),
  startedAt: DateTime,
  endedAt: Type.Union([DateTime, Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
});

const Subtask = Type.Object({
  index: Type.Integer({ description: 'Zero-based position in the plan' }),
  description: Type.String(),
  status: Type.Union(SUBTASK_STATUSES.map((s) => Type.Literal(s))),
  result: Type.Optional(Type.String({ description: 'Present once completed' })),
  startedAt: Type.Optional(DateTime),
  completedAt: Type.Optional(DateTime),
  failedAt: Type.Optional(DateTime),
  dependencies: Type.Optional(Type.Array(Type.Integer(), { description: 'Present when there are dependencies' })),
  error: Type.Optional(Type.String({ description: 'Why it failed (its last attempt\'s error, "blocked by #k", cancelled, budget)' })),
  attempt: Type.Integer({ description: 'Attempts started (each in a fresh child session)' }),
  sessionId: Type.Optional(Type.String({ format: 'uuid', description: 'The current (last) attempt\'s child session' })),
  costUsd: Type.Optional(Usd),
  attempts: Type.Optional(Type.Array(Attempt)),
});

/** A plan in the list: with its subtasks counted by status. */
export const PlanListItem = Type.Intersect([
  Plan,
  Type.Object({
    subtasks: Type.Object({ total: Type.Integer(), pending: Type.Integer(), running: Type.Integer(), completed: Type.Integer(), failed: Type.Integer() }),
  }),
]);
export const PlanDetail = Type.Object({ plan: Plan, subtasks: Type.Array(Subtask) });
const PlanId = Type.Object({ planId: Type.String({ maxLength: 64 }) });

/**
 * Orchestration (SPEC.md orchestrator endpoints, plus cancel): a task planned into subtasks run in
 * child sessions of one of the caller's sessions. Plans are their owner's (another user's is 404).
 */
export async function orchestrateRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { orchestrator } = opts.core;

  app.post(
    '/orchestrate',
    {
      schema: {
        tags: ['orchestrator'],
        summary: 'Plan a task into subtasks that run in child sessions of one of your sessions, then synthesise their results there',
        body: Type.Object(
          {
            parentSessionId: Type.String({ minLength: 1, maxLength: 100, description: 'A session of yours: our id (from POST /v1/sessions) or the runtime\'s (ses_…)' }),
            taskDescription: Type.String({ minLength: 1, maxLength: TASK_DESCRIPTION_MAX }),
            maxSubtasks: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SUBTASKS_LIMIT, default: MAX_SUBTASKS_DEFAULT })),
            userId: Type.Optional(Type.String({ maxLength: 64, description: 'Defaults to you; may only name you' })),
          },
          { additionalProperties: false },
        ),
        response: { 202: Type.Object({ jobId: Type.String({ format: 'uuid' }), status: Type.Literal('queued') }), ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (req, reply) => reply.status(202).send(await orchestrator.start(ctxOf(req), req.body)),
  );

  app.get(
    '/orchestrate/plans',
    {
      schema: {
        tags: ['orchestrator'],
        summary: 'Your recent plans, newest first, with their subtasks counted by status',
        querystring: Type.Object(
          {
            status: Type.Optional(Type.String({ maxLength: 20, description: PLAN_STATUSES.join(' | ') })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            plans: Type.Array(PlanListItem),
          }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (req) => orchestrator.list(ctxOf(req), req.query),
  );

  app.get(
    '/orchestrate/:planId',
    {
      schema: {
        tags: ['orchestrator'],
        summary: 'One plan and its subtasks',
        params: PlanId,
        response: { 200: PlanDetail, ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => orchestrator.get(ctxOf(req), req.params.planId),
  );

  app.post(
    '/orchestrate/:planId/cancel',
    {
      schema: {
        tags: ['orchestrator'],
        summary: 'Stop a plan: running subtasks are aborted, pending ones never start; the plan ends failed ("cancelled")',
        params: PlanId,
        response: { 200: PlanDetail, ...errorResponses(401, 403, 404, 409) },
      },
    },
    async (req) => orchestrator.cancel(ctxOf(req), req.params.planId),
  );
}
