import type { Database, Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { TeamForScim, UserForScim } from './scim-fns.js';

export interface ScimTokenRow {
  id: string;
  tenantId: string;
  name: string;
  createdBy: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  /** After this the token is refused (migration 0030); renewed by creating it again under its name. */
  expiresAt: Date;
}

const TOKEN = `id, tenant_id as "tenantId", name, created_by as "createdBy", created_at as "createdAt", last_used_at as "lastUsedAt", expires_at as "expiresAt"`;
const USER = `u.id, u.email, u.display_name as "displayName", u.given_name as "givenName", u.family_name as "familyName",
  u.scim_external_id as "scimExternalId", u.deactivated_at as "deactivatedAt", u.created_at as "createdAt", u.updated_at as "updatedAt"`;
const TEAM = `t.id, t.name, t.scim_external_id as "scimExternalId", t.created_at as "createdAt",
  coalesce((select json_agg(json_build_object('userId', u.id, 'email', u.email) order by u.email)
              from team_members tm join users u on u.id = tm.user_id
             where tm.team_id = t.id and tm.tenant_id = t.tenant_id), '[]'::json) as members`;

/** Parses created_at the driver may hand back as text inside JSON (it does not here, but timestamps are Dates everywhere). */
const teamRow = (t: TeamForScim): TeamForScim => ({ ...t, createdAt: new Date(t.createdAt) });

/**
 * All SQL of SCIM: the tenant's SCIM tokens, and the SCIM columns of users and teams (migration 0025:
 * deactivation, externalId, the SCIM-managed flag, given and family name). Users' and teams' other
 * columns are written through their own repos.
 */
export function createScimRepo() {
  return {
    /** Creates a named token, or replaces the one of that name (rotation, renewal); `replaced` says which. */
    async upsertToken(q: Queryable, t: { tenantId: string; name: string; hash: string; createdBy: string; createdAt: Date; expiresAt: Date }): Promise<ScimTokenRow & { replaced: boolean }> {
      const { rows } = await q.query<ScimTokenRow & { replaced: boolean }>(
        `insert into scim_tokens (tenant_id, name, token_hash, created_by, created_at, expires_at) values ($1, $2, $3, $4, $5, $6)
         on conflict (tenant_id, name) do update set token_hash = excluded.token_hash, created_by = excluded.created_by, created_at = excluded.created_at,
                                                     expires_at = excluded.expires_at, last_used_at = null
         returning ${TOKEN}, (xmax::text <> '0') as replaced`,
        [t.tenantId, t.name, t.hash, t.createdBy, t.createdAt, t.expiresAt],
      );
      return rows[0];
    },
    async listTokens(q: Queryable, tenantId: string): Promise<ScimTokenRow[]> {
      return (await q.query<ScimTokenRow>(`select ${TOKEN} from scim_tokens where tenant_id = $1 order by name`, [tenantId])).rows;
    },
    /** Deletes the named token, or every token of the tenant (name null); returns the names deleted. */
    async deleteTokens(q: Queryable, tenantId: string, name: string | null): Promise<string[]> {
      const { rows } = await q.query<{ name: string }>(
        `delete from scim_tokens where tenant_id = $1 and ($2::text is null or name = $2) returning name`,
        [tenantId, name],
      );
      return rows.map((r) => r.name).sort();
    },
    /** The token with this hash (and its tenant), expired or not; its last use is recorded at most once a minute (not an expired one's). */
    async useToken(db: Database, hash: string, now: Date): Promise<ScimTokenRow | null> {
      const { rows } = await db.query<ScimTokenRow>(`select ${TOKEN} from scim_tokens where token_hash = $1`, [hash]);
      const row = rows[0];
      if (row && row.expiresAt > now && (!row.lastUsedAt || now.getTime() - row.lastUsedAt.getTime() > 60_000)) {
        await db.query(`update scim_tokens set last_used_at = $2 where id = $1`, [row.id, now]);
      }
      return row ?? null;
    },

    async listUsers(q: Queryable, tenantId: string): Promise<UserForScim[]> {
      return (await q.query<UserForScim>(`select ${USER} from users u where u.tenant_id = $1 order by u.created_at, u.id`, [tenantId])).rows;
    },
    async findUser(q: Queryable, tenantId: string, id: string): Promise<UserForScim | null> {
      if (!isUuid(id)) return null;
      return (await q.query<UserForScim>(`select ${USER} from users u where u.tenant_id = $1 and u.id = $2`, [tenantId, id])).rows[0] ?? null;
    },
    /** The user (other than `exceptId`) holding this SCIM externalId, if any. */
    async userIdByExternalId(q: Queryable, tenantId: string, externalId: string, exceptId: string | null): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `select id from users where tenant_id = $1 and scim_external_id = $2 and ($3::uuid is null or id <> $3::uuid)`,
        [tenantId, externalId, exceptId],
      );
      return rows[0]?.id ?? null;
    },
    /** The user (other than `exceptId`) with this email, ignoring case, if any. */
    async userIdByEmail(q: Queryable, tenantId: string, email: string, exceptId: string | null): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `select id from users where tenant_id = $1 and lower(email) = lower($2) and ($3::uuid is null or id <> $3::uuid)`,
        [tenantId, email, exceptId],
      );
      return rows[0]?.id ?? null;
    },
    /** Writes what SCIM sets on a user and marks the account SCIM-managed. `deactivatedAt` null: active. */
    async writeUser(
      q: Queryable,
      tenantId: string,
      id: string,
      u: { email: string; displayName: string; givenName: string; familyName: string; externalId: string | null; deactivatedAt: Date | null; now: Date },
    ): Promise<void> {
      await q.query(
        `update users set email = $3, display_name = $4, given_name = $5, family_name = $6, scim_external_id = $7, deactivated_at = $8, scim_managed = true, updated_at = $9
          where tenant_id = $1 and id = $2`,
        [tenantId, id, u.email, u.displayName, u.givenName, u.familyName, u.externalId, u.deactivatedAt, u.now],
      );
    },

    async listTeams(q: Queryable, tenantId: string): Promise<TeamForScim[]> {
      return (await q.query<TeamForScim>(`select ${TEAM} from teams t where t.tenant_id = $1 order by t.created_at, t.id`, [tenantId])).rows.map(teamRow);
    },
    async findTeam(q: Queryable, tenantId: string, id: string): Promise<TeamForScim | null> {
      if (!isUuid(id)) return null;
      const row = (await q.query<TeamForScim>(`select ${TEAM} from teams t where t.tenant_id = $1 and t.id = $2`, [tenantId, id])).rows[0];
      return row ? teamRow(row) : null;
    },
    /** The team (other than `exceptId`) named so, ignoring case, or holding this externalId. */
    async teamIdByNameOrExternalId(q: Queryable, tenantId: string, name: string, externalId: string | null, exceptId: string | null): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `select id from teams where tenant_id = $1 and (lower(name) = lower($2) or scim_external_id = $3) and ($4::uuid is null or id <> $4::uuid) limit 1`,
        [tenantId, name, externalId, exceptId],
      );
      return rows[0]?.id ?? null;
    },
    async writeTeam(q: Queryable, tenantId: string, id: string, t: { name: string; externalId: string | null }): Promise<void> {
      await q.query(`update teams set name = $3, scim_external_id = $4 where tenant_id = $1 and id = $2`, [tenantId, id, t.name, t.externalId]);
    },
    /** Which of these ids are users of the tenant. */
    async existingUserIds(q: Queryable, tenantId: string, ids: string[]): Promise<Set<string>> {
      const valid = ids.filter(isUuid);
      if (!valid.length) return new Set();
      const { rows } = await q.query<{ id: string }>(`select id from users where tenant_id = $1 and id = any($2::uuid[])`, [tenantId, valid]);
      return new Set(rows.map((r) => r.id));
    },
  };
}

export type ScimRepo = ReturnType<typeof createScimRepo>;
