import { createHash } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { safeEqual } from '../../lib/secrets.js';
import type { AuditService } from '../audit/audit.service.js';
import { systemCtx, type Ctx, type UserActor } from '../context.js';
import { ConflictError, ForbiddenError, NotFoundError, UnauthenticatedError, UnavailableError, ValidationError } from '../errors.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { TenantsService } from '../tenants/tenants.service.js';
import type { UsersRepo, UserRow } from '../users/users.repo.js';
import type { OidcClient } from './oidc-client.js';
import { InvalidTokenError, REFRESHED_TTL_S, type TokenService } from './tokens.js';

const LOGIN_TTL_MS = 10 * 60 * 1000;
/**
 * How long an authenticated request may rely on an earlier check that its user and tenant exist.
 * Requests re-check at most this often per user and process (refresh always re-checks), so a deleted
 * user or tenant loses access within this time even with a valid access token.
 */
export const USER_CHECK_TTL_MS = 2000;
const USER_CACHE_MAX = 10_000;

export interface AuthSettings {
  publicUrl: string;
  redirectOrigins: readonly string[];
  defaultRole: string;
  autoProvisionTenants: boolean;
  tenantClaim: string;
  allowAnonymous: boolean;
  operatorEmail: string | null;
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
}

/** The auth-state error of SPEC.md: the user or token does not resolve to a provisioned tenant. */
export const tenantNotProvisioned = () =>
  new ForbiddenError('your organisation has no tenant on this service', {
    code: 'tenant_not_provisioned',
    hint: 'Ask the operator to map your organisation to a tenant (`aws tenant seed --external-id <id>`).',
  });

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function createAuthService(deps: {
  db: Database;
  tokens: TokenService;
  users: UsersRepo;
  tenantsRepo: TenantsRepo;
  tenants: TenantsService;
  rbac: RbacService;
  audit: AuditService;
  oidc: OidcClient | null;
  settings: AuthSettings;
  clock: Clock;
}) {
  const { db, tokens, users, tenantsRepo, tenants, rbac, audit, oidc, settings, clock } = deps;
  const publicOrigin = new URL(settings.publicUrl).origin;
  const userChecks = new Map<string, { at: number; user: UserRow }>();
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

  /** The operator user (AGENTWS_OPERATOR_EMAIL): who demo-mode and API-key requests act as. */
  async function operatorActor(via: UserActor['via']): Promise<UserActor> {
    if (!settings.operatorEmail) throw new UnavailableError('no operator user is configured', { hint: 'Set AGENTWS_OPERATOR_EMAIL.' });
    const { rows } = await db.hot<UserRow & { roles: string[] }>(
      'auth.operator',
      `select u.id, u.tenant_id as "tenantId", u.handle, u.email, u.display_name as "displayName",
              coalesce((select array_agg(r.name order by r.name) from user_roles ur join roles r on r.id = ur.role_id where ur.user_id = u.id), '{}') as roles
         from users u where lower(u.email) = lower($1) order by u.created_at limit 1`,
      [settings.operatorEmail],
    );
    const u = rows[0];
    if (!u) throw new UnavailableError(`the operator user ${settings.operatorEmail} does not exist`, { hint: 'Run `npx aws init` or `npx aws tenant seed --owner-email <operator>`.' });
    return {
      kind: 'user',
      userId: u.id,
      tenantId: u.tenantId,
      roles: u.roles,
      permissions: await rbac.resolvePermissions(u.tenantId, u.roles),
      via,
      profile: { handle: u.handle, email: u.email, displayName: u.displayName },
    };
  }

  async function issuePair(user: UserRow, roles: string[]) {
    const access = await tokens.issue({ userId: user.id, tenantId: user.tenantId, roles, typ: 'access' });
    const refresh = await tokens.issue({ userId: user.id, tenantId: user.tenantId, roles, typ: 'refresh' });
    return { accessToken: access.token, accessExpiresAt: access.expiresAt, refreshToken: refresh.token, refreshExpiresAt: refresh.expiresAt };
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
      await db.query(`delete from auth_login_states where expires_at < $1`, [now]);
      await db.query(
        `insert into auth_login_states (state_hash, code_verifier, nonce, redirect_to, expires_at) values ($1, $2, $3, $4, $5)`,
        [sha256(state), codeVerifier, nonce, redirectTo, new Date(now.getTime() + LOGIN_TTL_MS)],
      );
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
      const { rows } = await db.query<{ code_verifier: string; nonce: string; redirect_to: string | null }>(
        `delete from auth_login_states where state_hash = $1 and expires_at > $2 returning code_verifier, nonce, redirect_to`,
        [sha256(state), clock.now()],
      );
      const pending = rows[0];
      if (!pending) {
        throw new ValidationError('this sign-in expired or was already used', { code: 'sign_in_failed', hint: 'Start the sign-in again.' });
      }
      const identity = await client.exchange(input.callbackUrl, { state, nonce: pending.nonce, codeVerifier: pending.code_verifier });
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
          const roleName = provisioned ? 'owner' : settings.defaultRole;
          const role = await tenantsRepo.findRoleByName(tx, tenantId, roleName);
          if (role) await users.assignRole(tx, { tenantId, userId: user.id, roleId: role.id, assignedBy: 'system:sign-in' });
          else ctx.log.warn({ role: roleName, tenantId }, 'default role does not exist in the tenant: new user has no role');
        }
        const roles = await users.roleNames(tx, user.id);
        const actor: UserActor = { kind: 'user', userId: user.id, tenantId, roles, permissions: await rbac.resolvePermissions(tenantId, roles, tx), via: 'token' };
        await audit.record(tx, { ...ctx, tenantId, actor }, { action: 'auth.sign_in', target: `user:${user.id}`, details: { newUser: created, roles } });
        return { user, roles, created };
      });
      return { ...(await issuePair(result.user, result.roles)), ...result, redirectTo: pending.redirect_to ?? `${settings.publicUrl}/` };
    },

    /**
     * SPEC.md refresh: a new access token valid 900 s for an existing access or refresh token. The user
     * and tenant are re-checked; the role claims are kept as they are (rule 1).
     */
    async refresh(ctx: Ctx, input: { token: string }): Promise<{ token: string; expiresAt: Date }> {
      let claims;
      try {
        claims = await tokens.verify(input.token ?? '', ['access', 'refresh']);
      } catch (err) {
        if (!(err instanceof InvalidTokenError)) throw err;
        await db.transaction((tx) =>
          audit.record(tx, { ...ctx, actor: { kind: 'anonymous' } }, { action: 'auth.refresh_failed', target: '', tenantId: null, details: { reason: err.message } }),
        );
        throw new UnauthenticatedError('invalid token', { code: 'invalid token' });
      }
      const user = await loadUser(claims.tid, claims.sub);
      return tokens.issue({ userId: user.id, tenantId: user.tenantId, roles: claims.roles, typ: 'access', ttlS: REFRESHED_TTL_S });
    },

    /**
     * Who is calling: a Bearer JWT first, then the service API key (constant-time), then the access-token
     * cookie; without any credential, the operator in demo mode, else null (anonymous).
     */
    async authenticate(input: { bearer?: string; cookie?: string }): Promise<UserActor | null> {
      const token = input.bearer ?? input.cookie;
      if (!token) return settings.allowAnonymous ? operatorActor('demo') : null;
      let claims;
      try {
        claims = await tokens.verify(token, ['access']);
      } catch (err) {
        if (!(err instanceof InvalidTokenError)) throw err;
        if (input.bearer && settings.apiKey && safeEqual(input.bearer, settings.apiKey)) return operatorActor('api-key');
        throw new UnauthenticatedError('invalid token', { hint: 'Sign in again, or refresh the token with POST /v1/auth/refresh.' });
      }
      const user = await loadUserCached(claims.tid, claims.sub);
      return tokenActor(user, claims.roles, await rbac.resolvePermissions(user.tenantId, claims.roles));
    },

    /**
     * authenticate() without waiting, in the common case: a token this process verified, whose user was
     * checked within USER_CHECK_TTL_MS and whose tenant's role documents are cached. Undefined whenever
     * anything would have to be looked up or refused: authenticate() then does it. Same answer, no
     * promise: on a cheap route the awaits alone cost a tenth of the request.
     */
    authenticateCached(input: { bearer?: string; cookie?: string }): UserActor | undefined {
      const token = input.bearer ?? input.cookie;
      if (!token) return undefined;
      const now = clock.now().getTime();
      const claims = tokens.cached(token, ['access'], now);
      if (!claims) return undefined;
      // The same claims object comes back for the same token: so does its key, hash and all.
      let key = userKeys.get(claims);
      if (key === undefined) userKeys.set(claims, (key = `${claims.tid}:${claims.sub}`));
      const hit = userChecks.get(key);
      if (!hit || now - hit.at >= USER_CHECK_TTL_MS) return undefined;
      const permissions = rbac.cachedPermissions(hit.user.tenantId, claims.roles, now);
      return permissions && tokenActor(hit.user, claims.roles, permissions);
    },

    /** SPEC.md /auth/me: the caller's user and roles. */
    me(ctx: Ctx): Me | Promise<Me> {
      if (ctx.actor.kind !== 'user') throw new UnauthenticatedError();
      const a = ctx.actor;
      const of = (profile: Pick<UserRow, 'handle' | 'email' | 'displayName'>): Me => ({
        user: { id: a.userId, handle: profile.handle, email: profile.email, displayName: profile.displayName, tenantId: a.tenantId },
        roles: a.roles,
      });
      // Answered without a promise when the caller's profile came with the authentication (the usual case).
      return a.profile ? of(a.profile) : loadUser(a.tenantId, a.userId).then(of);
    },
  };

  function tokenActor(user: UserRow, roles: string[], permissions: UserActor['permissions']): UserActor {
    return { kind: 'user', userId: user.id, tenantId: user.tenantId, roles, permissions, via: 'token', profile: { handle: user.handle, email: user.email, displayName: user.displayName } };
  }

  async function loadUserCached(tenantId: string, userId: string): Promise<UserRow> {
    const key = `${tenantId}:${userId}`;
    const now = clock.now().getTime();
    const hit = userChecks.get(key);
    if (hit && now - hit.at < USER_CHECK_TTL_MS) return hit.user;
    const user = await loadUser(tenantId, userId);
    if (userChecks.size >= USER_CACHE_MAX) userChecks.clear();
    userChecks.set(key, { at: now, user });
    return user;
  }

  /** One query: the user with its tenant. No tenant: 403 tenant_not_provisioned; no user: 404. */
  async function loadUser(tenantId: string, userId: string): Promise<UserRow> {
    const { rows } = await db.hot<UserRow & { tenantExists: boolean }>(
      'auth.load-user',
      `select t.id is not null as "tenantExists", u.id, u.tenant_id as "tenantId", u.handle, u.email, u.display_name as "displayName"
         from (select $2::uuid as tid) k
         left join tenants t on t.id = k.tid
         left join users u on u.tenant_id = t.id and u.id = $1::uuid`,
      [userId, tenantId],
    );
    const row = rows[0];
    if (!row?.tenantExists) throw tenantNotProvisioned();
    if (!row.id) throw new NotFoundError('user not found', { code: 'user not found' });
    return row;
  }
}

export type AuthService = ReturnType<typeof createAuthService>;
