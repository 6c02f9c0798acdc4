import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Ctx } from '../../kernel/context.js';
import type { Core } from '../../core/create-core.js';
import { isAppError } from '../../kernel/errors.js';
import { SCIM, scimErrorBody } from '../../core/scim/scim-fns.js';
import type { App } from '../app-type.js';
import { drainUnreadBody } from '../early-response.js';
import { ctxOf } from '../plugins/auth.js';
import { DateTime, errorResponses } from '../schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The SCIM request's context: the system actor `scim` in the tenant of the bearer's SCIM token. */
    scimCtx?: Ctx;
  }
}

const SCIM_JSON = 'application/scim+json; charset=utf-8';
const BEARER = /^bearer /i;

const Id = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const ListQuery = Type.Object({
  filter: Type.Optional(Type.String({ maxLength: 2000 })),
  startIndex: Type.Optional(Type.String({ maxLength: 20 })),
  count: Type.Optional(Type.String({ maxLength: 20 })),
  attributes: Type.Optional(Type.String({ maxLength: 2000 })),
  excludedAttributes: Type.Optional(Type.String({ maxLength: 2000 })),
});
const GetQuery = Type.Object({ attributes: Type.Optional(Type.String({ maxLength: 2000 })), excludedAttributes: Type.Optional(Type.String({ maxLength: 2000 })) });
// SCIM bodies are loose by design (extensions, attributes in any case, Entra's and Okta's variations):
// scim-fns.ts validates them and answers SCIM errors naming the attribute.
const Body = Type.Unknown();
const hidden = { hide: true } as const;

/**
 * SCIM 2.0 (RFC 7643/7644) at /scim/v2, for a tenant's identity provider. Not /v1: its
 * bearer is the tenant's SCIM token (which names the tenant), bodies and answers are
 * application/scim+json, and errors are SCIM error messages. Left out of the /v1 OpenAPI document:
 * RFC 7644 and /scim/v2/Schemas describe it.
 */
export async function scimRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { scim, config } = opts.core;
  const base = `${config.server.publicUrl.replace(/\/$/, '')}/scim/v2`;

  app.addContentTypeParser(['application/scim+json'], { parseAs: 'string' }, app.getDefaultJsonParser('error', 'error'));

  app.addHook('onRequest', async (req) => {
    // Discovery documents are public (RFC 7644 4: they describe the service, not the tenant's data).
    if (/^\/scim\/v2\/(ServiceProviderConfig|ResourceTypes|Schemas)(\/|\?|$)/i.test(req.url)) return;
    const header = req.headers.authorization;
    const bearer = header !== undefined && BEARER.test(header) ? header.slice(7).trim() : undefined;
    const { tenantId } = await scim.authenticate(bearer);
    req.scimCtx = { tenantId, actor: { kind: 'system', name: 'scim' }, requestId: req.id, log: req.log, channel: 'scim' };
  });

  app.addHook('onSend', async (_req, reply, payload) => {
    if (String(reply.getHeader('content-type') ?? '').startsWith('application/json')) void reply.header('content-type', SCIM_JSON);
    return payload;
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    drainUnreadBody(req, reply);
    if (isAppError(err)) {
      if (err.status === 401) void reply.header('www-authenticate', 'Bearer realm="scim"');
      return reply.status(err.status).type(SCIM_JSON).send(scimErrorBody(err.status, err.code, err.message));
    }
    if (err.validation || (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)) {
      const status = err.validation ? 400 : err.statusCode!;
      return reply.status(status).type(SCIM_JSON).send(scimErrorBody(status, status === 400 ? 'invalidSyntax' : undefined, err.message));
    }
    req.log.error({ err }, 'unhandled error');
    return reply.status(500).type(SCIM_JSON).send(scimErrorBody(500, undefined, 'internal error'));
  });
  app.setNotFoundHandler((req, reply) => {
    drainUnreadBody(req, reply);
    return reply.status(404).type(SCIM_JSON).send(scimErrorBody(404, undefined, `no SCIM endpoint ${req.method} ${req.url.split('?')[0]}`));
  });

  const ctx = (req: FastifyRequest): Ctx => req.scimCtx!;
  const created = (reply: FastifyReply, resource: { meta: { location: string } }) => reply.status(201).header('location', resource.meta.location).send(resource);

  // --- discovery (RFC 7644 4) ---
  app.get('/ServiceProviderConfig', { schema: hidden }, async () => ({
    schemas: [SCIM.serviceProviderConfig],
    documentationUri: 'https://datatracker.ietf.org/doc/html/rfc7644',
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: 200 },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [{ type: 'oauthbearertoken', name: 'SCIM token', description: 'The tenant\'s SCIM token (`aws scim token create`) as a Bearer token.', primary: true }],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  }));

  const resourceTypes = [
    { schemas: [SCIM.resourceType], id: 'User', name: 'User', endpoint: '/Users', schema: SCIM.user, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` } },
    { schemas: [SCIM.resourceType], id: 'Group', name: 'Group', endpoint: '/Groups', schema: SCIM.group, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/Group` } },
  ];
  app.get('/ResourceTypes', { schema: hidden }, async () => ({ schemas: [SCIM.list], totalResults: 2, startIndex: 1, itemsPerPage: 2, Resources: resourceTypes }));

  const attr = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
    name, type, multiValued: false, required: false, caseExact: false, mutability: 'readWrite', returned: 'default', uniqueness: 'none', ...extra,
  });
  const schemas = [
    {
      schemas: [SCIM.schema], id: SCIM.user, name: 'User', description: 'A person of the tenant; userName is their sign-in email.',
      attributes: [
        attr('userName', 'string', { required: true, uniqueness: 'server' }),
        attr('externalId', 'string', { caseExact: true }),
        attr('displayName', 'string'),
        attr('name', 'complex', { subAttributes: [attr('givenName', 'string'), attr('familyName', 'string'), attr('formatted', 'string')] }),
        attr('emails', 'complex', { multiValued: true, mutability: 'readOnly', subAttributes: [attr('value', 'string'), attr('type', 'string'), attr('primary', 'boolean')] }),
        attr('active', 'boolean'),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCIM.user}` },
    },
    {
      schemas: [SCIM.schema], id: SCIM.group, name: 'Group', description: 'A team of the tenant.',
      attributes: [
        attr('displayName', 'string', { required: true, uniqueness: 'server' }),
        attr('externalId', 'string', { caseExact: true }),
        attr('members', 'complex', { multiValued: true, subAttributes: [attr('value', 'string', { mutability: 'immutable' }), attr('display', 'string', { mutability: 'readOnly' })] }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCIM.group}` },
    },
  ];
  app.get('/Schemas', { schema: hidden }, async () => ({ schemas: [SCIM.list], totalResults: schemas.length, startIndex: 1, itemsPerPage: schemas.length, Resources: schemas }));

  // --- Users ---
  app.get('/Users', { schema: { ...hidden, querystring: ListQuery } }, async (req) => scim.listUsers(ctx(req), req.query, base));
  app.post('/Users', { schema: { ...hidden, body: Body } }, async (req, reply) => created(reply, await scim.createUser(ctx(req), req.body, base)));
  app.get('/Users/:id', { schema: { ...hidden, params: Id, querystring: GetQuery } }, async (req) => scim.getUser(ctx(req), req.params.id, base));
  app.put('/Users/:id', { schema: { ...hidden, params: Id, body: Body } }, async (req) => scim.replaceUser(ctx(req), req.params.id, req.body, base));
  app.patch('/Users/:id', { schema: { ...hidden, params: Id, body: Body } }, async (req) => scim.patchUser(ctx(req), req.params.id, req.body, base));
  app.delete('/Users/:id', { schema: { ...hidden, params: Id } }, async (req, reply) => {
    await scim.deleteUser(ctx(req), req.params.id);
    return reply.status(204).send();
  });

  // --- Groups (teams) ---
  app.get('/Groups', { schema: { ...hidden, querystring: ListQuery } }, async (req) => scim.listGroups(ctx(req), req.query, base));
  app.post('/Groups', { schema: { ...hidden, body: Body } }, async (req, reply) => created(reply, await scim.createGroup(ctx(req), req.body, base)));
  app.get('/Groups/:id', { schema: { ...hidden, params: Id, querystring: GetQuery } }, async (req) => scim.getGroup(ctx(req), req.params.id, req.query, base));
  app.put('/Groups/:id', { schema: { ...hidden, params: Id, body: Body } }, async (req) => scim.replaceGroup(ctx(req), req.params.id, req.body, base));
  app.patch('/Groups/:id', { schema: { ...hidden, params: Id, body: Body } }, async (req) => scim.patchGroup(ctx(req), req.params.id, req.body, base));
  app.delete('/Groups/:id', { schema: { ...hidden, params: Id } }, async (req, reply) => {
    await scim.deleteGroup(ctx(req), req.params.id);
    return reply.status(204).send();
  });
}

