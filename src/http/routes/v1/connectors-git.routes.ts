import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../build-app.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const AccessRule = Type.Object({ who: Type.String({ maxLength: 110, description: '"*", "role:<name>" or "team:<name>"' }), repos: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 100, description: 'Patterns such as org/* or org/**' }) }, { additionalProperties: false });
const GitHost = Type.Object({
  name: Type.String(),
  baseUrl: Type.String(),
  username: Type.Union([Type.String(), Type.Null()]),
  credential: Type.Literal('sealed', { description: 'The token is stored sealed and never returned' }),
  access: Type.Array(AccessRule),
  protectedRefs: Type.Array(Type.String()),
  protectDefault: Type.Boolean(),
  branchPrefix: Type.String(),
  createdAt: DateTime,
  updatedAt: DateTime,
});
const Fields = {
  baseUrl: Type.String({ minLength: 1, maxLength: 2000 }),
  username: Type.String({ maxLength: 200 }),
  token: Type.String({ minLength: 1, maxLength: 4096 }),
  access: Type.Array(AccessRule, { maxItems: 200 }),
  protectedRefs: Type.Array(Type.String({ maxLength: 1000 }), { maxItems: 100 }),
  protectDefault: Type.Boolean(),
  branchPrefix: Type.String({ maxLength: 200 }),
};
const Name = Type.Object({ name: Type.String({ maxLength: 40 }) });

/**
 * Git hosts of the tenant (issue 28; git-hosts.service.ts): admin.manage_providers. The token goes in,
 * never out.
 */
export async function connectorsGitRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { gitHosts } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, 404, ...s);
  const tags = ['connectors'];

  app.get('/admin/connectors/git', { schema: { tags, summary: "The tenant's git hosts (tokens never included)", response: { 200: Type.Object({ gitHosts: Type.Array(GitHost) }), ...errs() } } }, async (req) => ({
    gitHosts: await gitHosts.list(ctxOf(req)),
  }));

  app.post(
    '/admin/connectors/git',
    {
      schema: {
        tags,
        summary: 'Register a git host; 201 with it, 409 when the name is taken',
        body: Type.Object({ name: Type.String({ maxLength: 40 }), ...Fields, username: Type.Optional(Fields.username), access: Type.Optional(Fields.access), protectedRefs: Type.Optional(Fields.protectedRefs), protectDefault: Type.Optional(Fields.protectDefault), branchPrefix: Type.Optional(Fields.branchPrefix) }, { additionalProperties: false }),
        response: { 201: GitHost, ...errs(409) },
      },
    },
    async (req, reply) => reply.status(201).send(await gitHosts.add(ctxOf(req), req.body)),
  );

  app.patch(
    '/admin/connectors/git/:name',
    {
      schema: {
        tags,
        summary: 'Change a git host (only what is given; a token rotates it)',
        params: Name,
        body: Type.Partial(Type.Object(Fields), { additionalProperties: false }),
        response: { 200: GitHost, ...errs() },
      },
    },
    async (req) => gitHosts.update(ctxOf(req), req.params.name, req.body),
  );

  app.delete('/admin/connectors/git/:name', { schema: { tags, summary: 'Remove a git host and its token', params: Name, response: { 204: Type.Null(), ...errs() } } }, async (req, reply) => {
    await gitHosts.remove(ctxOf(req), req.params.name);
    return reply.status(204).send(null);
  });
}
