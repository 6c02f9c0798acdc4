import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';
import { BROWSER_SESSION_HEADER } from './sessions.routes.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });
const BrowserSession = Type.Object({ [BROWSER_SESSION_HEADER]: Type.Optional(Type.String({ minLength: 16, maxLength: 200 })) });
const Mode = Type.Union([Type.Literal('live'), Type.Literal('as_of_now')], { description: 'live: viewers follow the stream as it happens; as_of_now: the transcript as it is now, nothing later' });
const Person = Type.Object({ userId: Type.String({ format: 'uuid' }), handle: Type.String(), email: Type.String(), name: Type.String() });
export const Share = Type.Object({
  shareId: Type.String({ format: 'uuid' }),
  mode: Mode,
  createdAt: DateTime,
  person: Type.Union([Person, Type.Null()]),
  team: Type.Union([Type.Object({ teamId: Type.String({ format: 'uuid' }), name: Type.String() }), Type.Null()]),
});
const Ref = Type.String({ minLength: 1, maxLength: 320 });
const Skipped = Type.Object({
  links: Type.Integer({ description: 'Symbolic links (never copied)' }),
  git: Type.Integer({ description: 'Files in .git directories (not copied)' }),
  overLimit: Type.Integer({ description: "Past 20,000 files, 2 GiB, or the new owner's workspace quota" }),
  other: Type.Integer({ description: 'Names the workspace refuses, files that could not be written' }),
});

/** A session of somebody else shared with the caller (GET /v1/sessions/shared-with-me). */
export const SharedSession = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  title: Type.String(),
  updatedAt: DateTime,
  owner: Person,
  shareId: Type.String({ format: 'uuid' }),
  mode: Mode,
  sharedAt: DateTime,
  team: Type.Union([Type.String(), Type.Null()], { description: 'Shared with this team of the caller (null: with the caller by name)' }),
});
/** What the caller may do with a session (GET /v1/sessions/:id/access). */
export const SessionAccess = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  title: Type.String(),
  role: Type.Union([Type.Literal('owner'), Type.Literal('viewer')]),
  mode: Type.Union([Mode, Type.Null()], { description: 'A viewer\'s share' }),
  asOf: Type.Union([DateTime, Type.Null()], { description: 'as_of_now: the moment the transcript is shown as of' }),
  owner: Person,
});
/** A session handed over (POST /v1/sessions/:id/handover). */
export const HandOver = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  owner: Person,
  transcript: Type.Object({ messages: Type.Integer({ description: 'Messages of the conversation so far, kept and given to the new owner\'s agent' }) }),
  workspace: Type.Object({ folder: Type.Union([Type.String(), Type.Null()], { description: "Where the files are in the new owner's workspace (null: none copied)" }), files: Type.Integer(), bytes: Type.Integer(), skipped: Skipped }),
  keptAccess: Type.Boolean(),
});

const browserSessionOf = (req: FastifyRequest) => req.headers[BROWSER_SESSION_HEADER] as string | undefined;

