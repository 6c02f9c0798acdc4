import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { MEMORY_CONTENT_MAX, MEMORY_KINDS, MEMORY_LIMIT_DEFAULT, MEMORY_LIMIT_MAX, MEMORY_QUERY_MAX, MEMORY_VISIBILITIES } from '../../../core/memories/memory-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Uuid = Type.String({ format: 'uuid' });
const Enum = (values: readonly string[], description?: string) => Type.Unsafe<string>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
const Kind = Enum(MEMORY_KINDS);
const Visibility = Enum(MEMORY_VISIBILITIES);

export const Memory = Type.Object({
  id: Uuid,
  kind: Kind,
  content: Type.String(),
  visibility: Visibility,
  status: Enum(
    ['active', 'quarantined'],
    'quarantined: saved by the agent and reading like instructions to a model (signals), or held because the tenant holds every memory an agent saves (settings.memory.agentSavesNeedRelease); never injected until its author releases it',
  ),
  source: Enum(['api', 'agent']),
  author: Type.Object({ id: Uuid, handle: Type.String() }),
  signals: Type.Array(Type.String(), { description: 'What the screening found in its text when it was written (instruction signals: addressed-to-model, cancel-instructions, reprogramming, prompt-markers, url, command, secrecy); empty: nothing' }),
  embedded: Type.Boolean({ description: "Has an embedding of the tenant's current embedder (vector search finds it)" }),
  sessionId: Type.Optional(Type.Union([Uuid, Type.Null()], { description: 'Memories saved by the agent: the session it was saved in' })),
  messageId: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'Memories saved by the agent: the message it was saved from' })),
  createdAt: DateTime,
  updatedAt: DateTime,
});
const Id = Type.Object({ id: Uuid });

/**
 * SPEC.md "Memory endpoints". Visibility: authors see their own (memory.read_own); team memories are seen
 * by users sharing a team with the author (memory.read_team); org memories by the tenant (memory.read_org).
 * A memory the caller cannot see is 404, like one that does not exist.
 */
export async function memoriesRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { memories } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);

  app.get(
    '/memories',
    {
      schema: {
        tags: ['memories'],
        summary: 'Visible memories, newest first; with q, best matches first (hybrid or full-text search, see searchMode)',
        querystring: Type.Object({
          q: Type.Optional(Type.String({ maxLength: MEMORY_QUERY_MAX, description: 'Search text (web-search syntax: "quoted phrases", -excluded words, or)' })),
          kind: Type.Optional(Kind),
          visibility: Type.Optional(Visibility),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MEMORY_LIMIT_MAX, default: MEMORY_LIMIT_DEFAULT })),
        }),
        response: {
          200: Type.Object({
            memories: Type.Array(Memory),
            searchMode: Type.Optional(Enum(['hybrid', 'fulltext'], 'With q: hybrid (full-text fused with vector search) or fulltext (the tenant has no embedder)')),
          }),
          ...errs(),
        },
      },
    },
    async (req) => memories.list(ctxOf(req), req.query),
  );

  app.post(
    '/memories',
    {
      schema: {
        tags: ['memories'],
        summary:
          "Write a memory (memory.write); private unless visibility is set, which needs memory.share; 201 with the memory (its text normalised). A team or org memory that reads like instructions to a model is 422 memory_flagged; per user, at most AGENTWS_MEMORY_WRITES_PER_MINUTE writes a minute (429, Retry-After) and AGENTWS_MEMORY_QUOTA memories kept (409 memory_quota_exceeded)",
        body: Type.Object(
          { kind: Kind, content: Type.String({ minLength: 1, maxLength: MEMORY_CONTENT_MAX }), visibility: Type.Optional(Visibility) },
          { additionalProperties: false },
        ),
        response: { 201: Memory, ...errs(409, 422, 429) },
      },
    },
    async (req, reply) => reply.status(201).send(await memories.create(ctxOf(req), req.body)),
  );

  app.patch(
    '/memories/:id',
    {
      schema: {
        tags: ['memories'],
        summary: "Change a memory's visibility (its author only; widening needs memory.share; widening one that reads like instructions to a model is 422 memory_flagged)",
        params: Id,
        body: Type.Object({ visibility: Visibility }, { additionalProperties: false }),
        response: { 200: Memory, ...errs(404, 409, 422) },
      },
    },
    async (req) => memories.update(ctxOf(req), req.params.id, req.body),
  );

  app.delete(
    '/memories/:id',
    { schema: { tags: ['memories'], summary: 'Delete a memory (its author, or memory.delete); 204', params: Id, response: { 204: Type.Null(), ...errs(404) } } },
    async (req, reply) => {
      await memories.remove(ctxOf(req), req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/memories/:id/release',
    {
      schema: {
        tags: ['memories'],
        summary: 'Release a quarantined memory (its author only): it becomes active and may reach the agent',
        params: Id,
        response: { 200: Memory, ...errs(404) },
      },
    },
    async (req) => memories.release(ctxOf(req), req.params.id),
  );
}
