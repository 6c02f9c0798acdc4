import { createHash, randomBytes } from 'node:crypto';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import { requireSystem, tenantOf } from '../../kernel/authz.js';
import { actorString, type Ctx, type UserActor } from '../../kernel/context.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { RoleAssignmentsRepo } from '../rbac/role-assignments.repo.js';
import type { UsersRepo } from '../users/users.repo.js';
import type { AuthRepo, SignInLinkRow } from './auth.repo.js';
import type { SignedIn } from './sign-in.service.js';
import type { SessionTokens } from './session-tokens.js';

/** Every link token starts with this: recognisable in a paste, and by secret scanners. */
const SIGN_IN_LINK_PREFIX = 'agentws_link_';
export const SIGN_IN_LINK_MINUTES_DEFAULT = 10;
export const SIGN_IN_LINK_MINUTES_MAX = 60;
/** The dashboard's route that takes a link's token (in the URL's fragment, which browsers never send). */
const SIGN_IN_LINK_ROUTE = '#/sign-in-link/';
/** Who a link may be made for: the people who set a workspace up. Others sign in through the identity provider. */
const LINK_ROLES = ['owner', 'admin'];

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export interface CreatedSignInLink {
  link: SignInLinkRow;
  /** The link to open: returned here only, never stored (only its token's hash is) or shown again. */
  url: string;
}

/**
 * One-time sign-in links: made by the operator (`aws user sign-in-link`) for a tenant's owner or admin,
 * used once within minutes to sign that person in to the dashboard exactly as the identity provider's
 * sign-in does (the same sign-in record and tokens, from session-tokens.ts). For the first hour in a
 * container, before an identity provider is set up.
 */
