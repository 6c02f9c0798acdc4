import { createHash } from 'node:crypto';
import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { safeEqual } from '../../lib/secrets.js';
import type { AuditService } from '../audit/audit.service.js';
import { systemCtx, type Ctx, type UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from '../../kernel/errors.js';
import type { EventBus } from '../../kernel/events.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { TenantsService } from '../tenants/tenants.service.js';
import type { UsersRepo, UserRow } from '../users/users.repo.js';
import type { AuthRepo, CallerRow } from './auth.repo.js';
import type { GroupSync } from './group-sync.js';
import type { OidcClient } from './oidc-client.js';
import type { PersonalTokensService } from '../tokens/personal-tokens.service.js';
import { isPersonalToken, isSafeMethod, maskPermissions, refusesMethod } from '../tokens/token-fns.js';
import { silentLogger } from '../../kernel/logger.js';
import { InvalidTokenError, REFRESH_TTL_S, REFRESHED_TTL_S, type TokenClaims, type TokenService } from './tokens.js';

const LOGIN_TTL_MS = 10 * 60 * 1000;
/**
 * How long an authenticated request may rely on an earlier check that its user and tenant exist.
 * Requests re-check at most this often per user and process (refresh always re-checks), so a deleted
 * user or tenant loses access within this time even with a valid access token.
 */
export const USER_CHECK_TTL_MS = 2000;
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

export interface SignedIn {
  accessToken: string;
  accessExpiresAt: Date;
  refreshToken: string;
  refreshExpiresAt: Date;
  redirectTo: string;
  user: UserRow;
  roles: string[];
  created: boolean;
}

/** SPEC.md /auth/me. */
export interface Me {
  user: { id: string; handle: string; email: string; displayName: string; tenantId: string };
  roles: string[];
  /** What the roles grant together: what a client may offer this user (the service checks again on each call). */
  permissions: UserActor['permissions'];
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
const invalidToken = () => new UnauthenticatedError('invalid token', { code: 'invalid token', exactBody: true });

/** Who a token names, as authentication loads it. */
type Caller = Pick<UserRow, 'id' | 'tenantId' | 'handle' | 'email' | 'displayName'>;

/** The key of a remembered user check: revocations find their entries by user and by sign-in. */
const userCheckKey = (tenantId: string, userId: string, signInId: string | null) => `${tenantId}:${userId}:${signInId ?? ''}`;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function createAuthService(deps: {
  db: Database;
  repo: AuthRepo;
  bus: EventBus;
  tokens: TokenService;
  users: UsersRepo;
  tenantsRepo: TenantsRepo;
  tenants: TenantsService;
  rbac: RbacService;
  audit: AuditService;
  oidc: OidcClient | null;
  /** The tenant's opt-in group mapping at sign-in (roles and teams from the ID token's groups). */
  groupSync: GroupSync;
  settings: AuthSettings;
  clock: Clock;
  /** Personal access tokens (issue 29): a Bearer starting `agentws_pat_` is looked up here. */
  personalTokens?: PersonalTokensService;
}) {
  const { db, repo, bus, tokens, users, tenantsRepo, tenants, rbac, audit, oidc, settings, clock } = deps;
  const publicOrigin = new URL(settings.publicUrl).origin;
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

  /** Where a sign-in may send the browser afterwards: our own paths, or a configured origin. */
  function checkRedirect(redirect: string | undefined): string {
    if (!redirect) return `${settings.publicUrl}/`;
    // A same-origin path, but not `//host` or `/\host` (browsers read both as another host).
    if (/^\/(?![/\\])/.test(redirect)) return new URL(redirect, settings.publicUrl).href;
    let url: URL;
    try {
      url = new URL(redirect);
    } catch {
      throw new ValidationError('redirect must be a path on this service or an allowed URL');
    }
    if ((url.protocol === 'https:' || url.protocol === 'http:') && (url.origin === publicOrigin || settings.redirectOrigins.includes(url.origin))) {
      return url.href;
    }
    throw new ValidationError(`redirect to ${url.origin} is not allowed`, { hint: 'Allowed: paths on this service and the origins in AGENTWS_AUTH_REDIRECT_ORIGINS.' });
  }

  const requireOidc = (): OidcClient => {
    if (!oidc) {
      throw new UnavailableError('sign-in is not configured on this service', {
        code: 'sign_in_not_configured',
        hint: 'Set AGENTWS_ENTRA_TENANT_ID (or AGENTWS_OIDC_ISSUER_URL) and AGENTWS_OIDC_CLIENT_ID.',
      });
    }
    return oidc;
  };

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

  /** Records a sign-in and issues its access and refresh tokens (inside the sign-in's transaction). */
  async function issueSignIn(tx: Tx, user: UserRow, roles: string[]) {
    const authTime = new Date(Math.floor(clock.now().getTime() / 1000) * 1000);
    const signIn = await repo.insertSignIn(tx, { tenantId: user.tenantId, userId: user.id, authTime, expiresAt: new Date(authTime.getTime() + REFRESH_TTL_S * 1000) });
    const common = { userId: user.id, tenantId: user.tenantId, roles, sid: signIn.id, authTime: authTime.getTime() / 1000, notAfterS: signIn.expiresAt.getTime() / 1000 };
    const access = await tokens.issue({ ...common, typ: 'access' });
    const refresh = await tokens.issue({ ...common, typ: 'refresh' });
    return { signInId: signIn.id, accessToken: access.token, accessExpiresAt: access.expiresAt, refreshToken: refresh.token, refreshExpiresAt: refresh.expiresAt };
  }

  /** A refused refresh: audited as `auth.refresh_failed` (the input is unauthenticated), answered 401 invalid token. */
  async function refuseRefresh(ctx: Ctx, reason: string): Promise<never> {
    await db.transaction((tx) =>
      audit.record(tx, { ...ctx, actor: { kind: 'anonymous' } }, { action: 'auth.refresh_failed', target: '', tenantId: null, details: { reason } }),
    );
    throw invalidToken();
  }

  /** A handle for a new user: the provider's username or email local part, made unique in the tenant. */
  async function freeHandle(q: Database | Parameters<AuditService['record']>[0], tenantId: string, wanted: string): Promise<string> {
    const base = (wanted.split('@')[0].toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '') || 'user').slice(0, 56);
    let handle = base;
    for (let i = 2; await users.handleTaken(q, tenantId, handle); i++) handle = `${base}-${i}`;
    return handle;
  }

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

    /** Starts a browser sign-in: remembers PKCE verifier, nonce and redirect; returns the provider URL. */
    async startLogin(_ctx: Ctx, input: { redirect?: string }): Promise<{ url: string }> {
      const client = requireOidc();
      const redirectTo = checkRedirect(input.redirect);
      const { url, state, nonce, codeVerifier } = await client.authorizationUrl();
      const now = clock.now();
      await repo.saveLoginState(db, { stateHash: sha256(state), codeVerifier, nonce, redirectTo, expiresAt: new Date(now.getTime() + LOGIN_TTL_MS), now });
      return { url };
    },

    /**
     * Completes a browser sign-in from the provider's callback URL: checks state (single use), nonce
     * and PKCE, maps the organisation to a tenant, finds or creates the user (new users get the default
     * role), and issues an access and a refresh token.
     */
    async completeLogin(ctx: Ctx, input: { callbackUrl: URL }): Promise<SignedIn> {
      const client = requireOidc();
      const params = input.callbackUrl.searchParams;
      if (params.get('error')) {
        throw new ValidationError(`the identity provider refused the sign-in: ${params.get('error')}${params.get('error_description') ? ` (${params.get('error_description')})` : ''}`, { code: 'sign_in_failed' });
      }
      const state = params.get('state');
      if (!state || !params.get('code')) throw new ValidationError('the callback lacks code or state', { code: 'sign_in_failed' });
      const pending = await repo.takeLoginState(db, sha256(state), clock.now());
      if (!pending) {
        throw new ValidationError('this sign-in expired or was already used', { code: 'sign_in_failed', hint: 'Start the sign-in again.' });
      }
      const identity = await client.exchange(input.callbackUrl, { state, nonce: pending.nonce, codeVerifier: pending.codeVerifier });
      const claimed = identity.claims[settings.tenantClaim];
      const externalTenantId = typeof claimed === 'string' && claimed ? claimed : client.settings.issuerUrl;

      let tenant = await tenantsRepo.findByExternalId(db, externalTenantId);
      let provisioned = false;
      if (!tenant) {
        if (!settings.autoProvisionTenants) {
          await db.transaction((tx) =>
            audit.record(tx, ctx, { action: 'auth.sign_in_denied', target: `subject:${identity.subject}`, tenantId: null, details: { reason: 'tenant_not_provisioned', externalTenantId } }),
          );
          throw tenantNotProvisioned();
        }
        const made = await tenants.provisionForSignIn(systemCtx(ctx.log, { name: 'sign-in', requestId: ctx.requestId, channel: ctx.channel }), {
          externalTenantId,
          name: identity.email?.split('@')[1] ?? externalTenantId,
        });
        tenant = made.tenant;
        // Only the sign-in that created the tenant makes its user the owner (two may race to create it).
        provisioned = made.created;
      }
      const tenantId = tenant.id;
      // SPEC.md: sign-in does not apply groupRoleMapping, unless the tenant opts in (signIn.applyGroupMapping).
      const tenantSettings = tenant.settings;
      const mapsGroups = deps.groupSync.enabled(tenantSettings);

      const result = await db.transaction(async (tx) => {
        const email = identity.email ?? `${identity.subject}@users.invalid`;
        const displayName = identity.name ?? identity.preferredUsername ?? email;
        let user = await users.findBySubject(tx, tenantId, identity.subject);
        let created = false;
        if (!user) {
          // A user created by `aws init` or `tenant seed` signs in for the first time: link by email.
          // Never re-bind an account that already belongs to another identity (that would hand it over).
          const byEmail = identity.email ? await users.findByEmail(tx, tenantId, identity.email) : null;
          if (byEmail?.externalSubject) {
            throw new ConflictError('an account with this email already belongs to another sign-in identity', {
              code: 'identity_conflict',
              hint: 'Ask an administrator to check the account.',
            });
          }
          if (byEmail) user = byEmail;
        }
        if (user?.deactivatedAt) {
          await audit.record(tx, { ...ctx, tenantId }, { action: 'auth.sign_in_denied', target: `user:${user.id}`, details: { reason: 'user_deactivated' } });
          return null;
        }
        if (user) {
          user = await users.updateProfile(tx, user.id, { email, displayName, externalSubject: identity.subject });
        } else {
          user = await users.insert(tx, {
            tenantId,
            handle: await freeHandle(tx, tenantId, identity.preferredUsername ?? email),
            email,
            displayName,
            externalSubject: identity.subject,
          });
          created = true;
          // The first user of a tenant created by this sign-in owns it; everyone else starts with the default role.
          // With the group mapping on, the groups decide (the default role only when they give none: below).
          const roleName = provisioned ? 'owner' : settings.defaultRole;
          const role = provisioned || !mapsGroups ? await tenantsRepo.findRoleByName(tx, tenantId, roleName) : undefined;
          if (role) await users.assignRole(tx, { tenantId, userId: user.id, roleId: role.id, assignedBy: 'system:sign-in' });
          else if (role === null) ctx.log.warn({ role: roleName, tenantId }, 'default role does not exist in the tenant: new user has no role');
        }
        if (mapsGroups) {
          const sync = { ...ctx, tenantId, actor: { kind: 'system' as const, name: 'idp-groups' } };
          await deps.groupSync.apply(tx, sync, { tenantId, settings: tenantSettings, userId: user.id, claims: identity.claims, defaultRole: settings.defaultRole });
        }
        const roles = await users.roleNames(tx, user.id);
        const actor: UserActor = { kind: 'user', userId: user.id, tenantId, roles, permissions: await rbac.resolvePermissions(tenantId, roles, tx), via: 'token' };
        const issued = await issueSignIn(tx, user, roles);
        await audit.record(tx, { ...ctx, tenantId, actor }, { action: 'auth.sign_in', target: `user:${user.id}`, details: { newUser: created, roles, signInId: issued.signInId } });
        return { ...issued, user, roles, created };
      });
      // 403 rather than 401: the identity provider did authenticate them; this service refuses the account.
      if (!result) throw new ForbiddenError('this account is deactivated', { code: 'user_deactivated', hint: "Your organisation's identity provider deactivated it; ask your administrator." });
      return { ...result, redirectTo: pending.redirectTo ?? `${settings.publicUrl}/` };
    },

    /**
     * SPEC.md refresh: a new access token valid 900 s for an existing access or refresh token. The user
     * and tenant are re-checked; the role claims are kept as they are (rule 1), but only within the
     * sign-in the token belongs to: a refreshed token carries its `sid` and `auth_time`, so a chain of
     * refreshes ends 7 days after the sign-in, and a signed-out sign-in refreshes no more.
     */
    async refresh(ctx: Ctx, input: { token: string }): Promise<{ token: string; expiresAt: Date }> {
      let claims: TokenClaims;
      try {
        claims = await tokens.verify(input.token ?? '', ['access', 'refresh']);
      } catch (err) {
        if (!(err instanceof InvalidTokenError)) throw err;
        return refuseRefresh(ctx, err.message);
      }
      const user = await loadUser(claims.tid, claims.sub);
      const signIn = claims.sid ? await repo.findSignIn(db, claims.tid, claims.sid) : null;
      const now = clock.now();
      const why = !claims.sid
        ? 'token belongs to no recorded sign-in (issued before sign-ins were recorded)'
        : !signIn || signIn.userId !== user.id
          ? 'sign-in not found'
          : signIn.revokedAt
            ? 'sign-in was ended (signed out)'
            : signIn.expiresAt <= now
              ? 'sign-in is older than the refresh lifetime (7 days)'
              : null;
      if (why || !signIn) return refuseRefresh(ctx, why ?? 'sign-in not found');
      return tokens.issue({
        userId: user.id,
        tenantId: user.tenantId,
        roles: claims.roles,
        typ: 'access',
        ttlS: REFRESHED_TTL_S,
        sid: signIn.id,
        authTime: signIn.authTime.getTime() / 1000,
        notAfterS: signIn.expiresAt.getTime() / 1000,
      });
    },

    /**
     * Signs out: ends the sign-in of the given tokens (every token issued for it stops working, in every
     * process, at once) and audits it. Idempotent: an unknown, expired or already ended sign-in is no
     * error, so a browser can always sign out. Returns whether a sign-in was ended.
     */
    async logout(ctx: Ctx, input: { tokens: Array<string | undefined> }): Promise<{ signedOut: boolean }> {
      void ensureRevocations();
      let claims: TokenClaims | null = null;
      for (const token of input.tokens) {
        if (!token || claims?.sid) continue;
        claims = await tokens.verify(token, ['access', 'refresh']).catch(() => claims);
      }
      if (!claims?.sid) return { signedOut: false };
      const { sid, tid, sub } = claims;
      const ended = await db.transaction(async (tx) => {
        if (!(await repo.revokeSignIn(tx, { tenantId: tid, userId: sub, id: sid, reason: 'sign-out', now: clock.now() }))) return false;
        const actor: UserActor = { kind: 'user', userId: sub, tenantId: tid, roles: claims!.roles, permissions: await rbac.resolvePermissions(tid, claims!.roles, tx), via: 'token' };
        await audit.record(tx, { ...ctx, tenantId: tid, actor }, { action: 'auth.sign_out', target: `user:${sub}`, details: { signInId: sid } });
        await bus.publish(AUTH_REVOKED, { signInId: sid }, tx);
        return true;
      });
      forget({ signInId: sid });
      return { signedOut: ended };
    },

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

    /** Ends every sign-in of a user inside the transaction that removes or disables them (tokens stop at commit). */
    async revokeUser(tx: Tx, input: { tenantId: string; userId: string }): Promise<void> {
      // Recorded as ended too, so a deactivated user's old refresh tokens stay dead after reactivation.
      await repo.revokeUserSignIns(tx, { ...input, reason: 'user revoked', now: clock.now() });
      await bus.publish(AUTH_REVOKED, { userId: input.userId }, tx);
      tx.afterCommit(() => forget({ userId: input.userId }));
    },

    /** SPEC.md /auth/me: the caller's user and roles. */
    me(ctx: Ctx): Me | Promise<Me> {
      if (ctx.actor.kind !== 'user') throw new UnauthenticatedError();
      const a = ctx.actor;
      const of = (profile: Pick<UserRow, 'handle' | 'email' | 'displayName'>): Me => ({
        user: { id: a.userId, handle: profile.handle, email: profile.email, displayName: profile.displayName, tenantId: a.tenantId },
        roles: a.roles,
        permissions: a.permissions,
      });
      // Answered without a promise when the caller's profile came with the authentication (the usual case).
      return a.profile ? of(a.profile) : loadUser(a.tenantId, a.userId).then(of);
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

export type AuthService = ReturnType<typeof createAuthService>;
