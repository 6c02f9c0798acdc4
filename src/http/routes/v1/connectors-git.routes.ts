import { Type, type TSchema } from '@sinclair/typebox';
import { GIT_OAUTH_CALLBACK_PATH } from '../../../core/connectors/git-connections.service.js';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const AccessRule = Type.Object({ who: Type.String({ maxLength: 110, description: '"*", "role:<name>" or "team:<name>"' }), repos: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 100, description: 'Patterns such as org/* or org/**' }) }, { additionalProperties: false });
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const CredentialKind = Type.Union([Type.Literal('token'), Type.Literal('github_app'), Type.Literal('none')], { description: 'The service credential: a token, a GitHub App installation, or none (agents act only as their users)' });
const UserConnections = Type.Union([Type.Literal('off'), Type.Literal('optional'), Type.Literal('required')], {
  description: "Per-user connections: off (the service credential only), optional (a person's own account when connected, else the service credential), required (their own account only)",
});
export const GitHost = Type.Object({
  name: Type.String(),
  baseUrl: Type.String(),
  username: Nullable(Type.String()),
  credentialKind: CredentialKind,
  credential: Nullable(Type.Literal('sealed', { description: 'The token or private key is stored sealed and never returned' })),
  githubApp: Nullable(Type.Object({ appId: Type.String(), installationId: Type.String(), apiUrl: Type.String() })),
  oauth: Nullable(Type.Object({ clientId: Type.String(), clientSecret: Type.Literal('sealed'), authorizeUrl: Type.String(), tokenUrl: Type.String(), userUrl: Type.String(), scopes: Type.String() })),
  userConnections: UserConnections,
  connections: Type.Integer({ description: 'How many people have connected their own account' }),
  access: Type.Array(AccessRule),
  protectedRefs: Type.Array(Type.String()),
  protectDefault: Type.Boolean(),
  branchPrefix: Type.String(),
  pushOptions: Type.Array(Type.String(), { description: 'Push options agents may send (git push -o); empty: a push carrying any is refused' }),
  createdAt: DateTime,
  updatedAt: DateTime,
});
const Fields = {
  baseUrl: Type.String({ minLength: 1, maxLength: 2000 }),
  username: Type.String({ maxLength: 200 }),
  credentialKind: CredentialKind,
  token: Type.String({ minLength: 1, maxLength: 4096 }),
  githubApp: Type.Object(
    {
      appId: Type.String({ maxLength: 100 }),
      installationId: Type.String({ maxLength: 100 }),
      privateKey: Type.Optional(Type.String({ maxLength: 20_000, description: "The app's private key (PEM); needed when adding, kept when omitted in a change" })),
      apiUrl: Type.Optional(Type.String({ maxLength: 2000, description: 'GitHub API (default: api.github.com for github.com, <base>/api/v3 for Enterprise Server)' })),
    },
    { additionalProperties: false },
  ),
  oauth: Nullable(
    Type.Object(
      {
        preset: Type.Optional(Type.Union([Type.Literal('github'), Type.Literal('gitlab'), Type.Literal('gitea')], { description: "Fills the endpoints and scopes from the host's base URL" })),
        clientId: Type.String({ maxLength: 100 }),
        clientSecret: Type.Optional(Type.String({ maxLength: 4096, description: 'Needed when adding; kept when omitted in a change' })),
        authorizeUrl: Type.Optional(Type.String({ maxLength: 2000 })),
        tokenUrl: Type.Optional(Type.String({ maxLength: 2000 })),
        userUrl: Type.Optional(Type.String({ maxLength: 2000 })),
        scopes: Type.Optional(Type.String({ maxLength: 500 })),
      },
      { additionalProperties: false, description: `The host's OAuth client for per-user connections (null removes it); register ${'<public URL>'}/v1/connections/git/callback as its redirect URL` },
    ),
  ),
  userConnections: UserConnections,
  access: Type.Array(AccessRule, { maxItems: 200 }),
  protectedRefs: Type.Array(Type.String({ maxLength: 1000 }), { maxItems: 100 }),
  protectDefault: Type.Boolean(),
  branchPrefix: Type.String({ maxLength: 200 }),
  pushOptions: Type.Array(Type.String({ maxLength: 300 }), {
    maxItems: 50,
    description: 'Push options (git push -o) agents may send: a key (ci.skip), a key prefix ending in * (merge_request.*), or key=value exactly. Default none: a push carrying any option is refused',
  }),
};
const Name = Type.Object({ name: Type.String({ maxLength: 40 }) });
/** Who connected their own account to a host. */
export const Connection = Type.Object({ userId: Type.String(), handle: Type.String(), email: Type.String(), account: Nullable(Type.String()), connectedAt: DateTime, expiresAt: Nullable(DateTime) });
// A person's own accounts at the git hosts: their agents act as them there.
export const Mine = Type.Object({
  host: Type.String(),
  baseUrl: Type.String(),
  userConnections: UserConnections,
  connected: Type.Boolean(),
  account: Nullable(Type.String({ description: "The account's name at the host" })),
  connectedAt: Nullable(DateTime),
  expiresAt: Nullable(DateTime),
  problem: Nullable(Type.String({ description: "Why the connection's last refresh failed: its agents use the service credential (optional) or are refused (required) until it works again or you reconnect" })),
});

