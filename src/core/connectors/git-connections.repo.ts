import type { Queryable } from '../../db/database.js';

/** A person's own account at a git host (issue 28): its tokens sealed. */
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
  c.refresh_sealed as "refreshSealed", c.expires_at as "expiresAt", c.scopes, c.created_at as "createdAt", c.updated_at as "updatedAt"`;

/** All SQL of git_connections and git_oauth_states. */
export function createGitConnectionsRepo() {
  return {
    async find(q: Queryable, tenantId: string, hostId: string, userId: string): Promise<GitConnectionRow | null> {
      return (await q.query<GitConnectionRow>(`select ${CONN} from git_connections c where c.tenant_id = $1 and c.host_id = $2 and c.user_id = $3`, [tenantId, hostId, userId])).rows[0] ?? null;
    },
    /** The row locked: one refresh at a time (hosts rotate refresh tokens, so two would spoil each other). */
    async findForUpdate(q: Queryable, tenantId: string, hostId: string, userId: string): Promise<GitConnectionRow | null> {
      return (await q.query<GitConnectionRow>(`select ${CONN} from git_connections c where c.tenant_id = $1 and c.host_id = $2 and c.user_id = $3 for update`, [tenantId, hostId, userId])).rows[0] ?? null;
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
           refresh_sealed = excluded.refresh_sealed, expires_at = excluded.expires_at, scopes = excluded.scopes, created_at = now(), updated_at = now()
         returning ${CONN}`,
        [c.tenantId, c.hostId, c.userId, c.account, c.accessSealed, c.refreshSealed, c.expiresAt, c.scopes],
      );
      return rows[0]!;
    },
    async saveRefreshed(q: Queryable, id: string, t: Pick<GitConnectionRow, 'accessSealed' | 'refreshSealed' | 'expiresAt' | 'scopes'>): Promise<void> {
      await q.query(`update git_connections set access_sealed = $2, refresh_sealed = $3, expires_at = $4, scopes = $5, updated_at = now() where id = $1`, [id, t.accessSealed, t.refreshSealed, t.expiresAt, t.scopes]);
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
