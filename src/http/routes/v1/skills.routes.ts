import { Type } from '@sinclair/typebox';
import type { preValidationHookHandler } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import { SKILL_STATUSES, VERSION_STATUSES } from '../../../core/skills/skill-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const Skill = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String({ description: 'Agent Skills name: lower-case words joined by "-"; agents load it by this name' }),
  description: Type.String({ description: 'Reviewers: the latest version\'s; others: the promoted version\'s' }),
  status: Type.Union(SKILL_STATUSES.map((s) => Type.Literal(s)), {
    description: 'proposed (never promoted, a version waits for review) -> promoted (agents load promotedVersion; a newer version may wait beside it) -> deprecated',
  }),
  version: Type.Integer({ description: 'Reviewers: the latest version; others: the promoted version' }),
  promotedVersion: Type.Union([Type.Integer(), Type.Null()], { description: 'The version agents load (null: none)' }),
  pendingVersion: Type.Union([Type.Integer(), Type.Null()], { description: 'The version waiting for review (reviewers only; null for others)' }),
  createdAt: DateTime,
});

const Flag = Type.Object({
  line: Type.Integer({ description: '1-based line of the SKILL.md' }),
  text: Type.String(),
  reason: Type.String(),
});
const Flags = Type.Array(Flag, { description: 'Lines a reviewer reads before promoting: hosts not on the allow-list, installs, remote execution, high-entropy strings' });
const VersionStatus = Type.Union(VERSION_STATUSES.map((s) => Type.Literal(s)), { description: 'proposed (waiting for review), promoted (agents load it), retired, rejected' });

export const SkillDetail = Type.Intersect([
  Skill,
  Type.Object({
    updatedAt: DateTime,
    promotedAt: Type.Union([DateTime, Type.Null()]),
    deprecatedAt: Type.Union([DateTime, Type.Null()]),
    contentVersion: Type.Integer({ description: 'The version `content` and `flags` are of' }),
    content: Type.String({ description: 'Reviewers: the SKILL.md of the version waiting for review (else the promoted one, else the latest); others: the promoted version\'s' }),
    flags: Type.Array(Flag, { description: 'The flagged lines of that version (reviewers; empty for others)' }),
    loads: Type.Integer({ description: 'Times agents loaded it since it was last promoted' }),
    versions: Type.Array(
      Type.Object({
        version: Type.Integer(),
        status: VersionStatus,
        description: Type.String(),
        createdAt: DateTime,
        sourceTrajectories: Type.Array(Type.String({ format: 'uuid' })),
        content: Type.Optional(Type.String({ description: 'Reviewers only' })),
        flags: Type.Optional(Flags),
        reviewedBy: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Who promoted or rejected it (user:<id>, system:cli)' })),
        reviewedAt: Type.Optional(Type.Union([DateTime, Type.Null()])),
      }),
      { description: 'Reviewers: every version; others: the promoted one' },
    ),
    sourceTrajectories: Type.Array(
      Type.Object({
        id: Type.String({ format: 'uuid' }),
        sessionId: Type.Optional(Type.String({ format: 'uuid' })),
        userId: Type.Optional(Type.String({ format: 'uuid' })),
        request: Type.Optional(Type.String()),
        answer: Type.Optional(Type.String()),
        tools: Type.Optional(Type.Array(Type.String(), { description: 'The abstract tool sequence (bash:npm test, edit:src/**/*.ts, …)' })),
        outcome: Type.Optional(Type.String()),
        costUsd: Type.Optional(Type.Number()),
        createdAt: Type.Optional(DateTime),
      }),
      { description: 'What `contentVersion` was learnt from; requests and answers only for reviewers (admin.manage_templates)' },
    ),
  }),
]);

