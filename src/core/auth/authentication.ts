import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { safeEqual } from '../../lib/secrets.js';
import type { UserActor } from '../../kernel/context.js';
import { ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import { silentLogger } from '../../kernel/logger.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { UserRow } from '../users/users.repo.js';
import type { PersonalTokensService } from '../tokens/personal-tokens.service.js';
import { isPersonalToken, isSafeMethod, maskPermissions, refusesMethod } from '../tokens/token-fns.js';
import type { AuthRepo, CallerRow } from './auth.repo.js';
import { InvalidTokenError, type TokenService } from './tokens.js';

/**
 * Per-request authentication: who a request's credential names (a JWT, a personal access token, the
 * service API key, demo mode), and what this process remembers of earlier checks to answer most
 * requests without a query, dropped when a sign-out or a removed user is heard. Sign-in is
 * sign-in.service.ts; issuing, refreshing and ending tokens is session-tokens.ts.
 */

/**
 * How long an authenticated request may rely on an earlier check that its user and tenant exist.
 * Requests re-check at most this often per user and process (refresh always re-checks), so a deleted
 * user or tenant loses access within this time even with a valid access token.
 */
const USER_CHECK_TTL_MS = 2000;
const USER_CACHE_MAX = 10_000;
const OPERATOR_CACHE_MS = 30_000;

/**
 * Published (after commit) when sign-ins end early: a sign-out `{ signInId }`, or a removed user
 * `{ userId }`. Every process drops what it remembers of them, so their tokens stop working at once
 * rather than within USER_CHECK_TTL_MS.
 */
export const AUTH_REVOKED = 'auth.revoked';

export interface AuthSettings {
  publicUrl: string;
  redirectOrigins: readonly string[];
  defaultRole: string;
  autoProvisionTenants: boolean;
  tenantClaim: string;
  allowAnonymous: boolean;
  operatorEmail: string | null;
  /** Slug or id of the operator's tenant (AGENTWS_OPERATOR_TENANT); null: the first tenant created. */
  operatorTenant: string | null;
  apiKey: string | null;
}

/** The auth-state error of SPEC.md: the user or token does not resolve to a provisioned tenant. Its body is fixed. */
export const tenantNotProvisioned = () =>
  new ForbiddenError('your organisation has no tenant on this service', {
    code: 'tenant_not_provisioned',
    hint: 'Ask the operator to map your organisation to a tenant (`aws tenant seed --external-id <id>`).',
    exactBody: true,
  });

/** A deactivated user (SCIM `active: false`) presenting any credential, or signing in. */
const userDeactivated = () =>
  new UnauthenticatedError('this account is deactivated', { code: 'user_deactivated', hint: "Your organisation's identity provider deactivated it; ask your administrator." });

/** SPEC.md refresh rule 2: exactly `{ "error": "invalid token" }`. */
export const invalidToken = () => new UnauthenticatedError('invalid token', { code: 'invalid token', exactBody: true });

/** Who a token names, as authentication loads it. */
type Caller = Pick<UserRow, 'id' | 'tenantId' | 'handle' | 'email' | 'displayName'>;

/** The key of a remembered user check: revocations find their entries by user and by sign-in. */
const userCheckKey = (tenantId: string, userId: string, signInId: string | null) => `${tenantId}:${userId}:${signInId ?? ''}`;

export function createAuthentication(deps: {
  db: Database;
  repo: AuthRepo;
  bus: EventBus;
  tokens: TokenService;
  rbac: Pick<RbacService, 'resolvePermissions' | 'cachedPermissions'>;
  settings: AuthSettings;
  clock: Clock;
  /** Personal access tokens: a Bearer starting `agentws_pat_` is looked up here. */
  personalTokens?: PersonalTokensService;
}) {
  const { db, repo, bus, tokens, rbac, settings, clock } = deps;
  // Keyed by tenant, user and sign-in: `${tid}:${sub}:${sid}`.
  const userChecks = new Map<string, { at: number; user: Caller }>();
  let operatorCache: { at: number; ref: { tenantId: string; userId: string } | null } | null = null;

  let revocations: Promise<unknown> | null = null;
  // Set once this process hears revocations. Until then nothing is cached: a sign-out published before
  // the LISTEN was in place would be missed, and the entry would outlive it.
  let hearing = false;
  const ensureRevocations = () =>
    (revocations ??= bus
      .subscribe(AUTH_REVOKED, (p) => forget(p as { signInId?: string; userId?: string }))
      .then(() => {
        hearing = true;
      })
      .catch(() => {
        revocations = null;
      }));

  /** Drops what this process remembers of a revoked sign-in or a removed user. */
  function forget(p: { signInId?: string; userId?: string } | null) {
    for (const key of userChecks.keys()) {
      const [, sub, sid] = key.split(':');
      if ((p?.signInId && sid === p.signInId) || (p?.userId && sub === p.userId)) userChecks.delete(key);
    }
    if (p?.userId) operatorCache = null;
  }
  // The claims object of a remembered token comes back for every request with it: so does its key.
  const userKeys = new WeakMap<object, string>();

  /**
   * The operator user (AGENTWS_OPERATOR_EMAIL, in the operator's tenant): who demo-mode and API-key
   * requests act as. Demo mode has the user's current roles. The service API key is the appliance's own
   * credential (it sits in the config file beside the JWT secret), so it acts as the operator with the
   * owner role whatever roles the user holds: demoting that user does not silently disable the key.
   */
  async function operatorActor(via: 'demo' | 'api-key'): Promise<UserActor> {
    if (!settings.operatorEmail) throw new UnavailableError('no operator user is configured', { hint: 'Set AGENTWS_OPERATOR_EMAIL.' });
    const u = await repo.operator(db, settings.operatorEmail, settings.operatorTenant);
    if (!u) {
      throw new UnavailableError(`the operator user ${settings.operatorEmail} does not exist in the operator's tenant${settings.operatorTenant ? ` (${settings.operatorTenant})` : ''}`, {
        hint: 'Run `npx aws init`, or `npx aws tenant seed --owner-email <operator>`; AGENTWS_OPERATOR_TENANT names the tenant.',
      });
    }
    const roles = via === 'api-key' ? ['owner'] : u.roles;
    return {
      kind: 'user',
      userId: u.id,
      tenantId: u.tenantId,
      roles,
      permissions: await rbac.resolvePermissions(u.tenantId, roles),
      via,
      profile: { handle: u.handle, email: u.email, displayName: u.displayName },
    };
  }

  return {
    operatorActor,
    /** Drops what this process remembers of a revoked sign-in or a removed user. */
    forget,
    /** Starts hearing revocations (before anything is remembered). */
    ensureRevocations,
    /** The user and tenant a credential names, checked (no cache). */
    loadUser,

    /**
     * Who is calling: a Bearer JWT first, then the service API key (constant-time), then the access-token
     * cookie; without any credential, the operator in demo mode, else null (anonymous).
     */
    async authenticate(input: { bearer?: string; cookie?: string; method?: string; requestId?: string }): Promise<UserActor | null> {
      void ensureRevocations();
      const token = input.bearer ?? input.cookie;
      if (!token) return settings.allowAnonymous ? operatorActor('demo') : null;
      // Routed by its prefix: a personal access token is never tried as a JWT (nor a JWT looked up here).
      if (input.bearer && isPersonalToken(input.bearer)) return personalTokenActor(input.bearer, input);
      let claims;
      try {
        claims = await tokens.verify(token, ['access']);
      } catch (err) {
        if (!(err instanceof InvalidTokenError)) throw err;
        if (input.bearer && settings.apiKey && safeEqual(input.bearer, settings.apiKey)) return operatorActor('api-key');
        throw new UnauthenticatedError('invalid token', { hint: 'Sign in again, or refresh the token with POST /v1/auth/refresh.' });
      }
      const user = await loadUserCached(claims.tid, claims.sub, claims.sid ?? null);
      return tokenActor(user, claims.roles, await rbac.resolvePermissions(user.tenantId, claims.roles));
    },

    /**
     * authenticate() without waiting, in the common case: a token this process verified, whose user (and
     * sign-in) was checked within USER_CHECK_TTL_MS and whose tenant's role documents are cached.
     * Undefined whenever anything would have to be looked up or refused: authenticate() then does it.
     * Same answer, no promise: on a cheap route the awaits alone cost a tenth of the request. A sign-out
     * or a removed user drops the check it relies on (forget()), so revocation holds here too.
     */
    authenticateCached(input: { bearer?: string; cookie?: string }): UserActor | undefined {
      const token = input.bearer ?? input.cookie;
      if (!token) return undefined;
      const now = clock.now().getTime();
      const claims = tokens.cached(token, ['access'], now);
      if (!claims) return undefined;
      let key = userKeys.get(claims);
      if (key === undefined) userKeys.set(claims, (key = userCheckKey(claims.tid, claims.sub, claims.sid ?? null)));
      const hit = userChecks.get(key);
      if (!hit || now - hit.at >= USER_CHECK_TTL_MS) return undefined;
      const permissions = rbac.cachedPermissions(hit.user.tenantId, claims.roles, now);
      return permissions && tokenActor(hit.user, claims.roles, permissions);
    },

    /**
     * For a connection that outlives its request (a terminal): a check to run again while it is open,
     * which throws once the credential it was opened with no longer holds: the sign-in ended (sign-out,
     * expiry, the user removed or deactivated: their sign-ins end then), the personal access token was
     * revoked or expired, the user or tenant is gone. It returns the caller's permissions NOW: the roles
     * the user holds at this moment (not those fixed in the token at sign-in), so a role taken away or a
     * permission removed from a role is seen at the next check. The access token's own expiry does not
     * end the connection: the dashboard refreshes it without reconnecting, and its sign-in is what holds.
     */
    async recheckOf(input: { bearer?: string; cookie?: string }, actor: UserActor): Promise<() => Promise<UserActor['permissions']>> {
      const token = input.bearer ?? input.cookie;
      const current = async (tenantId: string, userId: string, q = db) => {
        const roles = await repo.userRoles(q, tenantId, userId);
        return rbac.resolvePermissions(tenantId, roles);
      };
      if (actor.via === 'pat' && input.bearer) {
        const value = input.bearer;
        return async () => {
          const row = deps.personalTokens ? await deps.personalTokens.find(value) : null;
          if (!row || row.revokedAt || row.expiresAt <= clock.now()) throw invalidToken();
          const user = await loadUser(row.tenantId, row.userId);
          const now = await current(user.tenantId, user.id);
          return maskPermissions(now, row.scopes, true);
        };
      }
      if (actor.via === 'api-key' || actor.via === 'demo') {
        const via = actor.via;
        return async () => (await operatorActor(via)).permissions;
      }
      const claims = token ? await tokens.verify(token, ['access']) : null;
      if (!claims) throw new UnauthenticatedError('invalid token');
      const { tid, sub } = claims;
      const sid = claims.sid ?? null;
      return async () => {
        const row = await repo.caller(db, tid, sub, sid, clock.now());
        const user = checkCaller(row);
        if (row.signInValid === false) throw new UnauthenticatedError('your sign-in has ended (signed out, expired, or the user was removed)', { code: 'signed_out' });
        return current(user.tenantId, user.id);
      };
    },

    /**
     * The operator user and tenant (demo mode and the API key act as them), or null when none is
     * configured or found; remembered for 30 s. Sessions use it for demo-mode sessions of a browser.
     */
    async operator(): Promise<{ tenantId: string; userId: string } | null> {
      if (!settings.operatorEmail) return null;
      const now = clock.now().getTime();
      if (operatorCache && now - operatorCache.at < OPERATOR_CACHE_MS) return operatorCache.ref;
      const u = await repo.operator(db, settings.operatorEmail, settings.operatorTenant);
      operatorCache = { at: now, ref: u ? { tenantId: u.tenantId, userId: u.id } : null };
      return operatorCache.ref;
    },

  };

  /**
   * The caller of a personal access token, checked on every request (never remembered between
   * requests, so a revocation holds at once in every process): by its hash, unrevoked and unexpired,
   * its user loaded as every credential's is (a deactivated or removed user fails here), and its
   * permissions the user's roles NOW kept only where its scopes reach (a demotion narrows it at once).
   */
  async function personalTokenActor(value: string, input: { method?: string; requestId?: string }): Promise<UserActor> {
    const row = deps.personalTokens ? await deps.personalTokens.find(value) : null;
    if (!row || row.revokedAt || row.expiresAt <= clock.now()) throw invalidToken();
    const user = await loadUser(row.tenantId, row.userId);
    if (refusesMethod(row.scopes, input.method)) {
      throw new ForbiddenError(`this token has only the read scope: ${input.method} requests need the sessions, memories or admin scope`, {
        code: 'token_scope',
        details: { scope: 'read', field: 'scopes' },
      });
    }
    const permissions = maskPermissions(await rbac.resolvePermissions(user.tenantId, row.roles), row.scopes, isSafeMethod(input.method));
    const actor: UserActor = {
      kind: 'user',
      userId: user.id,
      tenantId: user.tenantId,
      roles: row.roles,
      permissions,
      via: 'pat',
      token: { id: row.id, scopes: row.scopes },
      profile: { handle: user.handle, email: user.email, displayName: user.displayName },
    };
    await deps.personalTokens!.noteUse({ tenantId: user.tenantId, actor, requestId: input.requestId ?? crypto.randomUUID(), log: silentLogger, channel: 'web' }, row);
    return actor;
  }

  function tokenActor(user: Caller, roles: string[], permissions: UserActor['permissions']): UserActor {
    return { kind: 'user', userId: user.id, tenantId: user.tenantId, roles, permissions, via: 'token', profile: { handle: user.handle, email: user.email, displayName: user.displayName } };
  }

  async function loadUserCached(tenantId: string, userId: string, signInId: string | null): Promise<Caller> {
    const key = userCheckKey(tenantId, userId, signInId);
    const now = clock.now();
    const hit = userChecks.get(key);
    if (hit && now.getTime() - hit.at < USER_CHECK_TTL_MS) return hit.user;
    const row = await repo.caller(db, tenantId, userId, signInId, now);
    const user = checkCaller(row);
    if (row.signInValid === false) {
      throw new UnauthenticatedError('your sign-in has ended (signed out, expired, or the user was removed)', { hint: 'Sign in again.' });
    }
    if (!hearing) return user;
    if (userChecks.size >= USER_CACHE_MAX) userChecks.clear();
    userChecks.set(key, { at: now.getTime(), user });
    return user;
  }

  /** The user and tenant a token names: no tenant is 403 tenant_not_provisioned, no user 404 (SPEC.md rules 3, 4). */
  async function loadUser(tenantId: string, userId: string): Promise<Caller> {
    return checkCaller(await repo.caller(db, tenantId, userId, null, clock.now()));
  }

  function checkCaller(row: CallerRow): Caller {
    if (!row?.tenantExists) throw tenantNotProvisioned();
    if (!row.id) throw new NotFoundError('user not found', { code: 'user not found' });
    // Checked here, where every credential's user is loaded, so no way of authenticating skips it.
    if (row.deactivated) throw userDeactivated();
    return { id: row.id, tenantId: row.tenantId, handle: row.handle, email: row.email, displayName: row.displayName };
  }
}

export type Authentication = ReturnType<typeof createAuthentication>;