/** Sessions shared read-only with people and teams of the tenant, and handed over (session-shares.service.ts). */
export async function sessionSharesRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { sessionShares, sessions } = opts.core;

  app.get(
    '/sessions/shared-with-me',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Sessions of other people shared with the caller or their teams (read-only), latest activity first',
        response: {
          200: Type.Object({
            sessions: Type.Array(SharedSession),
          }),
          ...errorResponses(401, 403),
        },
      },
    },
    async (req) => sessionShares.sharedWithMe(ctxOf(req)),
  );

  app.get(
    '/share-targets',
    {
      schema: {
        tags: ['sessions'],
        summary: 'People and teams of the caller\'s organisation to share a session with or hand it to, by a part of their name, handle or email',
        querystring: Type.Object({ q: Type.String({ maxLength: 100, default: '' }) }, { additionalProperties: false }),
        response: {
          200: Type.Object({ people: Type.Array(Person, { description: 'From two characters of q on; at most 10' }), teams: Type.Array(Type.Object({ teamId: Type.String({ format: 'uuid' }), name: Type.String(), members: Type.Integer() })) }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (req) => sessionShares.targets(ctxOf(req), { q: req.query.q ?? '' }),
  );

  app.get(
    '/sessions/:id/access',
    {
      schema: {
        tags: ['sessions'],
        summary: 'What the caller may do with a session: its owner, or a viewer of a share (read-only)',
        params: Id,
        headers: BrowserSession,
        response: {
          200: SessionAccess,
          ...errorResponses(401, 404),
        },
      },
    },
    async (req) => sessionShares.access(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req), readable: sessions.readable }),
  );

  app.get(
    '/sessions/:id/shares',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The shares in force of the caller\'s session (owner only)',
        params: Id,
        headers: BrowserSession,
        response: { 200: Type.Object({ shares: Type.Array(Share) }), ...errorResponses(401, 403, 404) },
      },
    },
    async (req) => sessionShares.list(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/:id/shares',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Share the caller\'s session read-only with people and/or teams of their organisation, live or as of now',
        description:
          'Viewers may read the transcript (GET messages), the changes (GET changes) and, live, follow the stream (GET events); every other session route answers them 404. Each view of the transcript or the stream is audited (session.view). A person or team who already has a share gets this one instead. A person or team not of the caller\'s organisation is refused (400, naming the field), like an unknown one.',
        params: Id,
        headers: BrowserSession,
        body: Type.Object(
          {
            people: Type.Optional(Type.Array(Ref, { maxItems: 50, description: 'People by user id, email or handle' })),
            teams: Type.Optional(Type.Array(Ref, { maxItems: 20, description: 'Teams by id or name' })),
            mode: Mode,
          },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ shares: Type.Array(Share) }), ...errorResponses(400, 401, 403, 404, 503) },
      },
    },
    async (req, reply) => reply.status(201).send(await sessionShares.create(ctxOf(req), { id: req.params.id, people: req.body.people, teams: req.body.teams, mode: req.body.mode, browserSession: browserSessionOf(req) })),
  );

  app.delete(
    '/sessions/:id/shares/:shareId',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Revoke a share: its viewers lose the session at once; a live follower\'s stream ends (with share.revoked)',
        params: Type.Object({ id: Type.String({ format: 'uuid' }), shareId: Type.String({ format: 'uuid' }) }),
        headers: BrowserSession,
        response: { 204: Type.Null(), ...errorResponses(401, 403, 404) },
      },
    },
    async (req, reply) => {
      await sessionShares.revoke(ctxOf(req), { id: req.params.id, shareId: req.params.shareId, browserSession: browserSessionOf(req) });
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/sessions/:id/handover',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Hand the caller\'s session to a teammate, who continues it in their own runtime',
        description:
          "The teammate (same organisation, active, whose role may run agents) becomes the owner: their runtime, workspace and cost from now on. The conversation so far is kept by the service and shown before the new messages; the teammate's first turn gives it to their agent as context. The caller's workspace (or `folder` of it) is copied into a new folder of the teammate's (handed-over/<title>-<id>/): symbolic links and .git directories are not copied; at most 20,000 files, 2 GiB and the teammate's quota. The caller keeps a live read-only share unless keepAccess is false; the session's other shares end. 409 turn_running while a turn runs or waits. Audited (session.handover).",
        params: Id,
        headers: BrowserSession,
        body: Type.Object(
          {
            to: Type.String({ minLength: 1, maxLength: 320, description: 'The teammate: user id, email or handle' }),
            folder: Type.Optional(Type.String({ maxLength: 4096, description: 'Copy only this folder of the workspace (default: all of it)' })),
            keepAccess: Type.Optional(Type.Boolean({ default: true, description: 'The caller keeps a live read-only share' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: HandOver,
          ...errorResponses(400, 401, 403, 404, 409, 503),
        },
      },
    },
    async (req) => sessionShares.handOver(ctxOf(req), { id: req.params.id, to: req.body.to, folder: req.body.folder, keepAccess: req.body.keepAccess, browserSession: browserSessionOf(req) }),
  );
}