const Id = Type.Object({ id: Type.String({ maxLength: 64 }) });
const IdVersion = Type.Object({ id: Type.String({ maxLength: 64 }), version: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) });
const Moved = Type.Object({
  skill: Skill,
  changed: Type.Boolean({ description: 'false: it was in that state already' }),
  version: Type.Union([Type.Integer(), Type.Null()], { description: 'The version promoted or rejected (null: none)' }),
});
// SPEC.md's promote takes no body: a request without one is read as an empty one (Fastify validates
// the body that is absent against the schema otherwise).
const emptyBody: preValidationHookHandler = (req, _reply, done) => {
  if (req.body === undefined || req.body === null) req.body = {};
  done();
};
const Acknowledge = Type.Optional(
  Type.Object(
    { acknowledgeFlags: Type.Optional(Type.Boolean({ description: 'The reviewer read the version\'s flagged lines: required to promote a flagged version (409 flags_not_acknowledged otherwise)' })) },
    { additionalProperties: false },
  ),
);

/**
 * Learned skills (SPEC.md Skill resource): any user of the tenant lists and reads the skills agents load;
 * reviewers (admin.manage_templates) also see proposals and waiting versions, and promote, reject and
 * deprecate.
 */
export async function skillsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { skills } = opts.core;

  app.get(
    '/skills',
    {
      schema: {
        tags: ['skills'],
        summary: 'The tenant\'s learned skills, newest first (reviewers: all; others: those agents load)',
        querystring: Type.Object({ status: Type.Optional(Type.String({ maxLength: 20, description: SKILL_STATUSES.join(' | ') })) }, { additionalProperties: false }),
        response: { 200: Type.Object({ skills: Type.Array(Skill) }), ...errorResponses(400, 401) },
      },
    },
    async (req) => ({ skills: await skills.list(ctxOf(req), req.query) }),
  );

  app.get(
    '/skills/:id',
    {
      schema: {
        tags: ['skills'],
        summary: 'One skill: its SKILL.md, versions, flagged lines and source trajectories for reviewers; the promoted version for others',
        params: Id,
        response: { 200: Type.Object({ skill: SkillDetail }), ...errorResponses(401, 404) },
      },
    },
    async (req) => skills.get(ctxOf(req), req.params.id),
  );

  app.patch(
    '/skills/:id/promote',
    {
      schema: {
        tags: ['skills'],
        summary: 'Promote the version waiting for review: every runtime of the tenant loads it from its next turn (a flagged version needs acknowledgeFlags)',
        params: Id,
        body: Acknowledge,
        response: { 200: Moved, ...errorResponses(400, 401, 403, 404, 409) },
      },
      preValidation: emptyBody,
    },
    async (req) => skills.move(ctxOf(req), req.params.id, 'promoted', { acknowledgeFlags: req.body?.acknowledgeFlags }),
  );

  app.patch(
    '/skills/:id/deprecate',
    {
      schema: { tags: ['skills'], summary: 'Deprecate a skill: agents no longer receive it (a version waiting for review is rejected with it)', params: Id, response: { 200: Moved, ...errorResponses(401, 403, 404, 409) } },
    },
    async (req) => skills.move(ctxOf(req), req.params.id, 'deprecated'),
  );

  app.patch(
    '/skills/:id/versions/:version/promote',
    {
      schema: {
        tags: ['skills'],
        summary: 'Promote one version waiting for review in place of the promoted one (a flagged version needs acknowledgeFlags)',
        params: IdVersion,
        body: Acknowledge,
        response: { 200: Moved, ...errorResponses(400, 401, 403, 404, 409) },
      },
      preValidation: emptyBody,
    },
    async (req) => skills.reviewVersion(ctxOf(req), req.params.id, req.params.version, 'promote', { acknowledgeFlags: req.body?.acknowledgeFlags }),
  );

  app.patch(
    '/skills/:id/versions/:version/reject',
    {
      schema: {
        tags: ['skills'],
        summary: 'Reject one version waiting for review: the promoted version stays (a skill never promoted is deprecated with its last proposal)',
        params: IdVersion,
        response: { 200: Moved, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (req) => skills.reviewVersion(ctxOf(req), req.params.id, req.params.version, 'reject'),
  );
}
