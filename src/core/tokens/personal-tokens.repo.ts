import type { Database, Queryable } from '../../db/database.js';
import { roleNamesSql } from '../rbac/role-assignments.repo.js';
import { isUuid } from '../../lib/ids.js';
import type { TokenScope } from './token-fns.js';

/** A personal access token as lists show it: never its value or hash. */
export interface PersonalTokenRow {
  id: string;
  tenantId: string;
  userId: string;
  /** The owner's handle and email, for admins' lists. */
  userHandle: string;
  userEmail: string;
  name: string;
  prefix: string;
  scopes: TokenScope[];
  expiresAt: Date;
  createdAt: Date;
  createdBy: string;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  revokedBy: string | null;
}

/** What authentication needs of a token: whose it is, its state, and the person's current role names. */
export interface TokenAuthRow {
  id: string;
  tenantId: string;
  userId: string;
  scopes: TokenScope[];
  expiresAt: Date;
  revokedAt: Date | null;
  roles: string[];
}

const COLS = `p.id, p.tenant_id as "tenantId", p.user_id as "userId", u.handle as "userHandle", u.email as "userEmail", p.name, p.prefix, p.scopes,
  p.expires_at as "expiresAt", p.created_at as "createdAt", p.created_by as "createdBy", p.last_used_at as "lastUsedAt",
  p.revoked_at as "revokedAt", p.revoked_by as "revokedBy"`;

export function createPersonalTokensRepo() {
  return {
    async insert(
      q: Queryable,
      t: { tenantId: string; userId: string; name: string; hash: string; prefix: string; scopes: TokenScope[]; expiresAt: Date; createdAt: Date; createdBy: string },
    ): Promise<PersonalTokenRow> {
      const { rows } = await q.query<{ id: string }>(
        `insert into personal_tokens (tenant_id, user_id, name, token_hash, prefix, scopes, expires_at, created_at, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
        [t.tenantId, t.userId, t.name, t.hash, t.prefix, t.scopes, t.expiresAt, t.createdAt, t.createdBy],
      );
      return (await this.find(q, t.tenantId, rows[0].id))!;
    },

    async find(q: Queryable, tenantId: string, id: string): Promise<PersonalTokenRow | null> {
      if (!isUuid(id)) return null;
      const { rows } = await q.query<PersonalTokenRow>(`select ${COLS} from personal_tokens p join users u on u.id = p.user_id where p.tenant_id = $1 and p.id = $2`, [tenantId, id]);
      return rows[0] ?? null;
    },

    /** The tenant's tokens, or one user's, newest first. */
    async list(q: Queryable, tenantId: string, userId?: string): Promise<PersonalTokenRow[]> {
      const { rows } = await q.query<PersonalTokenRow>(
        `select ${COLS} from personal_tokens p join users u on u.id = p.user_id
          where p.tenant_id = $1 and ($2::uuid is null or p.user_id = $2::uuid) order by p.created_at desc, p.id`,
        [tenantId, userId ?? null],
      );
      return rows;
    },

    /** Marks a token revoked; false when it already was. */
    async revoke(q: Queryable, tenantId: string, id: string, by: string, now: Date): Promise<boolean> {
      const { rowCount } = await q.query(`update personal_tokens set revoked_at = $3, revoked_by = $4 where tenant_id = $1 and id = $2 and revoked_at is null`, [tenantId, id, now, by]);
      return rowCount === 1;
    },

    /**
     * The token with this hash and its owner's role names now, in one statement run on every request
     * made with a token (the roles are read each time: a demotion narrows the token at once).
     */
    async forAuth(db: Database, hash: string): Promise<TokenAuthRow | null> {
      const { rows } = await db.hot<TokenAuthRow>(
        'pat.auth',
        `select p.id, p.tenant_id as "tenantId", p.user_id as "userId", p.scopes, p.expires_at as "expiresAt", p.revoked_at as "revokedAt",
                ${roleNamesSql('p.user_id')} as roles
           from personal_tokens p where p.token_hash = $1`,
        [hash],
      );
      return rows[0] ?? null;
    },

    /**
     * Adds requests to a token's count and notes its last use. Returns the hour and count it held before
     * when that hour is over (they are then summarised in the audit log), else null.
     */
    async noteUse(q: Queryable, t: { tenantId: string; id: string; requests: number; now: Date; hour: Date }): Promise<{ hour: Date; count: number } | null> {
      const { rows } = await q.query<{ hour: Date | null; count: number }>(
        `select use_hour as hour, use_count as count from personal_tokens where tenant_id = $1 and id = $2 for update`,
        [t.tenantId, t.id],
      );
      const before = rows[0];
      if (!before) return null;
      // A late batch for an hour already closed (another process) joins the open hour's count.
      const sameHour = before.hour !== null && before.hour.getTime() >= t.hour.getTime();
      await q.query(
        `update personal_tokens set last_used_at = greatest(coalesce(last_used_at, $3), $3), use_hour = $4, use_count = $5 where tenant_id = $1 and id = $2`,
        [t.tenantId, t.id, t.now, sameHour ? before.hour : t.hour, sameHour ? before.count + t.requests : t.requests],
      );
      return !sameHour && before.hour && before.count > 0 ? { hour: before.hour, count: before.count } : null;
    },
  };
}

export type PersonalTokensRepo = ReturnType<typeof createPersonalTokensRepo>;
