import type { Queryable } from '../../db/database.js';

/** A person's own account at a git host: its tokens sealed. */
export interface GitConnectionRow {
  id: string;
  tenantId: string;
  hostId: string;
  userId: string;
  account: string;
  accessSealed: string;
  refreshSealed: string | null;
  expiresAt: Date | null;
  scopes: string;
  /** A refresh under way: until when its claim holds (null: none). */
  refreshLeaseUntil: Date | null;
  /** The last refresh of this access token failed: when, and the host's reason (cleared by a success or a reconnect). */
  refreshFailedAt: Date | null;
  refreshError: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A connection as listed with its person (for admins). */
export interface GitConnectionListing extends GitConnectionRow {
  handle: string;
  email: string;
}

export interface GitOAuthStateRow {
  tenantId: string;
  hostId: string;
  userId: string;
  verifierSealed: string;
  expiresAt: Date;
}

const CONN = `c.id, c.tenant_id as "tenantId", c.host_id as "hostId", c.user_id as "userId", c.account, c.access_sealed as "accessSealed",
  c.refresh_sealed as "refreshSealed", c.expires_at as "expiresAt", c.scopes, c.refresh_lease_until as "refreshLeaseUntil",
  c.refresh_failed_at as "refreshFailedAt", c.refresh_error as "refreshError", c.created_at as "createdAt", c.updated_at as "updatedAt"`;

/** All SQL of git_connections and git_oauth_states. */
export function createGitConnectionsRepo() {
  return {
    async find(q: Queryable, tenantId: string, hostId: string, userId: string): Promise<GitConnectionRow | null> {
      return (await q.query<GitConnectionRow>(`select ${CONN} from git_connections c where c.tenant_id = $1 and c.host_id = $2 and c.user_id = $3`, [tenantId, hostId, userId])).rows[0] ?? null;
    },
    /**
     * Claims the refresh of a connection (one at a time: hosts rotate refresh tokens, so two would spoil
     * each other) without holding a lock across the call to the host: the claim is a lease until `until`,
     * taken only while no live lease is held and the access token is still `fromAccess` (the one found
     * due: a refresh that finished meanwhile changed it). Null when not taken.
     */
    async claimRefresh(q: Queryable, tenantId: string, id: string, fromAccess: string, lease: string, now: Date, until: Date): Promise<GitConnectionRow | null> {
      const { rows } = await q.query<GitConnectionRow>(
        `update git_connections c set refresh_lease = $4, refresh_lease_until = $6
          where c.tenant_id = $1 and c.id = $2 and c.access_sealed = $3 and (c.refresh_lease_until is null or c.refresh_lease_until <= $5)
          returning ${CONN}`,
        [tenantId, id, fromAccess, lease, now, until],
      );
      return rows[0] ?? null;
    },
    /**
     * The person whose connection to a host is the host account `account` (who wrote a comment on
     * the host), matched case-insensitively as hosts match logins. A connection whose account was not
     * looked up (empty) matches nothing. At most two rows: two people connected to the same account is
     * ambiguous, and the caller decides (the intake maps neither).
     */
    async findByAccount(q: Queryable, tenantId: string, hostId: string, account: string): Promise<GitConnectionRow[]> {
      if (!account) return [];
      return (
        await q.query<GitConnectionRow>(`select ${CONN} from git_connections c where c.tenant_id = $1 and c.host_id = $2 and c.account <> '' and lower(c.account) = lower($3) order by c.created_at limit 2`, [tenantId, hostId, account])
      ).rows;
    },
    async ofUser(q: Queryable, tenantId: string, userId: string): Promise<GitConnectionRow[]> {
      return (await q.query<GitConnectionRow>(`select ${CONN} from git_connections c where c.tenant_id = $1 and c.user_id = $2`, [tenantId, userId])).rows;
    },
    async ofHost(q: Queryable, tenantId: string, hostId: string): Promise<GitConnectionListing[]> {
      return (
        await q.query<GitConnectionListing>(
          `select ${CONN}, u.handle, u.email from git_connections c join users u on u.id = c.user_id and u.tenant_id = c.tenant_id
            where c.tenant_id = $1 and c.host_id = $2 order by u.handle`,
          [tenantId, hostId],
        )
      ).rows;
    },
    /** Connects (or reconnects) a person: one connection per host and person. */
    async upsert(q: Queryable, c: Pick<GitConnectionRow, 'tenantId' | 'hostId' | 'userId' | 'account' | 'accessSealed' | 'refreshSealed' | 'expiresAt' | 'scopes'>): Promise<GitConnectionRow> {
      const { rows } = await q.query<GitConnectionRow>(
        `insert into git_connections as c (tenant_id, host_id, user_id, account, access_sealed, refresh_sealed, expires_at, scopes)
         values ($1, $2, $3, $4, $5, $6, $7, $8)
         on conflict (host_id, user_id) do update set account = excluded.account, access_sealed = excluded.access_sealed,
           refresh_sealed = excluded.refresh_sealed, expires_at = excluded.expires_at, scopes = excluded.scopes, created_at = now(), updated_at = now(),
           refresh_lease = null, refresh_lease_until = null, refresh_failed_at = null, refresh_error = null
         returning ${CONN}`,
        [c.tenantId, c.hostId, c.userId, c.account, c.accessSealed, c.refreshSealed, c.expiresAt, c.scopes],
      );
      return rows[0]!;
    },
    /**
     * The refreshed tokens, written only over the access token the refresh started from (false: the
     * connection was removed or reconnected meanwhile, and these tokens are not kept). Clears any recorded
     * failure, and the lease when it is still this refresh's (`lease`).
     */
    async saveRefreshed(q: Queryable, tenantId: string, id: string, fromAccess: string, lease: string, t: Pick<GitConnectionRow, 'accessSealed' | 'refreshSealed' | 'expiresAt' | 'scopes'>): Promise<boolean> {
      const { rowCount } = await q.query(
        `update git_connections set access_sealed = $5, refresh_sealed = $6, expires_at = $7, scopes = $8, refresh_failed_at = null, refresh_error = null,
                refresh_lease_until = case when refresh_lease = $4 then null else refresh_lease_until end,
                refresh_lease = case when refresh_lease = $4 then null else refresh_lease end, updated_at = now()
          where tenant_id = $1 and id = $2 and access_sealed = $3`,
        [tenantId, id, fromAccess, lease, t.accessSealed, t.refreshSealed, t.expiresAt, t.scopes],
      );
      return (rowCount ?? 0) > 0;
    },
    /** A refresh that failed: when and why, for this access token; the lease given up when it is still this refresh's. */
    async refreshFailed(q: Queryable, tenantId: string, id: string, fromAccess: string, lease: string, at: Date, error: string): Promise<void> {
      await q.query(
        `update git_connections set refresh_failed_at = $5, refresh_error = $6,
                refresh_lease_until = case when refresh_lease = $4 then null else refresh_lease_until end,
                refresh_lease = case when refresh_lease = $4 then null else refresh_lease end, updated_at = now()
          where tenant_id = $1 and id = $2 and access_sealed = $3`,
        [tenantId, id, fromAccess, lease, at, error],
      );
    },
    /** False when there was none. */
    async remove(q: Queryable, tenantId: string, hostId: string, userId: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from git_connections where tenant_id = $1 and host_id = $2 and user_id = $3`, [tenantId, hostId, userId]);
      return (rowCount ?? 0) > 0;
    },
    async countByHost(q: Queryable, tenantId: string): Promise<Map<string, number>> {
      const { rows } = await q.query<{ hostId: string; n: number }>(`select host_id as "hostId", count(*)::int as n from git_connections where tenant_id = $1 group by host_id`, [tenantId]);
      return new Map(rows.map((r) => [r.hostId, r.n]));
    },

    /** A person's connections with their host's name and address, for their data export: never the sealed tokens. */
    async accountsOfUser(q: Queryable, tenantId: string, userId: string): Promise<Array<{ host: string; baseUrl: string; account: string; scopes: string; expiresAt: Date | null; createdAt: Date; updatedAt: Date }>> {
      return (
        await q.query<{ host: string; baseUrl: string; account: string; scopes: string; expiresAt: Date | null; createdAt: Date; updatedAt: Date }>(
          `select h.name as host, h.base_url as "baseUrl", c.account, c.scopes, c.expires_at as "expiresAt", c.created_at as "createdAt", c.updated_at as "updatedAt"
             from git_connections c join git_hosts h on h.id = c.host_id and h.tenant_id = c.tenant_id
            where c.tenant_id = $1 and c.user_id = $2 order by h.name`,
          [tenantId, userId],
        )
      ).rows;
    },
    /** Removes every connection of a person and their authorizations under way (their erasure); how many connections went. */
    async removeOfUser(q: Queryable, tenantId: string, userId: string): Promise<number> {
      await q.query(`delete from git_oauth_states where tenant_id = $1 and user_id = $2`, [tenantId, userId]);
      const { rowCount } = await q.query(`delete from git_connections where tenant_id = $1 and user_id = $2`, [tenantId, userId]);
      return rowCount ?? 0;
    },

    async insertState(q: Queryable, stateHash: string, s: GitOAuthStateRow): Promise<void> {
      // Old, unused authorizations go as new ones start: nothing else needs to sweep the table.
      await q.query(`delete from git_oauth_states where expires_at < now()`);
      await q.query(`insert into git_oauth_states (state_hash, tenant_id, host_id, user_id, verifier_sealed, expires_at) values ($1, $2, $3, $4, $5, $6)`, [
        stateHash, s.tenantId, s.hostId, s.userId, s.verifierSealed, s.expiresAt,
      ]);
    },
    /** Takes the authorization out (a state is used once), whether or not it is still valid. */
    async takeState(q: Queryable, stateHash: string): Promise<GitOAuthStateRow | null> {
      const { rows } = await q.query<GitOAuthStateRow>(
        `delete from git_oauth_states where state_hash = $1
         returning tenant_id as "tenantId", host_id as "hostId", user_id as "userId", verifier_sealed as "verifierSealed", expires_at as "expiresAt"`,
        [stateHash],
      );
      return rows[0] ?? null;
    },
  };
}

export type GitConnectionsRepo = ReturnType<typeof createGitConnectionsRepo>;
