import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../../config/config.schema.js';

const AuthStatus = Type.Object({
  auth: Type.Object({
    allowAnonymous: Type.Boolean({ description: 'Local demo mode: requests without a token act as the operator user' }),
    entraConfigured: Type.Boolean({ description: 'An OpenID Connect identity provider (Microsoft Entra ID or another issuer) is configured' }),
  }),
});

/** SPEC.md "Authentication endpoints". */
export async function authRoutes(app: FastifyInstance, opts: { config: Config }): Promise<void> {
  const { oidc } = opts.config.auth;
  // Fixed for the life of the process (config is parsed once), so built once, not per request.
  const status = {
    auth: {
      allowAnonymous: opts.config.auth.allowAnonymous,
      entraConfigured: Boolean(oidc.issuerUrl && oidc.clientId),
    },
  };
  app.get(
    '/auth/status',
    {
      schema: {
        tags: ['auth'],
        summary: 'Which sign-in options the login page should offer',
        security: [],
        response: { 200: AuthStatus },
      },
    },
    async () => status,
  );
}
