import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';
import { BROWSER_SESSION_HEADER, ModelRef } from './sessions.routes.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });
const BrowserSession = Type.Object({ [BROWSER_SESSION_HEADER]: Type.Optional(Type.String({ minLength: 16, maxLength: 200 })) });
const browserSessionOf = (req: FastifyRequest) => req.headers[BROWSER_SESSION_HEADER] as string | undefined;
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const Model = Type.Object({
  ref: Type.String({ description: '"<provider>/<model id>": what a session\'s or a prompt\'s model names' }),
  provider: Type.String(),
  id: Type.String(),
  name: Type.String({ description: 'Display name (the provider\'s model name, else its id)' }),
  default: Type.Boolean({ description: "The tenant's default model" }),
  contextLimit: Type.Union([Type.Integer(), Type.Null()]),
  allowed: Type.Boolean({ description: 'The caller may choose it (always true unless all=true)' }),
});

export const SessionModel = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  model: Nullable(Type.String({ description: 'The model chosen for the session, or null' })),
  templateModel: Nullable(Type.String({ description: "The session's template's model (snapshot), or null" })),
  defaultModel: Nullable(Type.String({ description: "The tenant's applied default model, or null" })),
  effective: Type.Union([
    Type.Object({ model: Type.String(), source: Type.Union([Type.Literal('session'), Type.Literal('template'), Type.Literal('default'), Type.Literal('turn')]) }),
    Type.Null(),
  ], { description: 'What the next turn runs on without a model of its own, and why (precedence: turn > session > template > default)' }),
});
/** The models a person may choose (GET /v1/models). */
export const ModelCatalog = Type.Object({ defaultModel: Nullable(Type.String()), models: Type.Array(Model) });
/** A branch of a session (POST /v1/sessions/:id/fork). */
export const Branch = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  title: Type.String(),
  from: Type.Object({ sessionId: Type.String({ format: 'uuid' }), messageId: Type.String() }),
  messages: Type.Integer({ description: 'How many messages the branch holds' }),
  workspace: Type.Literal('shared'),
  message: Type.String({ description: 'What the branch means for your files, in plain words' }),
});

/** The models a person may choose, a session's model, and branching a session at a message. */
export async function sessionModelsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { sessionModels, sessionFork } = opts.core;

  app.get(
    '/models',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The models the caller may choose for a session or a turn, and the tenant\'s default',
        description:
          "Every model of an enabled, applied provider that the caller's roles allow (models.allowed), and the tenant's default model always. all=true (admin.manage_roles): every model served, each with `allowed` for the caller.",
        querystring: Type.Object({ all: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
        response: { 200: ModelCatalog, ...errorResponses(401, 403) },
      },
    },
    async (req) => sessionModels.catalog(ctxOf(req), { all: req.query.all }),
  );

  app.get(
    '/sessions/:id/model',
    {
      schema: { tags: ['sessions'], summary: "The session's model: chosen, its template's, the default, and what its next turn runs on", params: Id, headers: BrowserSession, response: { 200: SessionModel, ...errorResponses(401, 404) } },
    },
    async (req) => sessionModels.get(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  app.put(
    '/sessions/:id/model',
    {
      schema: {
        tags: ['sessions'],
        summary: "Choose the session's model (null: back to its template's or the tenant's default)",
        description: '400 model_unknown, 403 model_not_allowed (not in the caller\'s roles\' models.allowed), 409 provider_disabled (disabled, or not applied yet). Needs agents.create. Audited (session.model_set).',
        params: Id,
        headers: BrowserSession,
        body: Type.Object({ model: Type.Union([ModelRef('"<provider>/<model id>"'), Type.Null()]) }, { additionalProperties: false }),
        response: { 200: SessionModel, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (req) => sessionModels.set(ctxOf(req), { id: req.params.id, model: req.body.model, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/:id/fork',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Branch the session at a message into a new session of yours that continues from there',
        description:
          "The branch's transcript is a copy of this one's up to and including messageId (when it is an answer, the whole answer to its prompt); its template and model come along. Your workspace is one for all your sessions, so the branch shares it (workspace: \"shared\"): files are as they are now. The copied turns keep their recorded changes under the branch's message ids (GET /v1/sessions/:branch/changes), so an undo of one in the branch (POST /v1/sessions/:branch/revert) puts the files back as before it. 404 for another's session or an unknown message. Needs agents.create. Audited (session.fork).",
        params: Id,
        headers: BrowserSession,
        body: Type.Object(
          {
            messageId: Type.String({ minLength: 1, maxLength: 100, pattern: '^msg_[A-Za-z0-9]+$', description: 'A message of GET /v1/sessions/:id/messages' }),
            title: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Default: the session\'s title with "(branch)"' })),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Branch,
          ...errorResponses(400, 401, 403, 404, 502, 503),
        },
      },
    },
    async (req, reply) => reply.status(201).send(await sessionFork.fork(ctxOf(req), { id: req.params.id, messageId: req.body.messageId, title: req.body.title, browserSession: browserSessionOf(req) })),
  );
}
