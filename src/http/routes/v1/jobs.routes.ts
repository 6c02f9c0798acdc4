import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { JOBS_LIMIT_DEFAULT, JOBS_LIMIT_MAX } from '../../../core/jobs/jobs.service.js';
import { JOB_STATUSES } from '../../../core/jobs/jobs.repo.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const Job = Type.Object({
  id: Type.String({ format: 'uuid' }),
  kind: Type.String(),
  status: Type.Union(JOB_STATUSES.map((s) => Type.Literal(s)), { description: 'queued -> running -> completed | failed' }),
  payload: Type.Record(Type.String(), Type.Unknown()),
  result: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], { description: 'Progress while running, the outcome when finished (embed-memories: modelKey, total, embedded, remaining, batches; index-sessions: total, indexed, failed, remaining, after)' }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed; while running, the last failed attempt that is being retried' }),
  createdBy: Type.String({ description: 'user:<id> or system:<name>' }),
  createdAt: DateTime,
  startedAt: Type.Union([DateTime, Type.Null()]),
  finishedAt: Type.Union([DateTime, Type.Null()]),
});

/**
 * Jobs the tenant starts and follows (SPEC.md Job endpoints). admin.manage_providers, for starting and
 * reading: the one kind (embed-memories) spends the tenant's embedding budget (see jobs.service.ts).
 */
export async function jobsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { jobs } = opts.core;

  app.post(
    '/jobs',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Start a job: embed-memories with payload { limit } embeds up to limit memories lacking a vector of the current embedder; index-sessions (no payload) puts the transcripts of sessions never indexed into the session search',
        body: Type.Object(
          {
            kind: Type.String({ minLength: 1, maxLength: 100, description: 'embed-memories or index-sessions' }),
            payload: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'embed-memories: { limit: integer >= 1 }' })),
          },
          { additionalProperties: false },
        ),
        response: { 202: Type.Object({ job: Job }), ...errorResponses(400, 401, 403, 409) },
      },
    },
    async (req, reply) => reply.status(202).send({ job: await jobs.create(ctxOf(req), req.body) }),
  );

  app.get(
    '/jobs',
    {
      schema: {
        tags: ['jobs'],
        summary: 'The tenant\'s jobs, newest first',
        querystring: Type.Object(
          {
            status: Type.Optional(Type.String({ maxLength: 20, description: JOB_STATUSES.join(' | ') })),
            kind: Type.Optional(Type.String({ maxLength: 100 })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: JOBS_LIMIT_MAX, default: JOBS_LIMIT_DEFAULT })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ jobs: Type.Array(Job) }), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => ({ jobs: await jobs.list(ctxOf(req), req.query) }),
  );

  app.get(
    '/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'One job of the tenant (progress while it runs)',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        response: { 200: Type.Object({ job: Job }), ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => ({ job: await jobs.get(ctxOf(req), req.params.id) }),
  );
}
