import { Type, type TSchema } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import type { PersonalTokenRow } from '../../../core/tokens/personal-tokens.repo.js';
import { TOKEN_NAME_MAX, TOKEN_SCOPES } from '../../../core/tokens/token-fns.js';
import { TOKEN_MAX_DAYS_LIMIT } from '../../../core/tenants/tenant-settings-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Uuid = Type.String({ format: 'uuid' });
const Scope = Type.Union(TOKEN_SCOPES.map((s) => Type.Literal(s)));
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
// The value is never part of a listed token: the response schema has no field for it.
export const Token = Type.Object({
  id: Uuid,
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the token, to recognise it' }),
  scopes: Type.Array(Scope),
  user: Type.Object({ id: Uuid, handle: Type.String(), email: Type.String() }),
  expiresAt: DateTime,
  createdAt: DateTime,
  createdBy: Type.String(),
  lastUsedAt: Nullable(DateTime),
  revokedAt: Nullable(DateTime),
  revokedBy: Nullable(Type.String()),
  status: Type.Union([Type.Literal('active'), Type.Literal('expired'), Type.Literal('revoked')]),
});
const Id = Type.Object({ id: Uuid });

/**
 * Personal access tokens: a person's own under /me/tokens, every token of the tenant for
 * admins (admin.manage_users) under /admin/tokens. The value is in the creation's response only.
 */
export async function tokensRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { personalTokens, clock } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);
  const view = (t: PersonalTokenRow) => ({
    id: t.id,
    name: t.name,
    prefix: t.prefix,
    scopes: t.scopes,
    user: { id: t.userId, handle: t.userHandle, email: t.userEmail },
    expiresAt: t.expiresAt,
    createdAt: t.createdAt,
    createdBy: t.createdBy,
    lastUsedAt: t.lastUsedAt,
    revokedAt: t.revokedAt,
    revokedBy: t.revokedBy,
    status: t.revokedAt ? ('revoked' as const) : t.expiresAt <= clock.now() ? ('expired' as const) : ('active' as const),
  });

  app.get(
    '/me/tokens',
    {
      schema: {
        tags: ['tokens'],
        summary: "The caller's personal access tokens (revoked and expired ones too), with the tenant's maximum lifetime and the scopes the caller holds",
        response: {
          200: Type.Object({
            tokens: Type.Array(Token),
            maxDays: Type.Integer(),
            scopes: Type.Array(Type.Object({ scope: Scope, held: Type.Boolean() })),
          }),
          ...errs(),
        },
      },
    },
    async (req) => {
      const ctx = ctxOf(req);
      const [tokens, limits] = await Promise.all([personalTokens.listMine(ctx), personalTokens.limits(ctx)]);
      return { tokens: tokens.map(view), ...limits };
    },
  );

  app.post(
    '/me/tokens',
    {
      schema: {
        tags: ['tokens'],
        summary:
          'Create a personal access token: scopes the caller holds now, a lifetime up to the tenant maximum (settings.tokens.maxDays, default 90). The value is returned here only. A personal access token cannot create tokens (403).',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: TOKEN_NAME_MAX }),
            scopes: Type.Array(Scope, { minItems: 1, maxItems: TOKEN_SCOPES.length, uniqueItems: true }),
            expiresInDays: Type.Number({ exclusiveMinimum: 0, maximum: TOKEN_MAX_DAYS_LIMIT }),
          },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ token: Token, value: Type.String({ description: 'The token: send it as Authorization: Bearer <value>. Shown once.' }) }), ...errs() },
      },
    },
    async (req, reply) => {
      const made = await personalTokens.create(ctxOf(req), req.body);
      return reply.status(201).send({ token: view(made.token), value: made.value });
    },
  );

  app.delete(
    '/me/tokens/:id',
    { schema: { tags: ['tokens'], summary: "Revoke one of the caller's tokens (at once, in every process); another person's is 404", params: Id, response: { 200: Type.Object({ token: Token }), ...errs(404) } } },
    async (req) => ({ token: view(await personalTokens.revokeMine(ctxOf(req), req.params)) }),
  );

  app.get(
    '/admin/tokens',
    {
      schema: {
        tags: ['tokens'],
        summary: "Every personal access token of the tenant, or one user's (admin.manage_users)",
        querystring: Type.Object({ userId: Type.Optional(Uuid) }, { additionalProperties: false }),
        response: { 200: Type.Object({ tokens: Type.Array(Token) }), ...errs() },
      },
    },
    async (req) => ({ tokens: (await personalTokens.list(ctxOf(req), req.query)).map(view) }),
  );

  app.delete(
    '/admin/tokens/:id',
    { schema: { tags: ['tokens'], summary: 'Revoke any token of the tenant (admin.manage_users)', params: Id, response: { 200: Type.Object({ token: Token }), ...errs(404) } } },
    async (req) => ({ token: view(await personalTokens.revoke(ctxOf(req), req.params)) }),
  );
}
