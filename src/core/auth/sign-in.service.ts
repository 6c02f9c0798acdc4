import { createHash } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { systemCtx, type Ctx, type UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, UnavailableError, ValidationError } from '../../kernel/errors.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { RolesRepo } from '../rbac/roles.repo.js';
import type { TenantsService } from '../tenants/tenants.service.js';
import type { UsersRepo, UserRow } from '../users/users.repo.js';
import type { AuthRepo } from './auth.repo.js';
import { tenantNotProvisioned, type AuthSettings } from './authentication.js';
import type { GroupSync } from './group-sync.js';
import type { OidcClient } from './oidc-client.js';
import type { SessionTokens } from './session-tokens.js';

const LOGIN_TTL_MS = 10 * 60 * 1000;

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

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export interface SignInDeps {
  db: Database;
  repo: AuthRepo;
  users: UsersRepo;
  tenantsRepo: TenantsRepo;
  roles: RolesRepo;
  assignments: RoleAssignmentsRepo;
  tenants: TenantsService;
  rbac: RbacService;
  audit: AuditService;
  oidc: OidcClient | null;
  /** The tenant's opt-in group mapping at sign-in (roles and teams from the ID token's groups). */
  groupSync: GroupSync;
  settings: AuthSettings;
  clock: Clock;
}

/**
 * Browser sign-in through the organisation's identity provider (OIDC with PKCE): the tenant mapped or
 * provisioned, the user found, linked or created, the tenant's group mapping applied when it opts in,
 * and the sign-in's tokens issued (session-tokens.ts), all in one transaction.
 */
export function createSignInService(deps: SignInDeps, sessionTokens: Pick<SessionTokens, 'issueSignIn'>) {
  const { db, repo, users, tenantsRepo, roles: rolesRepo, assignments, tenants, rbac, audit, oidc, settings, clock } = deps;
  const { issueSignIn } = sessionTokens;
  const publicOrigin = new URL(settings.publicUrl).origin;

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

  /** A handle for a new user: the provider's username or email local part, made unique in the tenant. */
  async function freeHandle(q: Database | Parameters<AuditService['record']>[0], tenantId: string, wanted: string): Promise<string> {
    const base = (wanted.split('@')[0].toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '') || 'user').slice(0, 56);
    let handle = base;
    for (let i = 2; await users.handleTaken(q, tenantId, handle); i++) handle = `${base}-${i}`;
    return handle;
  }

  return {
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
          const role = provisioned || !mapsGroups ? await rolesRepo.findByName(tx, tenantId, roleName) : undefined;
          if (role) await assignments.assign(tx, { tenantId, userId: user.id, roleId: role.id, assignedBy: 'system:sign-in' });
          else if (role === null) ctx.log.warn({ role: roleName, tenantId }, 'default role does not exist in the tenant: new user has no role');
        }
        if (mapsGroups) {
          const sync = { ...ctx, tenantId, actor: { kind: 'system' as const, name: 'idp-groups' } };
          await deps.groupSync.apply(tx, sync, { tenantId, settings: tenantSettings, userId: user.id, claims: identity.claims, defaultRole: settings.defaultRole });
        }
        const roles = await assignments.roleNames(tx, user.id);
        const actor: UserActor = { kind: 'user', userId: user.id, tenantId, roles, permissions: await rbac.resolvePermissions(tenantId, roles, tx), via: 'token' };
        const issued = await issueSignIn(tx, user, roles);
        await audit.record(tx, { ...ctx, tenantId, actor }, { action: 'auth.sign_in', target: `user:${user.id}`, details: { newUser: created, roles, signInId: issued.signInId } });
        return { ...issued, user, roles, created };
      });
      // 403 rather than 401: the identity provider did authenticate them; this service refuses the account.
      if (!result) throw new ForbiddenError('this account is deactivated', { code: 'user_deactivated', hint: "Your organisation's identity provider deactivated it; ask your administrator." });
      return { ...result, redirectTo: pending.redirectTo ?? `${settings.publicUrl}/` };
    },

  };
}
