import type { Database, Tx } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import type { EventBus } from '../../kernel/events.js';
import type { RbacService } from '../rbac/rbac.service.js';
import type { UserRow } from '../users/users.repo.js';
import type { AuthRepo } from './auth.repo.js';
import { AUTH_REVOKED, invalidToken, type Authentication } from './authentication.js';
import { InvalidTokenError, REFRESH_TTL_S, REFRESHED_TTL_S, type TokenClaims, type TokenService } from './tokens.js';

/**
 * The tokens of a sign-in: issued when it completes, refreshed within its lifetime, ended by a sign-out
 * or when the user is removed (every process then forgets them at once, through AUTH_REVOKED).
 */
export function createSessionTokens(deps: {
  db: Database;
  repo: AuthRepo;
  bus: EventBus;
  tokens: TokenService;
  rbac: Pick<RbacService, 'resolvePermissions'>;
  audit: AuditService;
  clock: Clock;
  authn: Pick<Authentication, 'loadUser' | 'forget' | 'ensureRevocations'>;
}) {
  const { db, repo, bus, tokens, rbac, audit, clock } = deps;
  const { loadUser, forget, ensureRevocations } = deps.authn;

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

  return {
    issueSignIn,

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

    /** Ends every sign-in of a user inside the transaction that removes or disables them (tokens stop at commit). */
    async revokeUser(tx: Tx, input: { tenantId: string; userId: string }): Promise<void> {
      // Recorded as ended too, so a deactivated user's old refresh tokens stay dead after reactivation.
      await repo.revokeUserSignIns(tx, { ...input, reason: 'user revoked', now: clock.now() });
      await bus.publish(AUTH_REVOKED, { userId: input.userId }, tx);
      tx.afterCommit(() => forget({ userId: input.userId }));
    },

  };
}

export type SessionTokens = ReturnType<typeof createSessionTokens>;
