import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { SKILL_STATUSES } from '../../../core/skills/skill-fns.js';
import type { App } from '../../build-app.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const Skill = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String({ description: 'Agent Skills name: lower-case words joined by "-"; agents load it by this name' }),
  description: Type.String(),
  status: Type.Union(SKILL_STATUSES.map((s) => Type.Literal(s)), { description: 'proposed -> promoted -> deprecated (a new version of a promoted skill is proposed again)' }),
  version: Type.Integer({ description: 'The latest version' }),
  createdAt: DateTime,
});

const SkillDetail = Type.Intersect([
  Skill,
  Type.Object({
    updatedAt: DateTime,
    promotedVersion: Type.Union([Type.Integer(), Type.Null()], { description: 'The version agents load (null: none)' }),
    promotedAt: Type.Union([DateTime, Type.Null()]),
    deprecatedAt: Type.Union([DateTime, Type.Null()]),
    content: Type.String({ description: 'The latest version\'s SKILL.md' }),
    loads: Type.Integer({ description: 'Times agents loaded it since it was last promoted' }),
    versions: Type.Array(
      Type.Object({ version: Type.Integer(), description: Type.String(), createdAt: DateTime, sourceTrajectories: Type.Array(Type.String({ format: 'uuid' })) }),
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
      { description: 'What the latest version was learnt from; requests and answers only for reviewers (admin.manage_templates)' },
    ),
  }),
]);

const Id = Type.Object({ id: Type.String({ maxLength: 64 }) });
const Moved = Type.Object({ skill: Skill, changed: Type.Boolean({ description: 'false: it was in that state already' }) });

/**
 * Learned skills (SPEC.md Skill resource): any user of the tenant lists and reads them; reviewers
 * (admin.manage_templates) promote and deprecate.
 */
export async function skillsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { skills } = opts.core;

  app.get(
    '/skills',
    {
      schema: {
        tags: ['skills'],
        summary: 'The tenant\'s learned skills, newest first',
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
        summary: 'One skill: its SKILL.md, versions, source trajectories and loads since promotion',
        params: Id,
        response: { 200: Type.Object({ skill: SkillDetail }), ...errorResponses(401, 404) },
      },
    },
    async (req) => skills.get(ctxOf(req), req.params.id),
  );

  for (const [path, to, summary] of [
    ['promote', 'promoted', 'Promote a skill: every runtime of the tenant loads it from its next turn'],
    ['deprecate', 'deprecated', 'Deprecate a skill: agents no longer receive it'],
  ] as const) {
    app.patch(
      `/skills/:id/${path}`,
      {
        schema: { tags: ['skills'], summary, params: Id, response: { 200: Moved, ...errorResponses(401, 403, 404, 409) } },
      },
      async (req) => skills.move(ctxOf(req), req.params.id, to),
    );
  }
}
