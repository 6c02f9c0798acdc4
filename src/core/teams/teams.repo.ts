import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';

interface TeamMember {
  userId: string;
  handle: string;
  email: string;
  displayName: string;
  addedAt: Date;
}

export interface TeamRow {
  id: string;
  tenantId: string;
  name: string;
  createdAt: Date;
  members: TeamMember[];
}

// Members come as one JSON array per team (one query for the whole list); timestamps are turned back
// into Dates by the repo so the API serialises them like every other timestamp.
const TEAM = `t.id, t.tenant_id as "tenantId", t.name, t.created_at as "createdAt",
  coalesce((select json_agg(json_build_object('userId', u.id, 'handle', u.handle, 'email', u.email, 'displayName', u.display_name, 'addedAt', tm.added_at)
                            order by u.handle)
              from team_members tm join users u on u.id = tm.user_id
             where tm.team_id = t.id and tm.tenant_id = t.tenant_id), '[]'::json) as members`;

const withDates = (t: TeamRow): TeamRow => ({ ...t, members: t.members.map((m) => ({ ...m, addedAt: new Date(m.addedAt) })) });

export function createTeamsRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<TeamRow[]> {
      return (await q.query<TeamRow>(`select ${TEAM} from teams t where t.tenant_id = $1 order by lower(t.name), t.name`, [tenantId])).rows.map(withDates);
    },
    async find(q: Queryable, tenantId: string, id: string): Promise<TeamRow | null> {
      if (!isUuid(id)) return null;
      const row = (await q.query<TeamRow>(`select ${TEAM} from teams t where t.tenant_id = $1 and t.id = $2`, [tenantId, id])).rows[0];
      return row ? withDates(row) : null;
    },
    /** By name, ignoring case: how people name teams on the command line. */
    async findByName(q: Queryable, tenantId: string, name: string): Promise<TeamRow | null> {
      const row = (await q.query<TeamRow>(`select ${TEAM} from teams t where t.tenant_id = $1 and lower(t.name) = lower($2)`, [tenantId, name])).rows[0];
      return row ? withDates(row) : null;
    },
    /**
     * Null when the tenant already has a team of that name, ignoring case ("Platform" and "platform" would
     * be two teams nobody can tell apart on the command line).
     */
    async insert(q: Queryable, tenantId: string, name: string): Promise<TeamRow | null> {
      const { rows } = await q.query<{ id: string }>(
        `insert into teams (tenant_id, name) select $1, $2
          where not exists (select 1 from teams where tenant_id = $1 and lower(name) = lower($2))
         on conflict do nothing returning id`,
        [tenantId, name],
      );
      return rows[0] ? this.find(q, tenantId, rows[0].id) : null;
    },
    /** False when there was no such team (deleted meanwhile). Its memberships go with it. */
    async remove(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from teams where tenant_id = $1 and id = $2`, [tenantId, id]);
      return (rowCount ?? 0) > 0;
    },
    /**
     * True when the user was not a member before. `addedBy` marks a membership the sign-in's group mapping
     * made ('system:idp-groups'); added without it (by hand), a membership the mapping made is taken over,
     * so the mapping never takes away a membership someone also added by hand.
     */
    async addMember(q: Queryable, tenantId: string, teamId: string, userId: string, addedBy: string | null = null): Promise<boolean> {
      const { rowCount } = await q.query(
        `insert into team_members (tenant_id, team_id, user_id, added_by) values ($1, $2, $3, $4)
         on conflict (team_id, user_id) do update set added_by = null
          where team_members.added_by = 'system:idp-groups' and excluded.added_by is null`,
        [tenantId, teamId, userId, addedBy],
      );
      return (rowCount ?? 0) > 0;
    },
    /** A user's teams with who added them (null: by hand or by SCIM). */
    async membershipsOf(q: Queryable, tenantId: string, userId: string): Promise<Array<{ teamId: string; name: string; addedBy: string | null }>> {
      const { rows } = await q.query<{ teamId: string; name: string; addedBy: string | null }>(
        `select t.id as "teamId", t.name, tm.added_by as "addedBy" from team_members tm join teams t on t.id = tm.team_id and t.tenant_id = tm.tenant_id
          where tm.tenant_id = $1 and tm.user_id = $2 order by t.name`,
        [tenantId, userId],
      );
      return rows;
    },
    /** Removes a membership only if `addedBy` made it. */
    async removeMemberAddedBy(q: Queryable, tenantId: string, teamId: string, userId: string, addedBy: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from team_members where tenant_id = $1 and team_id = $2 and user_id = $3 and added_by = $4`, [tenantId, teamId, userId, addedBy]);
      return (rowCount ?? 0) > 0;
    },
    /** The names of the teams a user is a member of (the git gateway's access rules name teams). */
    async namesOf(q: Queryable, tenantId: string, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ name: string }>(
        `select t.name from team_members tm join teams t on t.id = tm.team_id and t.tenant_id = tm.tenant_id where tm.tenant_id = $1 and tm.user_id = $2 order by t.name`,
        [tenantId, userId],
      );
      return rows.map((r) => r.name);
    },
    /** False when the user was not a member. */
    async removeMember(q: Queryable, tenantId: string, teamId: string, userId: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from team_members where tenant_id = $1 and team_id = $2 and user_id = $3`, [tenantId, teamId, userId]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type TeamsRepo = ReturnType<typeof createTeamsRepo>;