export function createSignInLinks(
  deps: { db: Database; repo: AuthRepo; users: UsersRepo; assignments: RoleAssignmentsRepo; rbac: RbacService; audit: AuditService; clock: Clock; settings: { publicUrl: string } },
  sessionTokens: Pick<SessionTokens, 'issueSignIn'>,
) {
  const { db, repo, users, assignments, rbac, audit, clock, settings } = deps;
  const linkRoleOf = (roles: string[]) => roles.find((r) => LINK_ROLES.includes(r));

  return {
    /**
     * Makes a one-time sign-in link for an owner or admin of the tenant (operator only: whoever runs the
     * CLI already holds the database). Audited as `auth.sign_in_link.create`, without the token.
     */
    async create(ctx: Ctx, input: { userId: string; minutes?: number; command?: string }): Promise<CreatedSignInLink> {
      requireSystem(ctx, 'a sign-in link');
      const tenantId = tenantOf(ctx);
      const minutes = input.minutes ?? SIGN_IN_LINK_MINUTES_DEFAULT;
      if (!(Number.isInteger(minutes) && minutes >= 1 && minutes <= SIGN_IN_LINK_MINUTES_MAX)) {
        throw new ValidationError(`expires-in: 1 to ${SIGN_IN_LINK_MINUTES_MAX} whole minutes`, { details: { field: 'expiresIn' } });
      }
      const user = await users.findById(db, tenantId, input.userId);
      if (!user) throw new NotFoundError('user not found');
      if (user.deactivatedAt) throw new ForbiddenError(`${user.email} is deactivated`, { code: 'user_deactivated' });
      const roles = await assignments.roleNames(db, user.id);
      if (!linkRoleOf(roles)) {
        throw new ForbiddenError(`sign-in links are for owners and admins: ${user.email} holds ${roles.length ? roles.join(', ') : 'no role'}`, {
          code: 'sign_in_link_not_allowed',
          hint: 'Other people sign in through the identity provider. `aws role assign` makes someone an admin.',
        });
      }
      const token = SIGN_IN_LINK_PREFIX + randomBytes(32).toString('base64url');
      const now = clock.now();
      const link = await db.transaction(async (tx) => {
        const row = await repo.insertSignInLink(tx, { tenantId, userId: user.id, tokenHash: sha256(token), createdBy: actorString(ctx.actor), now, expiresAt: new Date(now.getTime() + minutes * 60_000) });
        await audit.record(tx, { ...ctx, tenantId }, {
          action: 'auth.sign_in_link.create',
          target: `user:${user.id}`,
          userId: user.id,
          details: { linkId: row.id, expiresAt: row.expiresAt.toISOString(), minutes, ...(input.command ? { command: input.command } : {}) },
        });
        return row;
      });
      return { link, url: `${settings.publicUrl}/${SIGN_IN_LINK_ROUTE}${token}` };
    },

    /**
     * Signs in with a link's token: once, before it expires, for a user still active and still an owner
     * or admin. Issues the sign-in's tokens as the identity provider's sign-in does, audited as
     * `auth.sign_in` (via `sign-in-link`); a refusal as `auth.sign_in_denied`, with the reason and the
     * client address, never the token.
     */
    async use(ctx: Ctx, input: { token: string; ip: string }): Promise<Omit<SignedIn, 'redirectTo' | 'created'>> {
      const hash = sha256(input.token ?? '');
      const now = clock.now();
      const outcome = await db.transaction(async (tx) => {
        // Looked up by the token's SHA-256: what an attacker controls is the token, not its hash, so the
        // time an index comparison takes tells nothing about a stored token (no comparison of secrets here).
        const link = input.token?.startsWith(SIGN_IN_LINK_PREFIX) ? await repo.takeSignInLink(tx, hash, now) : null;
        if (!link) {
          const known = input.token?.startsWith(SIGN_IN_LINK_PREFIX) ? await repo.findSignInLink(tx, hash) : null;
          const reason = !known ? 'sign_in_link_invalid' : known.usedAt ? 'sign_in_link_used' : 'sign_in_link_expired';
          await audit.record(tx, { ...ctx, tenantId: known?.tenantId ?? null, actor: { kind: 'anonymous' } }, {
            action: 'auth.sign_in_denied',
            target: known ? `user:${known.userId}` : '',
            userId: known?.userId ?? null,
            details: { reason, ip: input.ip, ...(known ? { linkId: known.id } : {}) },
          });
          return { ok: false as const, refused: reason, link: known };
        }
        const denied = async (reason: string) => {
          await audit.record(tx, { ...ctx, tenantId: link.tenantId, actor: { kind: 'anonymous' } }, {
            action: 'auth.sign_in_denied',
            target: `user:${link.userId}`,
            userId: link.userId,
            details: { reason, ip: input.ip, linkId: link.id },
          });
          return { ok: false as const, refused: reason, link };
        };
        // Taken (used) even when refused below: a link is tried once.
        const user = await users.findById(tx, link.tenantId, link.userId);
        if (!user) return denied('sign_in_link_invalid');
        if (user.deactivatedAt) return denied('user_deactivated');
        const roles = await assignments.roleNames(tx, user.id);
        if (!linkRoleOf(roles)) return denied('sign_in_link_not_allowed');
        const actor: UserActor = { kind: 'user', userId: user.id, tenantId: user.tenantId, roles, permissions: await rbac.resolvePermissions(user.tenantId, roles, tx), via: 'token' };
        const issued = await sessionTokens.issueSignIn(tx, user, roles);
        await repo.noteSignInLinkUse(tx, { tenantId: link.tenantId, id: link.id, signInId: issued.signInId });
        await audit.record(tx, { ...ctx, tenantId: user.tenantId, actor }, {
          action: 'auth.sign_in',
          target: `user:${user.id}`,
          details: { via: 'sign-in-link', linkId: link.id, linkCreatedBy: link.createdBy, roles, signInId: issued.signInId, ip: input.ip },
        });
        return { ok: true as const, signedIn: { ...issued, user, roles } };
      });
      if (outcome.ok) return outcome.signedIn;
      throw refusal(outcome.refused, outcome.link);
    },
  };
}

/** The error a refused link is answered with: what the person holding it can do next. */
function refusal(reason: string, link: SignInLinkRow | null): Error {
  const again = 'Ask the operator for a new link: `aws user sign-in-link <email>` in the container or on the host.';
  switch (reason) {
    case 'sign_in_link_used':
      return new ValidationError(`this sign-in link was already used${link?.usedAt ? ` (${link.usedAt.toISOString()})` : ''}: a link signs in once`, { code: reason, hint: again });
    case 'sign_in_link_expired':
      return new ValidationError(`this sign-in link expired${link ? ` at ${link.expiresAt.toISOString()}` : ''}`, { code: reason, hint: again });
    case 'user_deactivated':
      return new ForbiddenError('this account is deactivated', { code: reason, hint: 'Ask your administrator.' });
    case 'sign_in_link_not_allowed':
      return new ForbiddenError('sign-in links are for owners and admins, and this account is no longer one', { code: reason, hint: 'Sign in through your identity provider.' });
    default:
      return new ValidationError('this sign-in link is not valid: it is incomplete, or its user was removed', { code: 'sign_in_link_invalid', hint: again });
  }
}
