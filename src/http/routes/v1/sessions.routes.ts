import multipart from '@fastify/multipart';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import { PayloadTooLargeError, ValidationError } from '../../../kernel/errors.js';
import type { PromptFile, PromptInput } from '../../../core/sessions/sessions.service.js';
import type { App } from '../../app-type.js';
import { openEventStream } from '../../sse.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';
import { isCleanString } from '../../../lib/clean-string.js';
import { compileBodyValidator, STRING_RULE } from '../../validation.js';
import { SessionListPage, SessionListQuery } from './session-manage.routes.js';

/**
 * Browser clients send their local browser-session id in this header (SPEC.md sessions rule 1): demo-mode
 * sessions made on that browser stay visible to whoever signs in on it, until claimed.
 */
export const BROWSER_SESSION_HEADER = 'x-browser-session';
const BrowserSession = Type.Object({ [BROWSER_SESSION_HEADER]: Type.Optional(Type.String({ minLength: 16, maxLength: 200 })) });
const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });
const FilePart = Type.Object({
  type: Type.Literal('file'),
  mime: Type.Optional(Type.String({ maxLength: 200 })),
  filename: Type.Optional(Type.String({ maxLength: 255 })),
  url: Type.Optional(Type.String({ description: 'data: URL (other schemes are refused)' })),
  content: Type.Optional(Type.String({ description: 'base64 file content' })),
});
const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() });
/** A model reference, "<provider>/<model id>". */
export const ModelRef = (description: string) => Type.String({ minLength: 3, maxLength: 241, description });
const PromptBody = Type.Object(
  {
    text: Type.Optional(Type.String()),
    agent: Type.Optional(Type.String({ maxLength: 64, description: 'Runtime agent, e.g. build or plan' })),
    agentProfileId: Type.Optional(Type.String({ maxLength: 200, description: 'Recorded with the turn; agent profiles are not interpreted yet' })),
    parts: Type.Optional(Type.Array(Type.Union([TextPart, FilePart]), { maxItems: 200 })),
    model: Type.Optional(ModelRef('The model for this turn only; absent: the session\'s (GET /v1/models lists those the caller may choose)')),
  },
  { description: 'JSON form ({text, agent}) or parts form ({parts}); multipart/form-data is also accepted (fields text, agent, agentProfileId, model, files / files[])' },
);

/**
 * The multipart form, for the API document. The multipart parser leaves the body empty (null passes
 * here) and readMultipart checks the fields as they stream in, against PromptBody's rules.
 */
const MultipartPrompt = Type.Unsafe<null>({
  type: 'object',
  nullable: true,
  properties: {
    text: PromptBody.properties.text,
    agent: PromptBody.properties.agent,
    agentProfileId: PromptBody.properties.agentProfileId,
    model: PromptBody.properties.model,
    files: Type.Array(Type.String({ format: 'binary' }), { description: 'Repeatable; also accepted as files[]' }),
  },
});

const browserSessionOf = (req: FastifyRequest) => req.headers[BROWSER_SESSION_HEADER] as string | undefined;

