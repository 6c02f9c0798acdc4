import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Ctx, UserActor } from '../../kernel/context.js';
import type { Core } from '../../core/create-core.js';
import { ForbiddenError, UnauthenticatedError } from '../../kernel/errors.js';
import { ACCESS_COOKIE, readCookie } from '../cookies.js';
import { csrfRefusal, ownOrigins, type Credential } from '../csrf.js';

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

const BEARER = /^bearer /i;

/**
 * Identifies the caller of every /v1 route before its body is read (see AuthService.authenticate):
 * Bearer JWT, then the service API key, then the access-token cookie, then demo mode.
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { core: Core }) => {
  app.decorateRequest('actor', null);
  const { auth } = opts.core;
  const forgery = csrfCheck(opts.core.config.server.publicUrl);
  const required = () => new UnauthenticatedError('authentication required', { hint: 'Send Authorization: Bearer <access token or API key>.' });
  // A callback hook, answered synchronously when the caller is already known to this process (a token
  // verified and checked moments ago): no promise on the common path, which is most of what an
  // authenticated request costs beyond an anonymous one.
  const authenticate = (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const input = credentialOf(req);
    const { bearer } = input;
    // Checked before the credential: a forged request learns nothing, not even whether the cookie is valid.
    const forged = forgery(req, bearer !== undefined ? 'bearer' : input.cookie !== undefined ? 'cookie' : 'none');
    if (forged) return done(forged);
    const known = auth.authenticateCached(input);
    if (known) {
      req.actor = known;
      return done();
    }
    // The method decides what a personal access token may do (a `read` token: GET and HEAD only).
    auth.authenticate({ ...input, method: req.method, requestId: req.id }).then((actor) => {
      req.actor = actor;
      done(!actor && (req.routeOptions.config.auth ?? 'required') === 'required' ? required() : undefined);
    }, done);
  };
  // Attached only to routes that look at the caller: a global hook would cost every public route
  // (status, login) for nothing. onRequest, first of the route's hooks: the caller is known before the
  // body is read or validated, so a request without a valid credential is answered 401 without its
  // body being buffered (see early-response.ts for the rest of that body).
  app.addHook('onRoute', (route) => {
    if (route.config?.auth === 'none') return;
    const existing = route.onRequest ? (Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]) : [];
    route.onRequest = [authenticate, ...existing];
  });
});

/** The credential a request leans on: a Bearer header, else the access-token cookie. */
export function credentialOf(req: FastifyRequest): { bearer?: string; cookie?: string } {
  const header = req.headers.authorization;
  const bearer = header !== undefined && BEARER.test(header) ? header.slice(7).trim() : undefined;
  return { bearer, cookie: bearer ? undefined : readCookie(req.headers.cookie, ACCESS_COOKIE) };
}

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

/**
 * The CSRF rule (csrf.ts) for a request and the credential it leans on: a ForbiddenError (code
 * `csrf_failed`) when it may be forged, else null. Mutations only: reads return at once.
 */
export function csrfCheck(publicUrl: string) {
  const configured = ownOrigins(publicUrl);
  return (req: FastifyRequest, credential: Credential): ForbiddenError | null => {
    if (req.method === 'GET' || req.method === 'HEAD') return null;
    const why = csrfRefusal(req, credential, req.headers.origin ? ownOrigins(publicUrl, `${req.protocol}://${req.host}`) : configured);
    return why ? new ForbiddenError(why, { code: 'csrf_failed', hint: 'Browsers: use the dashboard. Scripts: send Authorization: Bearer <token>.' }) : null;
  };
}
