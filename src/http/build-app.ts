import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import websocket from '@fastify/websocket';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyReply } from 'fastify';
import type { Logger as PinoLogger } from 'pino';
import type { Config } from '../config/config.schema.js';
import type { Core } from '../core/create-core.js';
import { RateLimitedError } from '../kernel/errors.js';
import { AccessLog, lazyChildLogger } from './access-log.js';
import { drainUnreadBody } from './early-response.js';
import { hostCheck } from './host-check.js';
import { registerMetrics } from './metrics.js';
import { registerErrorHandler } from './error-handler.js';
import { healthRoutes } from './routes/health.routes.js';
import { webRoutes } from './routes/web.routes.js';
import { docsRoutes } from './routes/docs.routes.js';
import { authPlugin } from './plugins/auth.js';
import { adminRoutes } from './routes/v1/admin.routes.js';
import { authRoutes } from './routes/v1/auth.routes.js';
import { runtimeRoutes } from './routes/v1/runtime.routes.js';
import { sessionsRoutes } from './routes/v1/sessions.routes.js';
import { sessionChangesRoutes } from './routes/v1/session-changes.routes.js';
import { sessionModelsRoutes } from './routes/v1/session-models.routes.js';
import { sessionSharesRoutes } from './routes/v1/session-shares.routes.js';
import { sessionManageRoutes } from './routes/v1/session-manage.routes.js';
import { gatewaysRoutes } from './routes/v1/gateways.routes.js';
import { connectorsGitRoutes } from './routes/v1/connectors-git.routes.js';
import { codehostWebhooksRoutes } from './routes/v1/codehost-webhooks.routes.js';
import { codeHostAdminRoutes } from './routes/v1/codehost-admin.routes.js';
import { memoriesRoutes } from './routes/v1/memories.routes.js';
import { teamsRoutes } from './routes/v1/teams.routes.js';
import { tokensRoutes } from './routes/v1/tokens.routes.js';
import { embedderRoutes } from './routes/v1/embedder.routes.js';
import { jobsRoutes } from './routes/v1/jobs.routes.js';
import { orchestrateRoutes } from './routes/v1/orchestrate.routes.js';
import { skillsRoutes } from './routes/v1/skills.routes.js';
import { runnersRoutes } from './routes/v1/runners.routes.js';
import { setupRoutes } from './routes/v1/setup.routes.js';
import { mcpConnectorsRoutes } from './routes/v1/mcp-connectors.routes.js';
import { retentionRoutes } from './routes/v1/retention.routes.js';
import { privacyRoutes } from './routes/v1/privacy.routes.js';
import { workspaceRoutes } from './routes/v1/workspace.routes.js';
import { scimAdminRoutes, scimRoutes } from './routes/scim.routes.js';
import { ErrorBody } from './schemas.js';
import type { Socket } from 'node:net';
import { RUNNER_PATHS } from '../core/runtime/host/runner-protocol.js';
import { TERMINAL_INPUT_MAX_CHARS } from '../core/terminal/terminal.service.js';
import { terminalRoutes } from './routes/v1/terminal.routes.js';
import { validatorCompilerFactory } from './validation.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

import type { App } from './app-type.js';

export type { App };

export interface BuildAppOptions {
  logger?: PinoLogger;
}

