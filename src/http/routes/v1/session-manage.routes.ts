import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import { LIST_LIMIT_MAX, SEARCH_LIMIT_MAX } from '../../../core/sessions/session-manage-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

// Not imported from sessions.routes.ts, which imports the list's schemas from here (no circle).
const BROWSER_SESSION_HEADER = 'x-browser-session';
const BrowserSession = Type.Object({ [BROWSER_SESSION_HEADER]: Type.Optional(Type.String({ minLength: 16, maxLength: 200 })) });
const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });
const browserSessionOf = (req: FastifyRequest) => req.headers[BROWSER_SESSION_HEADER] as string | undefined;

/** A session as the list shows it (SPEC.md Session list item, and what managing it added). */
export const SessionListItem = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  title: Type.String(),
  updatedAt: DateTime,
  createdAt: DateTime,
  templateSlug: Type.Union([Type.String(), Type.Null()]),
  pinned: Type.Boolean(),
  archived: Type.Boolean({ description: 'Hidden from the default list; kept, and restorable (PATCH archived: false)' }),
  pinnedAt: Type.Union([DateTime, Type.Null()]),
  archivedAt: Type.Union([DateTime, Type.Null()]),
  claimable: Type.Optional(Type.Boolean({ description: 'A demo-mode session of this browser, not yet claimed (POST /v1/sessions/:id/claim)' })),
  origin: Type.Optional(
    Type.Union([Type.Object({ url: Type.String(), label: Type.String() }), Type.Null()], { description: "The code host's issue or pull request a session was started from (a comment or label there); null for any other session" }),
  ),
});

export const SessionListQuery = Type.Object(
  {
    state: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('archived'), Type.Literal('all')], { description: 'active (default): not archived; archived; all' })),
    pinned: Type.Optional(Type.Boolean({ description: 'true: pinned ones only; false: unpinned ones only' })),
    template: Type.Optional(Type.String({ minLength: 1, maxLength: 63, description: 'Only sessions made from this template (its slug)' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_LIMIT_MAX, description: `Per page: default 100, at most ${LIST_LIMIT_MAX}` })),
    cursor: Type.Optional(Type.String({ maxLength: 300, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const SessionListPage = Type.Object({
  sessions: Type.Array(SessionListItem),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Ask for the next page with ?cursor=; null: this is the last' }),
});

export const SearchResult = Type.Object({
  sessionId: Type.String({ format: 'uuid' }),
  title: Type.String(),
  updatedAt: DateTime,
  pinned: Type.Boolean(),
  archived: Type.Boolean(),
  messageId: Type.Union([Type.String(), Type.Null()], { description: 'The message the snippet is from (open the session at it); null: the title matched best' }),
  role: Type.Union([Type.Literal('title'), Type.Literal('user'), Type.Literal('assistant')]),
  rank: Type.Number(),
  snippet: Type.String({ description: 'Plain text around the match (render as text)' }),
  highlights: Type.Array(Type.Tuple([Type.Integer(), Type.Integer()]), { description: '[start, end) offsets of the matched words in snippet' }),
});

/** Renaming, pinning, archiving, searching and exporting a person's sessions (session-manage.ts). */
export async function sessionManageRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { sessionManage } = opts.core;

  app.patch(
    '/sessions/:id',
    {
      schema: {
        tags: ['sessions'],
        summary: 'Rename, pin or unpin, archive or restore a session (owner only; each field when given)',
        description: 'Neither changes updatedAt (the last activity, which orders the list). An archived session is hidden from the default list, kept, searchable, and can be opened and prompted; archived: false restores it. Audited session.update.',
        params: Id,
        headers: BrowserSession,
        body: Type.Object(
          {
            title: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })),
            pinned: Type.Optional(Type.Boolean()),
            archived: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: { 200: SessionListItem, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => sessionManage.update(ctxOf(req), { id: req.params.id, browserSession: browserSessionOf(req), ...req.body }),
  );

  app.get(
    '/sessions/search',
    {
      schema: {
        tags: ['sessions'],
        summary: "Full-text search over the caller's own sessions: titles and the text of prompts and answers (not tool output)",
        description:
          'English text search (words are matched by their stem; "a phrase"; -word excludes; or). One result per session, its best match, best first, archived sessions included (they say so). Sessions whose turns ended before the index existed are found once the index-sessions job has run (POST /v1/jobs {"kind":"index-sessions"}).',
        querystring: Type.Object(
          {
            q: Type.String({ minLength: 1, maxLength: 200 }),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: SEARCH_LIMIT_MAX, description: `default 20, at most ${SEARCH_LIMIT_MAX}` })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ results: Type.Array(SearchResult) }), ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => sessionManage.search(ctxOf(req), req.query),
  );

  app.get(
    '/sessions/:id/export',
    {
      schema: {
        tags: ['sessions'],
        summary: 'The session as a Markdown or JSON document (messages, tool calls, workspace changes), as a download',
        description: 'format=markdown (default) or json. The JSON has the transcript exactly as GET /v1/sessions/:id/messages gives it and the whole session\'s changes (GET /v1/sessions/:id/changes). Owner only; audited session.export.',
        params: Id,
        headers: BrowserSession,
        querystring: Type.Object({ format: Type.Optional(Type.Union([Type.Literal('markdown'), Type.Literal('json')])) }, { additionalProperties: false }),
        response: { 200: Type.Unsafe<string>({ type: 'string', description: 'text/markdown or application/json, with a Content-Disposition filename' }), ...errorResponses(400, 401, 403, 404, 503) },
      },
    },
    async (req, reply) => {
      const r = await sessionManage.export(ctxOf(req), { id: req.params.id, format: req.query.format ?? 'markdown', browserSession: browserSessionOf(req) });
      reply.header('content-disposition', `attachment; filename="${r.filename}"`);
      reply.header('cache-control', 'no-store');
      reply.type(r.contentType);
      return reply.send(r.body);
    },
  );
}