/** SPEC.md "Session endpoints" and the session stream of "Events". */
export async function sessionsRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { sessions, streams, config } = opts.core;
  const { maxFiles, maxFileBytes } = config.prompts;
  // A JSON prompt carries files base64-encoded (4/3 larger); leave 1 MiB for the text.
  const promptBodyLimit = Math.ceil(maxFiles * maxFileBytes * 1.37) + 1024 * 1024;
  await app.register(multipart, { limits: { fileSize: maxFileBytes, files: maxFiles, fields: 20, fieldSize: 1024 * 1024, parts: maxFiles + 20 } });

  // Streams are long-lived: end them when the server shuts down, or close() would wait for them.
  app.addHook('preClose', async () => streams.stop());

  app.get(
    '/sessions',
    {
      schema: {
        tags: ['sessions'],
        summary: "The caller's sessions: pinned first, then most recently updated; filtered and paged",
        description: 'Active (not archived) sessions unless state says otherwise. At most limit (default 100, at most 500) per page; nextCursor (null on the last page) asks for the next with ?cursor=.',
        headers: BrowserSession,
        querystring: SessionListQuery,
        response: { 200: SessionListPage, ...errorResponses(400, 401) },
      },
    },
    async (req) => opts.core.sessionManage.list(ctxOf(req), { ...req.query, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/prepare',
    {
      schema: {
        tags: ['sessions'],
        summary: "Start the caller's agent runtime ahead of a prompt, so the first answer comes in about a second",
        description:
          'Returns at once; the runtime starts (about 2-3 s) and prepares itself meanwhile, or is thawed if it was frozen. The dashboard asks as it opens. Needs agents.create; 409 runtime_not_ready when no model is applied.',
        response: { 202: Type.Object({ preparing: Type.Literal(true) }), ...errorResponses(401, 403, 409) },
      },
    },
    async (req, reply) => reply.status(202).send(await sessions.prepare(ctxOf(req))),
  );

  app.post(
    '/sessions',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Create a session, optionally from a template (its system prompt and model are snapshotted)',
        headers: BrowserSession,
        body: Type.Object({
          title: Type.String({ minLength: 1, maxLength: 500 }),
          template_slug: Type.Optional(Type.String({ maxLength: 63 })),
          model: Type.Optional(ModelRef("The session's model, over its template's and the tenant's default (GET /v1/models lists those the caller may choose); 400 model_unknown, 403 model_not_allowed, 409 provider_disabled")),
        }),
        response: { 201: Type.Object({ sessionId: Type.String({ format: 'uuid' }) }), ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req, reply) =>
      reply.status(201).send(await sessions.create(ctxOf(req), { title: req.body.title, templateSlug: req.body.template_slug, model: req.body.model, browserSession: browserSessionOf(req) })),
  );

  app.get(
    '/sessions/:id/messages',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The session history, from the agent runtime',
        params: Id,
        headers: BrowserSession,
        response: {
          200: Type.Object({
            session: Type.Optional(Type.Object({ id: Type.String({ format: 'uuid' }), title: Type.String() }, { description: 'The session the messages are of (its title, for a header)' })),
            messages: Type.Array(Type.Object({ info: Type.Record(Type.String(), Type.Unknown()), parts: Type.Array(Type.Record(Type.String(), Type.Unknown())) })),
          }),
          ...errorResponses(401, 404, 503),
        },
      },
    },
    async (req) => sessions.messages(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  // A multipart prompt is read field by field (readMultipart): its fields are checked against the JSON
  // form's property schemas.
  const checkFields = compileBodyValidator(Type.Object(Type.Pick(PromptBody, ['text', 'agent', 'agentProfileId', 'model']).properties, { additionalProperties: false }));

  app.post(
    '/sessions/:id/prompt',
    {
      bodyLimit: promptBodyLimit,
      schema: {
        tags: ['sessions'],
        summary: 'Queue an agent turn; answers at once with the job id (202)',
        description: `Limits: at most ${maxFiles} files of ${maxFileBytes} bytes each (AGENTWS_PROMPT_MAX_FILES, AGENTWS_PROMPT_MAX_FILE_MB); beyond them 413. 409 runtime_not_ready until a runtime is applied; the turn's model (\`model\`, else the session's): 400 model_unknown, 403 model_not_allowed (not in the caller's roles' models.allowed), 409 provider_disabled; 429 cost_limit_exceeded when the caller's cost limits are reached.`,
        params: Id,
        headers: BrowserSession,
        body: { content: { 'application/json': { schema: PromptBody }, 'multipart/form-data': { schema: MultipartPrompt } } },
        response: {
          202: Type.Object({
            jobId: Type.String({ format: 'uuid' }),
            sessionId: Type.String({ format: 'uuid' }),
            turnId: Type.String({ format: 'uuid', description: 'The turn: withdraw it with DELETE /v1/sessions/:id/turns/:turnId until it is sent' }),
            messageId: Type.String({ description: "The prompt's message id in the transcript (GET /v1/sessions/:id/messages, the stream's message.updated): once it is there, the prompt was sent" }),
          }),
          ...errorResponses(400, 401, 403, 404, 409, 413, 429),
        },
      },
    },
    async (req, reply) => {
      const input: PromptInput = req.isMultipart() ? await readMultipart(req) : (req.body as Static<typeof PromptBody>);
      const result = await sessions.prompt(ctxOf(req), { ...input, id: req.params.id, browserSession: browserSessionOf(req) });
      return reply.status(202).send(result);
    },
  );

  app.post(
    '/sessions/:id/stop',
    {
      schema: {
        tags: ['sessions'],
        summary: "Stop the session's running turn (idempotent: 200 with stopped false when nothing runs)",
        description:
          'Aborts the turn in the agent runtime (its waiting permission requests are rejected; what it had written stays in the transcript; the model call is charged as far as it went), or withdraws the prompt when it has not reached the runtime yet. The stream gets turn.stopped (with who stopped it) before the runtime\'s own end of the turn. Prompts queued behind it stay queued. Needs agents.create.',
        params: Id,
        headers: BrowserSession,
        response: {
          200: Type.Object({
            stopped: Type.Boolean({ description: 'false: nothing was running' }),
            turnId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
            withdrawn: Type.Boolean({ description: 'The turn had not reached the runtime: withdrawn, never run' }),
            message: Type.String(),
          }),
          ...errorResponses(401, 403, 404, 502, 503),
        },
      },
    },
    async (req) => sessions.stop(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  app.delete(
    '/sessions/:id/turns/:turnId',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Withdraw a queued prompt before it is sent to the agent (409 turn_already_sent once it has been)',
        description: "The turn id is in the prompt's 202 answer. The model never sees a withdrawn prompt; the stream gets turn.withdrawn and the session's next prompt goes. Needs agents.create.",
        params: Type.Object({ id: Type.String({ format: 'uuid' }), turnId: Type.String({ format: 'uuid' }) }),
        headers: BrowserSession,
        response: { 200: Type.Object({ withdrawn: Type.Literal(true), turnId: Type.String({ format: 'uuid' }) }), ...errorResponses(401, 403, 404, 409) },
      },
    },
    async (req) => sessions.withdraw(ctxOf(req), { id: req.params.id, turnId: req.params.turnId, browserSession: browserSessionOf(req) }),
  );

  app.get(
    '/sessions/:id/events',
    {
      schema: {
        tags: ['sessions'],
        summary: 'SSE stream of the session: each message has an id and a JSON event body; resume with Last-Event-ID',
        params: Id,
        headers: Type.Intersect([BrowserSession, Type.Object({ 'last-event-id': Type.Optional(Type.String({ maxLength: 100 })) })]),
        querystring: Type.Object({ lastEventId: Type.Optional(Type.String({ maxLength: 100, description: 'Same as the Last-Event-ID header, for clients that cannot set headers' })) }),
        produces: ['text/event-stream'],
        response: { 200: Type.String({ description: 'text/event-stream' }), ...errorResponses(401, 404) },
      },
    },
    async (req, reply) => {
      const lastEventId = (req.headers['last-event-id'] as string | undefined) ?? req.query.lastEventId;
      const ctx = ctxOf(req);
      const browserSession = browserSessionOf(req);
      const { sessionId, ends, viewer } = await sessions.openStream(ctx, { id: req.params.id, browserSession, lastEventId });
      // Checked again whenever the session's access changes (a share revoked, a hand-over): a follower who
      // may no longer read it live is told and the stream ends.
      const recheck = () => sessions.readable(ctx, sessionId, browserSession).then((r) => !r.share || r.share.mode === 'live', () => false);
      const { res, onClose } = openEventStream(reply);
      const unsubscribe = streams.subscribe(
        sessionId,
        {
          write: (frame) => {
            res.write(frame);
            return res.writableLength;
          },
          close: () => res.end(),
        },
        lastEventId,
        ends,
        { recheck, viewer: viewer !== null },
      );
      onClose(unsubscribe);
      // Revoked while this stream opened: checked once more now that it is subscribed.
      void streams.recheckViewers(sessionId);
    },
  );

  app.get(
    '/sessions/:id/permissions',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The tool permission requests of the session (and of its subtasks) still waiting for an answer, oldest first',
        params: Id,
        headers: BrowserSession,
        response: {
          200: Type.Object({
            permissions: Type.Array(
              Type.Object({
                id: Type.String({ description: 'The id to answer with POST /v1/sessions/:id/permissions/:permissionID' }),
                sessionId: Type.String({ format: 'uuid', description: 'The session that asked: this one, or one of its subtasks' }),
                permission: Type.String({ description: 'What the agent asks to do: bash, edit, webfetch, ...' }),
                patterns: Type.Array(Type.String(), { description: 'What exactly: the command, the paths' }),
                askedAt: DateTime,
              }),
            ),
          }),
          ...errorResponses(401, 404),
        },
      },
    },
    async (req) => sessions.pendingPermissions(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/:id/permissions/:permissionID',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Answer a pending tool permission request of the session: once, always or reject',
        params: Type.Object({ id: Type.String({ format: 'uuid' }), permissionID: Type.String({ minLength: 1, maxLength: 100 }) }),
        headers: BrowserSession,
        body: Type.Object({ response: Type.Union([Type.Literal('once'), Type.Literal('always'), Type.Literal('reject')]) }),
        response: { 200: Type.Object({ ok: Type.Boolean() }), ...errorResponses(400, 401, 404) },
      },
    },
    async (req) => sessions.replyPermission(ctxOf(req), { id: req.params.id, permissionId: req.params.permissionID, response: req.body.response, browserSession: browserSessionOf(req) }),
  );

  app.delete(
    '/sessions/:id',
    { schema: { tags: ['sessions'], summary: "Remove the session from the owner's index (the runtime keeps the transcript)", params: Id, headers: BrowserSession, response: { 204: Type.Null(), ...errorResponses(401, 404) } } },
    async (req, reply) => {
      await sessions.remove(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) });
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/sessions/:id/claim',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Take over a demo-mode session this browser created before signing in',
        params: Id,
        headers: BrowserSession,
        response: { 200: Type.Object({ sessionId: Type.String({ format: 'uuid' }), claimed: Type.Boolean() }), ...errorResponses(401, 404) },
      },
    },
    async (req) => sessions.claim(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  /**
   * Reads a multipart prompt: fields text, agent, agentProfileId (each at most once, checked like the
   * JSON form's); files under `files` or `files[]`, their names held to the same string rule.
   */
  async function readMultipart(req: FastifyRequest): Promise<PromptInput> {
    const fields: Record<string, string> = {};
    const files: PromptFile[] = [];
    for await (const part of req.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'files' && part.fieldname !== 'files[]') {
          await part.toBuffer().catch(() => {});
          throw new ValidationError(`unexpected file field "${printable(part.fieldname)}" (use files or files[])`);
        }
        const data = await part.toBuffer();
        if (part.filename && !isCleanString(part.filename)) throw new ValidationError(`body/files/${files.length}/filename ${STRING_RULE}`);
        files.push({ filename: part.filename || 'file', mime: part.mimetype || 'application/octet-stream', data });
      } else {
        const name = part.fieldname;
        if (name !== 'text' && name !== 'agent' && name !== 'agentProfileId' && name !== 'model') throw new ValidationError(`unexpected field "${printable(name)}" (text, agent, agentProfileId, model, files)`);
        if (name in fields) throw new ValidationError(`body/${name} is given more than once`);
        if (part.valueTruncated) throw new PayloadTooLargeError(`body/${name} is longer than the 1 MiB a form field may carry`);
        fields[name] = String(part.value);
      }
    }
    if (!checkFields(fields)) {
      const e = checkFields.errors![0];
      throw new ValidationError(`body${e.instancePath} ${e.message}`);
    }
    if (files.length > maxFiles) throw new PayloadTooLargeError(`at most ${maxFiles} files per prompt`);
    return { ...fields, files };
  }
}

/** A client's field name in a message: valid text only, and not too much of it. */
const printable = (name: string) => (isCleanString(name) ? name.slice(0, 64) : '(not valid text)');
