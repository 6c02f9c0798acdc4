import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Ctx, UserActor } from '../../core/context.js';
import type { Core } from '../../core/create-core.js';
import { UnauthenticatedError } from '../../core/errors.js';
import { ACCESS_COOKIE, readCookie } from '../cookies.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller; null for anonymous requests on routes that allow them. */
    actor: UserActor | null;
  }
  interface FastifyContextConfig {
    /** 'required' (default on /v1), 'optional' (actor may be null), or 'none' (not even looked at). */
    auth?: 'required' | 'optional' | 'none';
  }
}

/**
 * Identifies the caller of every /v1 route before its handler runs (see AuthService.authenticate):
 * Bearer JWT, then the service API key, then the access-token cookie, then demo mode.
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { core: Core }) => {
  app.decorateRequest('actor', null);
  const authenticate = async (req: FastifyRequest) => {
    const mode = req.routeOptions.config.auth ?? 'required';
    const header = req.headers.authorization;
    const bearer = header?.toLowerCase().startsWith('bearer ') ? header.slice(7).trim() : undefined;
    req.actor = await opts.core.auth.authenticate({ bearer, cookie: bearer ? undefined : readCookie(req.headers.cookie, ACCESS_COOKIE) });
    if (!req.actor && mode === 'required') {
      throw new UnauthenticatedError('authentication required', { hint: 'Send Authorization: Bearer <access token or API key>.' });
    }
  };
  // Attached only to routes that look at the caller: a global async hook would cost every public
  // route (status, login) a promise per request for nothing. onRequest, first of the route's hooks:
  // the caller is known before the body is read or validated, so a request without a valid credential
  // is answered 401 without its body being buffered (see early-response.ts for the rest of that body).
  app.addHook('onRoute', (route) => {
    if (route.config?.auth === 'none') return;
    const existing = route.onRequest ? (Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]) : [];
    route.onRequest = [authenticate, ...existing];
  });
});

/** The service context of a request: who acts, in which tenant, traced by the request id. */
export function ctxOf(req: FastifyRequest): Ctx {
  const actor = req.actor;
  return {
    tenantId: actor?.tenantId ?? null,
    actor: actor ?? { kind: 'anonymous' },
    requestId: req.id,
    log: req.log,
    channel: 'web',
  };
}
