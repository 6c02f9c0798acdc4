import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { TEAM_NAME_MAX } from '../../../core/teams/teams.service.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Uuid = Type.String({ format: 'uuid' });
const Member = Type.Object({ userId: Uuid, handle: Type.String(), email: Type.String(), displayName: Type.String(), addedAt: DateTime });
export const Team = Type.Object({ id: Uuid, name: Type.String(), createdAt: DateTime, members: Type.Array(Member) });
const Id = Type.Object({ id: Uuid });

/**
 * Teams of the tenant (SPEC.md has no team object): what `team` visibility of memories is
 * measured by. Managing them is user management: admin.manage_users. Another tenant's team or user: 404.
 */
export async function teamsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { teams } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);

  app.get(
    '/admin/teams',
    { schema: { tags: ['admin'], summary: 'Teams of the tenant with their members (admin.manage_users)', response: { 200: Type.Object({ teams: Type.Array(Team) }), ...errs() } } },
    async (req) => ({ teams: await teams.list(ctxOf(req)) }),
  );

  app.post(
    '/admin/teams',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create a team (admin.manage_users); names are unique in the tenant ignoring case (409)',
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: TEAM_NAME_MAX }) }, { additionalProperties: false }),
        response: { 201: Type.Object({ team: Team }), ...errs(409) },
      },
    },
    async (req, reply) => reply.status(201).send({ team: await teams.create(ctxOf(req), req.body) }),
  );

  app.delete(
    '/admin/teams/:id',
    { schema: { tags: ['admin'], summary: 'Delete a team and its memberships (admin.manage_users)', params: Id, response: { 204: Type.Null(), ...errs(404) } } },
    async (req, reply) => {
      await teams.remove(ctxOf(req), req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/admin/teams/:id/members',
    {
      schema: {
        tags: ['admin'],
        summary: 'Add a user of the tenant to a team (admin.manage_users); idempotent, `added` says whether it changed anything',
        params: Id,
        body: Type.Object({ userId: Uuid }, { additionalProperties: false }),
        response: { 200: Type.Object({ team: Team, added: Type.Boolean() }), ...errs(404) },
      },
    },
    async (req) => teams.addMember(ctxOf(req), req.params.id, req.body),
  );

  app.delete(
    '/admin/teams/:id/members/:userId',
    {
      schema: {
        tags: ['admin'],
        summary: 'Remove a user from a team (admin.manage_users); 404 when they are not in it',
        params: Type.Object({ id: Uuid, userId: Uuid }),
        response: { 204: Type.Null(), ...errs(404) },
      },
    },
    async (req, reply) => {
      await teams.removeMember(ctxOf(req), req.params.id, { userId: req.params.userId });
      return reply.status(204).send(null);
    },
  );
}
