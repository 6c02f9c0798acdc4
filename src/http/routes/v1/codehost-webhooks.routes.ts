import { Type } from '@sinclair/typebox';
import { WEBHOOK_MAX_BYTES } from '../../../core/codehost/codehost-contract.js';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { errorResponses } from '../../schemas.js';
import { NotFoundError } from '../../../kernel/errors.js';

const Accepted = Type.Object({
  ok: Type.Boolean(),
  outcome: Type.Union([Type.Literal('queued'), Type.Literal('ignored'), Type.Literal('refused'), Type.Literal('replayed'), Type.Literal('test')], {
    description: 'queued: a run was queued; refused: answered on the issue (or, outside the allowed repositories, only recorded); ignored: not acted on; replayed: this delivery id was received before',
  }),
});

/**
 * Code hosts' webhooks: public, each delivery authenticated by the webhook's secret the host's
 * way (GitHub/Gitea HMAC of the raw body, GitLab's token). The body is taken raw (the signature covers its
 * bytes) and at most WEBHOOK_MAX_BYTES (Fastify answers 413 beyond). Answers 202 (recorded), 200 (a
 * replay), 401 (does not verify), 404 (no such webhook), 413; whatever a verified body holds, never a 5xx.
 */
export async function codehostWebhooksRoutes(app: App, { core }: { core: Core }) {
  const intake = core.codeHostIntake;
  await app.register(async (hook) => {
    hook.removeAllContentTypeParsers();
    hook.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_MAX_BYTES }, (_req, body, done) => done(null, body));
    hook.post(
      '/codehost/webhooks/:hookId',
      {
        config: { auth: 'none' },
        bodyLimit: WEBHOOK_MAX_BYTES,
        // Before the body is read: an unknown id is 404 at once, whatever is being uploaded.
        onRequest: async (req) => {
          if (!(await intake.known((req.params as { hookId: string }).hookId))) throw new NotFoundError('no such webhook');
        },
        schema: {
          tags: ['codehost'],
          summary: "A code host's webhook delivery (GitHub, GitLab or Gitea; verified with the webhook's secret)",
          params: Type.Object({ hookId: Type.String({ description: 'The webhook id of the git host (shown with the webhook URL)' }) }),
          response: { 200: Accepted, 202: Accepted, ...errorResponses(401, 404, 413) },
        },
      },
      async (req, reply) => {
        const r = await intake.receive({
          hookId: (req.params as { hookId: string }).hookId,
          headers: req.headers,
          rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
          requestId: req.id,
        });
        return reply.status(r.status).send({ ok: true, outcome: r.outcome });
      },
    );
  });
}
