import type { ServerResponse } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../../core/create-core.js';
import { UnauthenticatedError } from '../../../kernel/errors.js';
import { GATEWAY_EVENTS_CHANNEL, type GatewayEvent } from '../../../core/gateways/pairing.service.js';
import type { App } from '../../app-type.js';
import { sseComment, sseFrame } from '../../../lib/sse-frame.js';
import { openEventStream } from '../../sse.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const Gateway = Type.Object({
  id: Type.String({ format: 'uuid' }),
  kind: Type.String({ description: 'bot_chat or team_chat' }),
  botUsername: Type.String(),
  botId: Type.String(),
  webhookUrl: Type.String({ description: 'Empty string when no webhook is registered' }),
  enabled: Type.Boolean(),
  createdAt: DateTime,
  updatedAt: DateTime,
});
export const Code = Type.Object({
  id: Type.String({ format: 'uuid' }),
  gatewayId: Type.String({ format: 'uuid' }),
  code: Type.String(),
  externalUserId: Type.String(),
  externalUserName: Type.String(),
  expiresAt: DateTime,
  createdAt: DateTime,
  consumedAt: Type.Union([DateTime, Type.Null()]),
});
const PairedUser = Type.Object({
  id: Type.String({ format: 'uuid' }),
  gatewayId: Type.String({ format: 'uuid' }),
  externalUserId: Type.String(),
  externalUserName: Type.String(),
  platformDisplayName: Type.String(),
  pairedAt: DateTime,
});
const GatewayId = Type.String({ format: 'uuid' });
const Id = Type.Object({ id: GatewayId });
/** How often the gateway stream looks for pending codes (SPEC.md Limits). */
const GATEWAY_POLL_MS = 2000;

/**
 * SPEC.md "Gateway endpoints" and the gateway stream. Authentication per SPEC.md Authentication 5:
 * admin.manage_providers, bypassed in local development (no service API key), where requests without
 * credentials act as the operator. The platform webhook itself is public and proves itself with the
 * gateway's webhook secret.
 */