/**
 * Git hosts of the tenant (git-hosts.service.ts): admin.manage_providers. The token goes in,
 * never out.
 */
export async function connectorsGitRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { gitHosts, gitConnections } = opts.core;
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
        body: Type.Object({ name: Type.String({ maxLength: 40 }), ...Type.Partial(Type.Object(Fields)).properties, baseUrl: Fields.baseUrl }, { additionalProperties: false }),
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

  app.get(
    '/admin/connectors/git/:name/connections',
    { schema: { tags, summary: 'Who has connected their own account to this host (tokens never included)', params: Name, response: { 200: Type.Object({ connections: Type.Array(Connection) }), ...errs() } } },
    async (req) => ({ connections: await gitConnections.listForHost(ctxOf(req), req.params.name) }),
  );
  app.delete(
    '/admin/connectors/git/:name/connections/:userId',
    { schema: { tags, summary: "End someone's connection to this host", params: Type.Object({ name: Type.String({ maxLength: 40 }), userId: Type.String({ format: 'uuid' }) }), response: { 204: Type.Null(), ...errs() } } },
    async (req, reply) => {
      await gitConnections.remove(ctxOf(req), req.params.name, req.params.userId);
      return reply.status(204).send(null);
    },
  );

  app.get('/me/connections', { schema: { tags, summary: 'Your own accounts at the git hosts that take them', response: { 200: Type.Object({ git: Type.Array(Mine) }), ...errorResponses(401, 403) } } }, async (req) => ({
    git: await gitConnections.mine(ctxOf(req)),
  }));
  app.post(
    '/me/connections/git/:name',
    {
      schema: {
        tags,
        summary: "Start connecting your account: the URL of the host's consent page for your browser (valid ten minutes, once)",
        description: `The host sends the browser back to ${GIT_OAUTH_CALLBACK_PATH}, which must be reached signed in as the same person (the dashboard's cookie).`,
        params: Name,
        response: { 200: Type.Object({ authorizeUrl: Type.String() }), ...errs() },
      },
    },
    async (req) => gitConnections.start(ctxOf(req), req.params.name),
  );
  app.delete('/me/connections/git/:name', { schema: { tags, summary: 'Disconnect your account from a git host', params: Name, response: { 204: Type.Null(), ...errs() } } }, async (req, reply) => {
    await gitConnections.disconnect(ctxOf(req), req.params.name);
    return reply.status(204).send(null);
  });
  app.get(
    GIT_OAUTH_CALLBACK_PATH.slice('/v1'.length),
    {
      // Not signed in (or as someone else): said on the dashboard, not as a 401 page.
      config: { auth: 'optional' },
      schema: {
        tags,
        summary: "The git host's OAuth redirect: connects the account and sends the browser back to the dashboard's Connections",
        description: 'Needs the person who started it, signed in (the dashboard cookie goes with this top-level navigation). Always redirects: to /#/connections?connected=<host>, or ?error=<what went wrong>.',
        querystring: Type.Object({ state: Type.Optional(Type.String({ maxLength: 500 })), code: Type.Optional(Type.String({ maxLength: 2000 })), error: Type.Optional(Type.String({ maxLength: 200 })), error_description: Type.Optional(Type.String({ maxLength: 1000 })) }),
        response: { 302: Type.Null({ description: 'Back to the dashboard' }) },
      },
    },
    async (req, reply) => {
      reply.header('cache-control', 'no-store');
      try {
        const { host } = await gitConnections.finish(ctxOf(req), { state: req.query.state, code: req.query.code, error: req.query.error, errorDescription: req.query.error_description });
        return reply.redirect(`/#/connections?connected=${encodeURIComponent(host)}`, 302);
      } catch (err) {
        // A browser is waiting, not a client that reads JSON: it goes back to the dashboard, which says what went wrong.
        return reply.redirect(`/#/connections?error=${encodeURIComponent((err as Error).message.slice(0, 300))}`, 302);
      }
    },
  );
}
