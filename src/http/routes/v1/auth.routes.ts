import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { ACCESS_TTL_S, REFRESH_TTL_S } from '../../../core/auth/tokens.js';
import type { RbacPermissions } from '../../../kernel/permissions.js';
import { PartialPermissions } from '../../../core/rbac/rbac.schemas.js';
import type { App } from '../../app-type.js';
import { ACCESS_COOKIE, readCookie, REFRESH_COOKIE, serializeCookie } from '../../cookies.js';
import { CSRF_HEADER } from '../../csrf.js';
import { csrfCheck, ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';

export const AuthStatus = Type.Object({
  auth: Type.Object({
    allowAnonymous: Type.Boolean({ description: 'Local demo mode: requests without a token act as the operator user' }),
    entraConfigured: Type.Boolean({ description: 'An OpenID Connect identity provider (Microsoft Entra ID or another issuer) is configured' }),
    gatewaysProtected: Type.Boolean({ description: 'false: no service API key is configured (local development) and gateway routes skip authentication' }),
  }),
});

// The roles' permissions together (RbacPermissions), so a client shows only what this user may do.
const { $id: _id, ...permissionsShape } = PartialPermissions;
const PermissionsDoc = Type.Unsafe<RbacPermissions>({ ...permissionsShape, description: "What the user's roles grant together" });

export const Me = Type.Object({
  user: Type.Object({
    id: Type.String({ format: 'uuid' }),
    handle: Type.String(),
    email: Type.String(),
    displayName: Type.String(),
    tenantId: Type.String({ format: 'uuid' }),
  }),
  roles: Type.Array(Type.String()),
  permissions: PermissionsDoc,
  demo: Type.Optional(Type.Boolean({ description: 'true: acting as the operator in local demo mode, without a sign-in (nothing to sign out of)' })),
});

/**
 * Per client address, per process: sign-in and refresh attempts need no credential, and each failed
 * refresh writes an audit entry, so they are bounded to keep guessing and log flooding cheap to stop.
 */
const AUTH_RATE_LIMIT = { max: 60, timeWindow: 60_000 };

/**
 * Refresh and sign-out take their token from the body or from a cookie: a browser posts them without a
 * body. fastify validates an absent body against the body schema ("body must be object"), so it is read
 * as an empty object first.
 */
const absentBodyIsEmpty = async (req: { body: unknown }) => {
  req.body ??= {};
};

/** SPEC.md "Authentication endpoints". */
export async function authRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { auth, config } = opts.core;
  const secure = config.server.publicUrl.startsWith('https://');
  // Fixed for the life of the process (config is parsed once), so built once, not per request.
  const status = { auth: auth.status() };
  const forgery = csrfCheck(config.server.publicUrl);
  /** A completed sign-in's cookies, the same whichever way the person signed in (identity provider or link). */
  const signInCookies = (s: { accessToken: string; refreshToken: string }) => [
    serializeCookie(ACCESS_COOKIE, s.accessToken, { maxAgeS: ACCESS_TTL_S, path: '/', secure, sameSite: 'Lax' }),
    serializeCookie(REFRESH_COOKIE, s.refreshToken, { maxAgeS: REFRESH_TTL_S, path: '/v1/auth', secure, sameSite: 'Lax' }),
  ];

  app.get(
    '/auth/status',
    {
      config: { auth: 'none' },
      schema: { tags: ['auth'], summary: 'Which sign-in options the login page should offer', security: [], response: { 200: AuthStatus } },
    },
    async () => status,
  );

  app.get(
    '/auth/login',
    {
      config: { auth: 'none', rateLimit: AUTH_RATE_LIMIT },
      schema: {
        tags: ['auth'],
        summary: 'Start browser sign-in (OAuth 2.0 authorization code with PKCE) at the identity provider',
        security: [],
        querystring: Type.Object({ redirect: Type.Optional(Type.String({ maxLength: 2048, description: 'Path on this service, or a URL on an allowed origin, to go to afterwards' })) }),
        response: { 302: Type.Null({ description: 'Redirect to the identity provider' }), ...errorResponses(400, 502, 503) },
      },
    },
    async (req, reply) => {
      const { url } = await auth.startLogin(ctxOf(req), { redirect: req.query.redirect });
      return reply.redirect(url, 302);
    },
  );

  app.get(
    '/auth/callback',
    {
      config: { auth: 'none', rateLimit: AUTH_RATE_LIMIT },
      schema: {
        tags: ['auth'],
        summary: 'OAuth 2.0 callback: signs the user in and redirects with the access token in a cookie',
        description: `Sets ${ACCESS_COOKIE} (access token, 15 min, Path=/) and ${REFRESH_COOKIE} (refresh token, 7 days, Path=/v1/auth), both HttpOnly and SameSite=Lax (Secure when the public URL is https).`,
        security: [],
        querystring: Type.Object({}, { additionalProperties: true }),
        response: { 302: Type.Null({ description: 'Redirect to the dashboard or the login redirect' }), ...errorResponses(400, 403, 502, 503) },
      },
    },
    async (req, reply) => {
      // The URL the provider redirected to, as registered: the public URL, not whatever Host was sent.
      const callbackUrl = new URL(req.url, config.server.publicUrl);
      const signedIn = await auth.completeLogin(ctxOf(req), { callbackUrl });
      reply.header('set-cookie', signInCookies(signedIn));
      reply.header('cache-control', 'no-store');
      return reply.redirect(signedIn.redirectTo, 302);
    },
  );

  app.post(
    '/auth/link',
    {
      config: { auth: 'none', rateLimit: AUTH_RATE_LIMIT },
      schema: {
        tags: ['auth'],
        summary: 'Sign in with a one-time sign-in link (`aws user sign-in-link`): sets the same cookies as the callback',
        description: `The dashboard's page for a link (\`/#/sign-in-link/<token>\`: the token in the fragment, which browsers never send) posts its token here when the person presses Sign in, with the ${CSRF_HEADER} header from this service's own origin. A link works once, within its minutes, for a user still active and still an owner or admin; audited as auth.sign_in (via sign-in-link) or auth.sign_in_denied, with the client address and never the token. Sets ${ACCESS_COOKIE} and ${REFRESH_COOKIE} exactly as /v1/auth/callback does.`,
        security: [],
        body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: { 200: Type.Object({ user: Me.properties.user, roles: Type.Array(Type.String()) }), ...errorResponses(400, 403, 429) },
      },
    },
    async (req, reply) => {
      // The header too (as a cookie-signed change needs): another site's form cannot send it, so nobody
      // can sign a browser in as someone else (login CSRF) with a link of their own.
      const forged = forgery(req, 'cookie');
      if (forged) throw forged;
      const signedIn = await auth.signInWithLink(ctxOf(req), { token: req.body.token, ip: req.ip });
      reply.header('set-cookie', signInCookies(signedIn));
      reply.header('cache-control', 'no-store');
      const { id, handle, email, displayName, tenantId } = signedIn.user;
      return { user: { id, handle, email, displayName, tenantId }, roles: signedIn.roles };
    },
  );

  app.post(
    '/auth/refresh',
    {
      config: { auth: 'none', rateLimit: AUTH_RATE_LIMIT },
      schema: {
        tags: ['auth'],
        summary: 'Exchange an existing JWT for a new access token valid 900 seconds',
        description: `Takes an access or refresh token in the body, or the ${REFRESH_COOKIE} cookie (then the request needs the X-AgentWS-CSRF header, and the new token is also set as the ${ACCESS_COOKIE} cookie). Re-checks the user and tenant; keeps the token's role claims, within the sign-in the token belongs to: nothing is refreshed more than 7 days after that sign-in, or after it was signed out. A token that fails is answered exactly {"error":"invalid token"}.`,
        security: [],
        body: Type.Object({ token: Type.Optional(Type.String({ maxLength: 8192 })) }),
        response: { 200: Type.Object({ token: Type.String() }), ...errorResponses(401, 403, 404, 429) },
      },
      preValidation: absentBodyIsEmpty,
    },
    async (req, reply) => {
      const cookie = req.body.token === undefined ? readCookie(req.headers.cookie, REFRESH_COOKIE) : undefined;
      if (cookie !== undefined) {
        const forged = forgery(req, 'cookie');
        if (forged) throw forged;
      }
      const { token: fresh } = await auth.refresh(ctxOf(req), { token: req.body.token ?? cookie ?? '' });
      // A browser refreshing by its cookie gets the new access token where it looks for it: the cookie
      // (the dashboard never holds tokens in script).
      if (cookie !== undefined) reply.header('set-cookie', serializeCookie(ACCESS_COOKIE, fresh, { maxAgeS: ACCESS_TTL_S, path: '/', secure, sameSite: 'Lax' }));
      reply.header('cache-control', 'no-store');
      return { token: fresh };
    },
  );

  app.post(
    '/auth/logout',
    {
      config: { auth: 'none', rateLimit: AUTH_RATE_LIMIT },
      schema: {
        tags: ['auth'],
        summary: 'Sign out: end the sign-in of the presented tokens and clear the cookies',
        description: `Takes the access token (Authorization: Bearer, or the ${ACCESS_COOKIE} cookie) and/or the refresh token (body \`token\`, or the ${REFRESH_COOKIE} cookie). Every token of that sign-in stops working at once. Always 200 and the cookies cleared, also when the tokens were already invalid; \`signedOut\` says whether a sign-in was ended.`,
        security: [],
        body: Type.Object({ token: Type.Optional(Type.String({ maxLength: 8192 })) }),
        response: { 200: Type.Object({ signedOut: Type.Boolean() }), ...errorResponses(429) },
      },
      preValidation: absentBodyIsEmpty,
    },
    async (req, reply) => {
      const header = req.headers.authorization;
      const bearer = header?.toLowerCase().startsWith('bearer ') ? header.slice(7).trim() : undefined;
      const cookies = req.headers.cookie;
      const result = await auth.logout(ctxOf(req), {
        tokens: [req.body.token, bearer, readCookie(cookies, REFRESH_COOKIE), readCookie(cookies, ACCESS_COOKIE)],
      });
      reply.header('set-cookie', [
        serializeCookie(ACCESS_COOKIE, '', { maxAgeS: 0, path: '/', secure, sameSite: 'Lax' }),
        serializeCookie(REFRESH_COOKIE, '', { maxAgeS: 0, path: '/v1/auth', secure, sameSite: 'Lax' }),
      ]);
      reply.header('cache-control', 'no-store');
      return result;
    },
  );

  app.get(
    '/auth/me',
    {
      schema: { tags: ['auth'], summary: 'The current user and their roles', response: { 200: Me, ...errorResponses(401, 403, 404) } },
    },
    // Not async: the service answers without a promise when it can, and on a route this cheap each
    // promise costs measurably.
    (req) => auth.me(ctxOf(req)),
  );
}