export async function gatewaysRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { gateways, pairing, auth, bus } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, 404, ...s);
  const streams = new Set<ServerResponse>();

  // Runs after authentication (onRequest, before the body is read): without a caller, the operator in
  // local development, else 401.
  async function developmentFallback(req: FastifyRequest): Promise<void> {
    if (req.actor) return;
    req.actor = await auth.developmentActor();
    if (!req.actor) throw new UnauthenticatedError('authentication required', { hint: 'Send Authorization: Bearer <access token or API key>.' });
  }
  const gatewayRoute = { config: { auth: 'optional' as const }, onRequest: developmentFallback };

  app.addHook('preClose', async () => {
    for (const res of streams) res.end();
  });

  app.get('/gateways', { ...gatewayRoute, schema: { tags: ['gateways'], summary: "The tenant's gateways (tokens and secrets never included)", response: { 200: Type.Object({ gateways: Type.Array(Gateway) }), ...errs() } } }, async (req) => ({
    gateways: await gateways.list(ctxOf(req)),
  }));

  app.post(
    '/gateways',
    {
      ...gatewayRoute,
      schema: {
        tags: ['gateways'],
        summary: 'Create a gateway (bot_chat or team_chat; any other kind is 400); 201 with the gateway',
        body: Type.Object({ kind: Type.String({ maxLength: 40 }), botToken: Type.String({ minLength: 1, maxLength: 4000 }), botUsername: Type.String({ maxLength: 200 }), botId: Type.String({ maxLength: 200 }) }),
        response: { 201: Gateway, ...errs() },
      },
    },
    async (req, reply) => reply.status(201).send(await gateways.create(ctxOf(req), req.body)),
  );

  app.patch(
    '/gateways/:id',
    {
      ...gatewayRoute,
      schema: {
        tags: ['gateways'],
        summary: 'Enable or disable a gateway, or rotate its bot token',
        params: Id,
        body: Type.Object({ enabled: Type.Optional(Type.Boolean()), botToken: Type.Optional(Type.String({ minLength: 1, maxLength: 4000 })) }, { additionalProperties: false }),
        response: { 200: Gateway, ...errs() },
      },
    },
    async (req) => gateways.update(ctxOf(req), req.params.id, req.body),
  );

  app.delete('/gateways/:id', { ...gatewayRoute, schema: { tags: ['gateways'], summary: 'Delete a gateway with its paired users and pairing codes', params: Id, response: { 204: Type.Null(), ...errs() } } }, async (req, reply) => {
    await gateways.remove(ctxOf(req), req.params.id);
    return reply.status(204).send(null);
  });

  app.post(
    '/gateways/:id/webhook/register',
    {
      ...gatewayRoute,
      schema: {
        tags: ['gateways'],
        summary: 'Register the webhook with the platform (https, public addresses only; new secret); 502 when the platform is unreachable',
        params: Id,
        body: Type.Object({ webhookUrl: Type.String({ minLength: 1, maxLength: 2000 }) }),
        response: { 200: Gateway, ...errs(502) },
      },
    },
    async (req) => gateways.registerWebhook(ctxOf(req), req.params.id, req.body),
  );

  app.get('/gateways/:id/paired-users', { ...gatewayRoute, schema: { tags: ['gateways'], summary: 'Chat users paired through the gateway', params: Id, response: { 200: Type.Object({ pairedUsers: Type.Array(PairedUser) }), ...errs() } } }, async (req) => ({
    pairedUsers: await pairing.pairedUsers(ctxOf(req), req.params.id),
  }));

  app.delete(
    '/gateways/:id/paired-users/:externalUserId',
    { ...gatewayRoute, schema: { tags: ['gateways'], summary: 'Unpair a chat user (they must pair again)', params: Type.Object({ id: GatewayId, externalUserId: Type.String({ maxLength: 200 }) }), response: { 204: Type.Null(), ...errs() } } },
    async (req, reply) => {
      await pairing.revoke(ctxOf(req), { gatewayId: req.params.id, externalUserId: req.params.externalUserId });
      return reply.status(204).send(null);
    },
  );

  app.get('/gateways/:id/pairing-codes', { ...gatewayRoute, schema: { tags: ['gateways'], summary: 'Pending pairing codes (unexpired, unconsumed)', params: Id, response: { 200: Type.Object({ codes: Type.Array(Code) }), ...errs() } } }, async (req) => ({
    codes: await pairing.listCodes(ctxOf(req), req.params.id),
  }));

  const CodeParams = Type.Object({ id: GatewayId, code: Type.String({ maxLength: 32 }) });
  // Pairing codes are never logged (DESIGN.md 8): the access log writes [redacted] for them.
  const codeRoute = { ...gatewayRoute, config: { ...gatewayRoute.config, logRedact: ['code'] } };
  app.post(
    '/gateways/:id/pairing-codes/:code/approve',
    {
      ...codeRoute,
      schema: {
        tags: ['gateways'],
        summary: 'Approve a pending code: the chat user is paired (404 unknown or expired; 429 after repeated failures)',
        params: CodeParams,
        response: { 200: Type.Object({ ok: Type.Literal(true), user: Type.Object({ externalUserId: Type.String(), externalUserName: Type.String() }) }), ...errs(429) },
      },
    },
    async (req) => {
      const r = await pairing.approve(ctxOf(req), { gatewayId: req.params.id, code: req.params.code });
      return { ok: r.ok, user: r.user };
    },
  );

  app.delete('/gateways/:id/pairing-codes/:code', { ...codeRoute, schema: { tags: ['gateways'], summary: 'Deny a pending code (no paired user)', params: CodeParams, response: { 204: Type.Null(), ...errs() } } }, async (req, reply) => {
    await pairing.deny(ctxOf(req), { gatewayId: req.params.id, code: req.params.code });
    return reply.status(204).send(null);
  });

  app.get(
    '/gateways/:id/events',
    {
      ...gatewayRoute,
      schema: {
        tags: ['gateways'],
        summary: 'SSE: pairing.code_created every 2 s while codes are pending; pairing.code_approved at once',
        params: Id,
        produces: ['text/event-stream'],
        response: { 200: Type.String({ description: 'text/event-stream' }), ...errs() },
      },
    },
    async (req, reply) => {
      const c = ctxOf(req);
      const { id: gatewayId, tenantId } = await gateways.load(c, req.params.id);
      const { res, onClose } = openEventStream(reply);
      streams.add(res);
      let seq = 0;
      const emit = (event: string, data: unknown) => res.write(sseFrame({ event, id: `${Date.now()}-${++seq}`, data }));
      const announced = new Set<string>();
      const approved = (codeId: string, userId: string) => {
        if (announced.has(codeId) || res.writableEnded) return;
        announced.add(codeId);
        emit('pairing.code_approved', { kind: 'pairing.code_approved', gatewayId, userId });
      };
      let since = new Date(Date.now() - 1000);
      const poll = async () => {
        try {
          const from = since;
          since = new Date();
          const [codes, approvals] = await Promise.all([pairing.pendingForStream(tenantId, gatewayId), pairing.approvedSince(tenantId, gatewayId, new Date(from.getTime() - 1000))]);
          // Approvals normally arrive at once through the event bus; this catches those that cannot.
          for (const a of approvals) approved(a.codeId, a.userId);
          if (codes.length && !res.writableEnded) emit('pairing.code_created', { kind: 'pairing.code_created', codes });
        } catch (err) {
          req.log.warn({ err: (err as Error).message }, 'gateway stream poll failed');
        }
      };
      const timer = setInterval(poll, GATEWAY_POLL_MS);
      const heartbeat = setInterval(() => res.write(sseComment('ping')), 15_000);
      const unsubscribe = await bus.subscribe(GATEWAY_EVENTS_CHANNEL, (payload) => {
        const e = payload as GatewayEvent;
        if (e?.gatewayId !== gatewayId || res.writableEnded) return;
        if (e.type === 'pairing.code_approved') approved(e.codeId ?? crypto.randomUUID(), e.userId ?? '');
        else void poll();
      });
      void poll();
      onClose(() => {
        clearInterval(timer);
        clearInterval(heartbeat);
        streams.delete(res);
        void unsubscribe();
      });
    },
  );

  // The platforms' webhook: public, authenticated by the gateway's webhook secret over the raw body.
  await app.register(async (hook) => {
    hook.removeAllContentTypeParsers();
    hook.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_req, body, done) => done(null, body));
    hook.post(
      '/gateways/:id/webhook',
      {
        config: { auth: 'none' },
        schema: { tags: ['gateways'], summary: "The chat platform's webhook (verified with the gateway's webhook secret)", params: Id, response: { 200: Type.Object({ ok: Type.Boolean() }), ...errorResponses(401) } },
      },
      async (req) => {
        await pairing.receive({ gatewayId: (req.params as { id: string }).id, headers: req.headers, rawBody: (req.body as Buffer | undefined) ?? Buffer.alloc(0) });
        return { ok: true };
      },
    );
  });
}
