import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { MAX_EMBEDDING_DIMENSIONS } from '../../../core/embeddings/model-key.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';
import { Job } from './jobs.routes.js';

export const Embedder = Type.Object({
  provider: Type.String({ description: 'The provider\'s name' }),
  model: Type.String(),
  dimensions: Type.Integer(),
  modelKey: Type.String({ description: '"<provider id>/<model>/<dimensions>": the vector space memories are embedded in' }),
  updatedBy: Type.String(),
  updatedAt: DateTime,
});

/** The tenant's embedder (admin.manage_providers, like the providers it runs on). */
export async function embedderRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { embedders } = opts.core;

  app.get(
    '/admin/embedder',
    {
      schema: {
        tags: ['memories'],
        summary: 'The embedder (null when none) and how many memories have a vector of its model',
        response: {
          200: Type.Object({
            embedder: Type.Union([Embedder, Type.Null()]),
            memories: Type.Optional(Type.Object({ embedded: Type.Integer(), pending: Type.Integer({ description: 'Memories lacking a vector of this model (a backfill embeds them)' }) })),
          }),
          ...errorResponses(401, 403),
        },
      },
    },
    async (req) => embedders.get(ctxOf(req)),
  );

  app.put(
    '/admin/embedder',
    {
      schema: {
        tags: ['memories'],
        summary: 'Set the embedder: probes the model once; a change of model queues a backfill re-embedding every memory',
        body: Type.Object(
          {
            provider: Type.String({ minLength: 1, maxLength: 40, description: 'Name of an enabled openai or openai-compatible provider of the tenant' }),
            model: Type.String({ minLength: 1, maxLength: 200, description: 'Embeddings model id, e.g. text-embedding-3-small, nomic-embed-text' }),
            dimensions: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_EMBEDDING_DIMENSIONS, description: 'Expected vector length, checked against the model\'s answer (learnt when omitted)' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            embedder: Embedder,
            changed: Type.Boolean({ description: 'The model key differs from the previous embedder\'s' }),
            pending: Type.Integer({ description: 'Memories lacking a vector of this model' }),
            backfill: Type.Union([Job, Type.Null()], { description: 'The re-embedding job queued with a change of model' }),
          }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (req) => embedders.set(ctxOf(req), req.body),
  );

  app.delete(
    '/admin/embedder',
    { schema: { tags: ['memories'], summary: 'Clear the embedder; stored vectors stay, search answers on full text', response: { 204: Type.Null(), ...errorResponses(401, 403) } } },
    async (req, reply) => {
      await embedders.clear(ctxOf(req));
      return reply.status(204).send(null);
    },
  );
}
