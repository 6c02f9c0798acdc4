import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';
import { BROWSER_SESSION_HEADER } from './sessions.routes.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });
const BrowserSession = Type.Object({ [BROWSER_SESSION_HEADER]: Type.Optional(Type.String({ minLength: 16, maxLength: 200 })) });
const MessageId = Type.String({ minLength: 1, maxLength: 100, pattern: '^msg_[A-Za-z0-9]+$', description: "A turn: its prompt's message id (a user message of GET /v1/sessions/:id/messages)" });

export const FileChange = Type.Object({
  path: Type.String(),
  status: Type.Union([Type.Literal('added'), Type.Literal('modified'), Type.Literal('deleted'), Type.Literal('renamed')]),
  from: Type.Optional(Type.String({ description: "A renamed file's old path" })),
  additions: Type.Integer(),
  deletions: Type.Integer(),
  binary: Type.Boolean({ description: 'Named only; no diff' }),
  diff: Type.String({ description: 'Unified diff with 3 lines of context; empty for a binary or renamed file' }),
  truncated: Type.Boolean({ description: 'The diff was cut at 256 KiB (or left out past 4 MiB of diffs in one answer)' }),
});
const Totals = Type.Object({ files: Type.Integer(), additions: Type.Integer(), deletions: Type.Integer() });
export const ChangeSet = Type.Object({
  sessionId: Type.String(),
  messageId: Type.Union([Type.String(), Type.Null()], { description: 'The turn; null for the whole session' }),
  files: Type.Array(FileChange),
  totals: Totals,
  turns: Type.Array(Type.Object({ messageId: Type.String(), files: Type.Integer(), additions: Type.Integer(), deletions: Type.Integer(), paths: Type.Array(Type.String(), { description: 'The first 20 paths it changed' }), reverted: Type.Boolean() }), { description: "The session's turns with their counts (whole-session answer only)" }),
  reverted: Type.Union([Type.Object({ messageId: Type.String(), turns: Type.Integer() }), Type.Null()], { description: 'The turn the session is undone to (it and every later turn), or null' }),
  snapshots: Type.Boolean({ description: 'The service keeps snapshots of the workspace around each turn (AGENTWS_RUNTIME_SNAPSHOTS); false: nothing is listed, undo and redo are 409 snapshots_off' }),
  recorded: Type.Boolean({ description: "false: this turn's (or no turn's) snapshots were taken (taken before snapshots were on, or a snapshot failed), so its changes are not known" }),
  pending: Type.Boolean({ description: 'The snapshot after the turn is still being taken (the turn runs, or has just ended): ask again' }),
  notKept: Type.Array(Type.String(), { description: 'Files larger than the snapshot limit (10 MiB): not kept, so neither diffed nor undone' }),
});

const browserSessionOf = (req: FastifyRequest) => req.headers[BROWSER_SESSION_HEADER] as string | undefined;

/** What a session's turns changed in the workspace; undo and redo of turns (session-changes.ts). */
export async function sessionChangesRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { sessionChanges } = opts.core;

  app.get(
    '/sessions/:id/changes',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The files the session changed in the workspace (or one turn, with messageId), with line counts and unified diffs',
        params: Id,
        querystring: Type.Object({ messageId: Type.Optional(MessageId) }, { additionalProperties: false }),
        headers: BrowserSession,
        response: { 200: ChangeSet, ...errorResponses(400, 401, 404, 502, 503) },
      },
    },
    async (req) => sessionChanges.list(ctxOf(req), { id: req.params.id, messageId: req.query.messageId, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/:id/revert',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Undo a turn and every later one: the workspace files and the transcript as before it',
        description: '409 turn_running while a turn runs or is queued; 409 snapshots_off when the runtimes keep no snapshots. Redo with POST /v1/sessions/:id/unrevert until the next prompt, which drops the undone turns. Needs agents.create.',
        params: Id,
        headers: BrowserSession,
        body: Type.Object({ messageId: MessageId }, { additionalProperties: false }),
        response: { 200: ChangeSet, ...errorResponses(400, 401, 403, 404, 409, 502, 503) },
      },
    },
    async (req) => sessionChanges.revert(ctxOf(req), { id: req.params.id, messageId: req.body.messageId, browserSession: browserSessionOf(req) }),
  );

  app.post(
    '/sessions/:id/unrevert',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Redo what the last undo undid',
        description: '409 nothing_to_redo when no turn is undone; 409 turn_running while a turn runs or is queued. Needs agents.create.',
        params: Id,
        headers: BrowserSession,
        response: { 200: ChangeSet, ...errorResponses(401, 403, 404, 409, 502, 503) },
      },
    },
    async (req) => sessionChanges.unrevert(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req) }),
  );
}