/** Builds the HTTP app on the core. It never listens: `aws serve` and the tests decide where. */
export async function buildApp(core: Core, config: Config, options: BuildAppOptions = {}): Promise<App> {
  // Where @fastify/websocket hears upgrades: only the API's (a runner's channel is not fastify's).
  const apiUpgrades = new EventEmitter();
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger as FastifyBaseLogger } : { logger: false }),
    logController: new AccessLog(config.accessLog),
    childLoggerFactory: (logger, bindings, opts) => lazyChildLogger(logger, bindings, opts),
    trustProxy: config.server.trustProxy,
    // The request id is settled before fastify sees the request (serverFactory below): a caller's (or
    // proxy's) sane X-Request-Id is kept so logs correlate across hops, otherwise a new UUID.
    genReqId: (req) => (req.headers['x-request-id'] as string | undefined) ?? randomUUID(),
    // Echoing the id here rather than in an onRequest hook keeps a hook runner off every request.
    serverFactory: (handler, opts) => {
      // Node answers an HTTP/1.1 request without Host with its own 400; in demo mode the Host check
      // answers it (421, in the error envelope) like any other host it does not know.
      const server = http.createServer({ requireHostHeader: !config.auth.allowAnonymous }, (req, res) => {
        const given = req.headers['x-request-id'];
        const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
        req.headers['x-request-id'] = id;
        res.setHeader('x-request-id', id);
        // The runner channel's requests (runner-protocol.ts) stream both ways and are not /v1 API: they
        // never enter fastify (no body parsing, no schema, no rate limit per person).
        if (req.url?.startsWith('/runner/') && core.fleet) return core.fleet.handle(req, res);
        handler(req, res);
      });
      // A runner dials in and the connection becomes its channel.
      server.on('upgrade', (req, socket, head) => {
        if (core.fleet && req.url?.split('?')[0] === RUNNER_PATHS.connect) return void core.fleet.accept(req, socket as Socket, head);
        // The API's WebSockets (the workspace terminal) go through fastify's routing (@fastify/websocket
        // takes them from apiUpgrades): authenticated, validated and refused like any request.
        if (req.url?.startsWith('/v1/')) return void apiUpgrades.emit('upgrade', req, socket, head);
        socket.destroy();
      });
      // What fastify sets on the servers it creates itself (keep-alive longer than a proxy's pool).
      const o = opts as { keepAliveTimeout?: number; requestTimeout?: number; connectionTimeout?: number };
      server.keepAliveTimeout = o.keepAliveTimeout ?? 72_000;
      server.requestTimeout = o.requestTimeout ?? 0;
      server.setTimeout(o.connectionTimeout ?? 0);
      return server;
    },
    // Bodies typed exactly, query/params/headers coerced, every string well-formed (validation.ts).
    schemaController: { compilersFactory: { buildValidator: validatorCompilerFactory() as never } },
    // Errors fastify raises before routing (an undecodable or overlong path) get the error envelope too.
    frameworkErrors: (err, req, reply) => {
      const status = err.statusCode ?? 400;
      drainUnreadBody(req, reply as FastifyReply);
      const error = status === 414 ? 'uri_too_long' : status >= 500 ? 'internal_error' : 'validation_failed';
      return (reply as FastifyReply).status(status).send({ error, message: frameworkMessage(err), requestId: req.id });
    },
    return503OnClosing: true,
    // The route schemas bound each param (a chat platform's user id may take 200 characters); the router's
    // own limit (default 100) only stops what no schema would accept.
    routerOptions: { maxParamLength: 256 },
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  registerErrorHandler(app);
  app.addSchema(ErrorBody);
  // Demo mode answers without a token: only requests addressed to this service by name (host-check.ts).
  if (config.auth.allowAnonymous) app.addHook('onRequest', hostCheck(config.server.publicUrl));

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Agent Workspace Service API',
        version: '1',
        description: 'Multi-tenant API in front of the opencode agent runtime. All routes are under /v1, except GET /metrics (Prometheus).',
      },
      servers: [{ url: config.server.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT, personal access token (agentws_pat_…) or service API key' },
        },
      },
      security: [{ bearer: [] }],
    },
    // Keep health probes out of the API document: it describes /v1 only.
    hiddenTag: 'health',
  });

  // Before every other route: its hooks count the requests of the routes registered after them.
  registerMetrics(app, core, config);
  await app.register(healthRoutes, { core });
  await app.register(webRoutes);
  // The docs at /docs and the API reference at /docs/api: public, no sign-in (docs.routes.ts).
  await app.register(docsRoutes);
  // WebSocket routes (the workspace terminal): a message is at most a paste of keystrokes; no compression
  // (a keystroke is a few bytes, and compression state per socket costs memory).
  await app.register(websocket, { options: { server: apiUpgrades as never, maxPayload: TERMINAL_INPUT_MAX_CHARS * 4, perMessageDeflate: false } });
  await app.register(
    async (v1) => {
      // Limits are opted into per route (`config.rateLimit`): today the unauthenticated sign-in and refresh routes.
      await v1.register(rateLimit, {
        global: false,
        errorResponseBuilder: (_req, ctx) => new RateLimitedError(`too many requests: try again in ${ctx.after}`, { details: { limit: ctx.max } }),
      });
      await v1.register(authPlugin, { core });
      await v1.register(authRoutes, { core });
      await v1.register(adminRoutes, { core });
      await v1.register(runtimeRoutes, { core });
      await v1.register(setupRoutes, { core });
      await v1.register(sessionsRoutes, { core });
      await v1.register(sessionChangesRoutes, { core });
      await v1.register(sessionModelsRoutes, { core });
      await v1.register(sessionSharesRoutes, { core });
      await v1.register(sessionManageRoutes, { core });
      await v1.register(workspaceRoutes, { core });
      await v1.register(gatewaysRoutes, { core });
      await v1.register(teamsRoutes, { core });
      await v1.register(tokensRoutes, { core });
      await v1.register(memoriesRoutes, { core });
      await v1.register(embedderRoutes, { core });
      await v1.register(jobsRoutes, { core });
      await v1.register(orchestrateRoutes, { core });
      await v1.register(skillsRoutes, { core });
      await v1.register(runnersRoutes, { core });
      await v1.register(connectorsGitRoutes, { core });
      await v1.register(codehostWebhooksRoutes, { core });
      await v1.register(codeHostAdminRoutes, { core });
      await v1.register(mcpConnectorsRoutes, { core });
      await v1.register(retentionRoutes, { core });
      await v1.register(privacyRoutes, { core });
      await v1.register(terminalRoutes, { core });
      await v1.register(scimAdminRoutes, { core });
      v1.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () => app.swagger());
    },
    { prefix: '/v1' },
  );
  // SCIM provisioning (RFC 7644) for identity providers: its own bearer (the tenant's SCIM token), media type and errors.
  await app.register(scimRoutes, { core, prefix: '/scim/v2' });
  return app;
}

/** fastify's messages for these quote the whole path, which can be long and carry codes. */
function frameworkMessage(err: { code?: string; message: string }): string {
  if (err.code === 'FST_ERR_BAD_URL') return 'the URL path is not valid percent-encoded UTF-8';
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return 'a path segment is too long';
  return 'internal error';
}