const TokenInfo = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  createdBy: Type.String({ description: 'Who minted it: `user:<id>` (an owner) or `system:<name>` (the operator)' }),
  createdAt: DateTime,
  lastUsedAt: Type.Union([DateTime, Type.Null()]),
  expiresAt: DateTime,
  expired: Type.Boolean(),
});
const TokenName = Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' });

/**
 * /v1/admin/scim/tokens: the tenant's SCIM tokens. Created (and renewed) by owners only, never with a
 * personal access token; listed and revoked by admin.manage_users. A token is shown once, on creation.
 */
export async function scimAdminRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { scim } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);
  app.post(
    '/admin/scim/tokens',
    {
      schema: {
        tags: ['admin'],
        summary: "Create the tenant's SCIM token of a name (default `default`), replacing one of that name (rotation, renewal); shown once (owners: admin.manage_tenant; not with a personal access token)",
        body: Type.Object(
          {
            name: Type.Optional(TokenName),
            expiresInDays: Type.Optional(Type.Number({ description: "Lifetime in days: more than 0, at most the tenant's settings.tokens.scimMaxDays (default 365); default 180" })),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ id: Type.String({ format: 'uuid' }), name: Type.String(), createdBy: Type.String(), createdAt: DateTime, expiresAt: DateTime, replaced: Type.Boolean(), token: Type.String() }),
          ...errs(),
        },
      },
    },
    async (req, reply) => reply.status(201).send(await scim.createToken(ctxOf(req), { name: req.body?.name, expiresInDays: req.body?.expiresInDays })),
  );
  app.get(
    '/admin/scim/tokens',
    { schema: { tags: ['admin'], summary: "The tenant's SCIM tokens, without secrets (admin.manage_users)", response: { 200: Type.Object({ tokens: Type.Array(TokenInfo) }), ...errs() } } },
    async (req) => ({ tokens: await scim.listTokens(ctxOf(req)) }),
  );
  app.delete(
    '/admin/scim/tokens/:name',
    {
      schema: {
        tags: ['admin'],
        summary: 'Revoke a SCIM token by name (admin.manage_users); the identity provider is refused at once',
        params: Type.Object({ name: TokenName }),
        response: { 204: Type.Null(), ...errs(404) },
      },
    },
    async (req, reply) => {
      await scim.revokeToken(ctxOf(req), { name: req.params.name });
      return reply.status(204).send(null);
    },
  );
}
