import { Type, type TSchema } from '@sinclair/typebox';
import { DELIVERIES_LIMIT_MAX } from '../../../core/codehost/codehost-admin.service.js';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Kind = Type.Union([Type.Literal('github'), Type.Literal('gitlab'), Type.Literal('gitea')], { description: 'Which host sends the deliveries: how they are signed and read' });
export const Webhook = Type.Object({
  host: Type.String(),
  kind: Nullable(Kind),
  webhookUrl: Nullable(Type.String({ description: "Paste it as the webhook's URL at the host; null until the secret is generated" })),
  enabled: Type.Boolean(),
  secretSet: Type.Boolean({ description: 'The secret is stored sealed and never returned again' }),
  mention: Type.String({ description: 'A comment starting with it asks for a run' }),
  label: Type.String({ description: 'Adding this label to an issue or pull request asks for a run' }),
  repos: Type.Array(Type.String(), { description: 'Repository patterns that may trigger runs; empty: none' }),
});
export const Delivery = Type.Object({
  id: Type.String(),
  deliveryId: Type.String(),
  event: Type.String(),
  outcome: Type.Union([Type.Literal('queued'), Type.Literal('ignored'), Type.Literal('refused'), Type.Literal('test')]),
  reason: Nullable(Type.String()),
  repo: Nullable(Type.String()),
  targetType: Nullable(Type.Union([Type.Literal('issue'), Type.Literal('pull_request')])),
  targetNumber: Nullable(Type.Integer()),
  targetUrl: Nullable(Type.String()),
  actorLogin: Nullable(Type.String()),
  handle: Nullable(Type.String({ description: "The tenant's person the host's account mapped to" })),
  replays: Type.Integer({ description: 'How often the host sent the same delivery again (not run again)' }),
  receivedAt: DateTime,
});
const Name = Type.Object({ name: Type.String({ maxLength: 40 }) });

/**
 * A git host's webhook for issues and review comments that become agents' pull requests
 * (codehost-admin.service.ts): admin.manage_providers. The secret is returned once, by POST …/secret.
 */
export async function codeHostAdminRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { codeHostAdmin } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, 404, ...s);
  const tags = ['connectors'];
  const base = '/admin/connectors/git/:name/webhook';

  app.get(base, { schema: { tags, summary: "A git host's webhook: its URL, mention, label and repositories (never its secret)", params: Name, response: { 200: Webhook, ...errs() } } }, async (req) =>
    codeHostAdmin.get(ctxOf(req), req.params.name),
  );

  app.put(
    base,
    {
      schema: {
        tags,
        summary: "Change the webhook's settings (only what is given)",
        params: Name,
        body: Type.Object(
          {
            kind: Type.Optional(Kind),
            mention: Type.Optional(Type.String({ maxLength: 61, description: '@ and a name, e.g. @agent' })),
            label: Type.Optional(Type.String({ maxLength: 50 })),
            repos: Type.Optional(Type.Array(Type.String({ maxLength: 300 }), { maxItems: 100, description: 'Patterns such as org/* or org/**' })),
            enabled: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: { 200: Webhook, ...errs(409) },
      },
    },
    async (req) => codeHostAdmin.update(ctxOf(req), req.params.name, req.body),
  );

  app.post(
    `${base}/secret`,
    {
      schema: {
        tags,
        summary: "Generate the webhook's secret (the first time: its URL too, and turns it on) or rotate it; 201 with the secret, shown this once",
        params: Name,
        body: Type.Object({ kind: Type.Optional(Kind) }, { additionalProperties: false, description: '{} to rotate; the kind the first time' }),
        response: { 201: Type.Object({ ...Webhook.properties, webhookUrl: Type.String(), secret: Type.String() }), ...errs() },
      },
    },
    async (req, reply) => {
      reply.header('cache-control', 'no-store');
      return reply.status(201).send(await codeHostAdmin.rotateSecret(ctxOf(req), req.params.name, req.body));
    },
  );

  app.get(
    `${base}/deliveries`,
    {
      schema: {
        tags,
        summary: "The host's latest deliveries, newest first, with their outcome (kept two days)",
        params: Name,
        querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: DELIVERIES_LIMIT_MAX, default: 50 })) }),
        response: { 200: Type.Object({ deliveries: Type.Array(Delivery) }), ...errs() },
      },
    },
    async (req) => ({ deliveries: await codeHostAdmin.deliveries(ctxOf(req), req.params.name, req.query.limit) }),
  );

  app.post(
    `${base}/test`,
    {
      schema: {
        tags,
        summary: 'Send a test delivery, signed with the secret, through the intake (verified and recorded; nothing runs)',
        params: Name,
        response: { 200: Type.Object({ outcome: Type.String(), deliveryId: Type.String() }), ...errs(409, 503) },
      },
    },
    async (req) => codeHostAdmin.test(ctxOf(req), req.params.name),
  );
}
