import type { Ctx, UserActor } from '../../kernel/context.js';
import { UnauthenticatedError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import type { PersonalTokensService } from '../tokens/personal-tokens.service.js';
import type { UserRow } from '../users/users.repo.js';
import { createAuthentication } from './authentication.js';
import { createSessionTokens } from './session-tokens.js';
import { createSignInLinks } from './sign-in-links.js';
import { createSignInService, type SignInDeps } from './sign-in.service.js';
import type { TokenService } from './tokens.js';

/** SPEC.md /auth/me. */
export interface Me {
  user: { id: string; handle: string; email: string; displayName: string; tenantId: string };
  roles: string[];
  /** What the roles grant together: what a client may offer this user (the service checks again on each call). */
  permissions: UserActor['permissions'];
  /** Acting as the operator in local demo mode, without a sign-in: there is nothing to sign out of. */
  demo?: boolean;
}

/**
 * `core.auth`: sign-in (sign-in.service.ts), the sign-in's tokens (session-tokens.ts) and per-request
 * authentication with its caches (authentication.ts) behind one surface, as routes and the HTTP plugin
 * call them.
 */
export function createAuthService(
  deps: SignInDeps & {
    bus: EventBus;
    tokens: TokenService;
    /** Personal access tokens: a Bearer starting `agentws_pat_` is looked up here. */
    personalTokens?: PersonalTokensService;
  },
) {
  const { settings, oidc } = deps;
  const authn = createAuthentication(deps);
  const { operatorActor, loadUser } = authn;
  const sessionTokens = createSessionTokens({ ...deps, authn });
  const signIn = createSignInService(deps, sessionTokens);
  const links = createSignInLinks(deps, sessionTokens);

  return {
    /** SPEC.md /auth/status: what the login page should offer. */
    status() {
      return { allowAnonymous: settings.allowAnonymous, entraConfigured: Boolean(oidc), gatewaysProtected: Boolean(settings.apiKey) };
    },

    /**
     * Who a gateway-route request without credentials acts as in local development (no service API key,
     * SPEC.md Authentication 5): the operator. Null when a key is configured or there is no operator.
     */
    async developmentActor(): Promise<UserActor | null> {
      if (settings.apiKey || !settings.operatorEmail) return null;
      return operatorActor('demo');
    },

    startLogin: signIn.startLogin,
    completeLogin: signIn.completeLogin,
    createSignInLink: links.create,
    signInWithLink: links.use,
    refresh: sessionTokens.refresh,
    logout: sessionTokens.logout,
    authenticate: authn.authenticate,
    authenticateCached: authn.authenticateCached,
    recheckOf: authn.recheckOf,
    operator: authn.operator,
    revokeUser: sessionTokens.revokeUser,

    /** SPEC.md /auth/me: the caller's user and roles. */
    me(ctx: Ctx): Me | Promise<Me> {
      if (ctx.actor.kind !== 'user') throw new UnauthenticatedError();
      const a = ctx.actor;
      const of = (profile: Pick<UserRow, 'handle' | 'email' | 'displayName'>): Me => ({
        user: { id: a.userId, handle: profile.handle, email: profile.email, displayName: profile.displayName, tenantId: a.tenantId },
        roles: a.roles,
        permissions: a.permissions,
        ...(a.via === 'demo' ? { demo: true } : {}),
      });
      // Answered without a promise when the caller's profile came with the authentication (the usual case).
      return a.profile ? of(a.profile) : loadUser(a.tenantId, a.userId).then(of);
    },
  };

}
