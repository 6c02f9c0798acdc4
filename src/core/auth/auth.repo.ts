import type { Database, Queryable } from '../../db/database.js';
import { roleNamesSql } from '../rbac/role-assignments.repo.js';
import type { UserRow } from '../users/users.repo.js';

/** A user as authentication needs it: with whether its tenant exists and whether the token's sign-in holds. */
export interface CallerRow extends Pick<UserRow, 'id' | 'tenantId' | 'handle' | 'email' | 'displayName'> {
  tenantExists: boolean;
  /** Null when the token names no sign-in; else whether that sign-in is this user's, unrevoked and unexpired. */
  signInValid: boolean | null;
  /** The user was deactivated (SCIM `active: false`): no credential of theirs authenticates. */
  deactivated?: boolean;
}

export interface SignInRow {
  id: string;
  tenantId: string;
  userId: string;
  authTime: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

/** A one-time sign-in link (`aws user sign-in-link`), as stored: its token only as a hash. */
export interface SignInLinkRow {
  id: string;
  tenantId: string;
  userId: string;
  createdBy: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

const LINK = `id, tenant_id as "tenantId", user_id as "userId", created_by as "createdBy", created_at as "createdAt", expires_at as "expiresAt", used_at as "usedAt"`;

const SIGN_IN = `id, tenant_id as "tenantId", user_id as "userId", auth_time as "authTime", expires_at as "expiresAt", revoked_at as "revokedAt"`;

/** All SQL of authentication: pending browser sign-ins, sign-ins, and the caller look-ups of every request. */
export function createAuthRepo() {
  return {
    async saveLoginState(q: Queryable, s: { stateHash: string; codeVerifier: string; nonce: string; redirectTo: string; expiresAt: Date; now: Date }): Promise<void> {
      await q.query(`delete from auth_login_states where expires_at < $1`, [s.now]);
      await q.query(
        `insert into auth_login_states (state_hash, code_verifier, nonce, redirect_to, expires_at) values ($1, $2, $3, $4, $5)`,
        [s.stateHash, s.codeVerifier, s.nonce, s.redirectTo, s.expiresAt],
      );
    },

    /** Takes a pending sign-in (single use): null when unknown, expired or already taken. */
    async takeLoginState(q: Queryable, stateHash: string, now: Date): Promise<{ codeVerifier: string; nonce: string; redirectTo: string | null } | null> {
      const { rows } = await q.query<{ codeVerifier: string; nonce: string; redirectTo: string | null }>(
        `delete from auth_login_states where state_hash = $1 and expires_at > $2
         returning code_verifier as "codeVerifier", nonce, redirect_to as "redirectTo"`,
        [stateHash, now],
      );
      return rows[0] ?? null;
    },

    /** Records a completed sign-in; old expired ones are dropped on the way (they can never be used again). */
    async insertSignIn(q: Queryable, s: { tenantId: string; userId: string; authTime: Date; expiresAt: Date }): Promise<SignInRow> {
      await q.query(`delete from auth_sign_ins where expires_at < $1`, [new Date(s.authTime.getTime() - 24 * 3600_000)]);
      const { rows } = await q.query<SignInRow>(
        `insert into auth_sign_ins (tenant_id, user_id, auth_time, expires_at) values ($1, $2, $3, $4) returning ${SIGN_IN}`,
        [s.tenantId, s.userId, s.authTime, s.expiresAt],
      );
      return rows[0];
    },

    async findSignIn(q: Queryable, tenantId: string, id: string): Promise<SignInRow | null> {
      const { rows } = await q.query<SignInRow>(`select ${SIGN_IN} from auth_sign_ins where tenant_id = $1 and id = $2`, [tenantId, id]);
      return rows[0] ?? null;
    },

    /** Revokes one sign-in of a user; false when it was unknown or revoked already. */
    async revokeSignIn(q: Queryable, s: { tenantId: string; userId: string; id: string; reason: string; now: Date }): Promise<boolean> {
      const { rowCount } = await q.query(
        `update auth_sign_ins set revoked_at = $4, revoked_reason = $5 where tenant_id = $1 and user_id = $2 and id = $3 and revoked_at is null`,
        [s.tenantId, s.userId, s.id, s.now, s.reason],
      );
      return rowCount === 1;
    },

    /** Ends every open sign-in of a user (deactivation, removal). */
    async revokeUserSignIns(q: Queryable, s: { tenantId: string; userId: string; reason: string; now: Date }): Promise<void> {
      await q.query(`update auth_sign_ins set revoked_at = $3, revoked_reason = $4 where tenant_id = $1 and user_id = $2 and revoked_at is null`, [
        s.tenantId,
        s.userId,
        s.now,
        s.reason,
      ]);
    },

    /** Stores a new sign-in link (its token's hash); links that ended a day ago are dropped on the way. */
    async insertSignInLink(q: Queryable, s: { tenantId: string; userId: string; tokenHash: string; createdBy: string; now: Date; expiresAt: Date }): Promise<SignInLinkRow> {
      await q.query(`delete from auth_sign_in_links where expires_at < $1`, [new Date(s.now.getTime() - 24 * 3600_000)]);
      const { rows } = await q.query<SignInLinkRow>(
        `insert into auth_sign_in_links (tenant_id, user_id, token_hash, created_by, created_at, expires_at) values ($1, $2, $3, $4, $5, $6) returning ${LINK}`,
        [s.tenantId, s.userId, s.tokenHash, s.createdBy, s.now, s.expiresAt],
      );
      return rows[0];
    },

    /**
     * Takes a sign-in link (single use, in one statement: of two requests racing with the same token,
     * one gets the row): null when unknown, used or expired.
     */
    async takeSignInLink(q: Queryable, tokenHash: string, now: Date): Promise<SignInLinkRow | null> {
      const { rows } = await q.query<SignInLinkRow>(
        `update auth_sign_in_links set used_at = $2 where token_hash = $1 and used_at is null and expires_at > $2 returning ${LINK}`,
        [tokenHash, now],
      );
      return rows[0] ?? null;
    },

    /** A link by its token's hash, whatever its state (to say why it was refused). */
    async findSignInLink(q: Queryable, tokenHash: string): Promise<SignInLinkRow | null> {
      const { rows } = await q.query<SignInLinkRow>(`select ${LINK} from auth_sign_in_links where token_hash = $1`, [tokenHash]);
      return rows[0] ?? null;
    },

    async noteSignInLinkUse(q: Queryable, s: { tenantId: string; id: string; signInId: string }): Promise<void> {
      await q.query(`update auth_sign_in_links set sign_in_id = $3 where tenant_id = $1 and id = $2`, [s.tenantId, s.id, s.signInId]);
    },

    /**
     * The caller of an authenticated request, in one statement run on every request (a prepared
     * statement on PostgreSQL): the user with its tenant, and the state of the token's sign-in.
     */
    async caller(db: Database, tenantId: string, userId: string, signInId: string | null, now: Date): Promise<CallerRow> {
      const { rows } = await db.hot<CallerRow>(
        'auth.caller',
        `select t.id is not null as "tenantExists", u.id, u.tenant_id as "tenantId", u.handle, u.email, u.display_name as "displayName",
                u.deactivated_at is not null as deactivated,
                case when $3::uuid is null then null
                     else exists (select 1 from auth_sign_ins s where s.id = $3::uuid and s.user_id = u.id and s.revoked_at is null and s.expires_at > $4) end as "signInValid"
           from (select $2::uuid as tid) k
           left join tenants t on t.id = k.tid
           left join users u on u.tenant_id = t.id and u.id = $1::uuid`,
        [userId, tenantId, signInId, now],
      );
      return rows[0];
    },

    /** The names of the roles a user holds now (a connection open since sign-in re-checks against them). */
    async userRoles(q: Queryable, tenantId: string, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ roles: string[] }>(`select ${roleNamesSql('u.id')} as roles from users u where u.tenant_id = $1 and u.id = $2`, [tenantId, userId]);
      return rows[0]?.roles ?? [];
    },

    /**
     * The operator user (AGENTWS_OPERATOR_EMAIL) with its current roles, in the operator's tenant only:
     * the tenant named by AGENTWS_OPERATOR_TENANT (slug or id), else the first tenant created (the one
     * `aws init` made). A user of another tenant with the same email is never the operator.
     */
    async operator(db: Database, email: string, tenantRef: string | null): Promise<(Omit<CallerRow, 'tenantExists' | 'signInValid'> & { roles: string[] }) | null> {
      const { rows } = await db.hot<Omit<CallerRow, 'tenantExists' | 'signInValid'> & { roles: string[] }>(
        'auth.operator',
        `with op_tenant as (
           select t.id from tenants t
            where case when $2::text is null then t.id = (select id from tenants order by created_at, id limit 1)
                       else t.slug = lower($2) or t.id::text = lower($2) end
         )
         select u.id, u.tenant_id as "tenantId", u.handle, u.email, u.display_name as "displayName",
                ${roleNamesSql('u.id')} as roles
           from users u join op_tenant o on o.id = u.tenant_id
          where lower(u.email) = lower($1)`,
        [email, tenantRef],
      );
      return rows[0] ?? null;
    },
  };
}

export type AuthRepo = ReturnType<typeof createAuthRepo>;
