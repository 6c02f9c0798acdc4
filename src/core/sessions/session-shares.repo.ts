import type { Queryable } from '../../db/database.js';

export type ShareMode = 'live' | 'as_of_now';

export interface ShareRow {
  id: string;
  tenantId: string;
  sessionId: string;
  userId: string | null;
  teamId: string | null;
  mode: ShareMode;
  createdBy: string;
  createdAt: Date;
  /** The person's name and email, or the team's name (for lists). */
  userHandle: string | null;
  userEmail: string | null;
  userName: string | null;
  teamName: string | null;
}

/** How a person may read another person's session: the share that lets them (live first, then the newest). */
export interface ShareAccess {
  shareId: string;
  mode: ShareMode;
  asOf: Date;
  via: 'person' | 'team';
}

export interface HandoverRow {
  id: string;
  fromUserId: string | null;
  toUserId: string | null;
  transcript: Array<{ info: Record<string, any>; parts: Array<Record<string, any>> }>;
  folder: string | null;
  files: Record<string, unknown>;
  createdAt: Date;
}

const SHARE = `sh.id, sh.tenant_id as "tenantId", sh.session_id as "sessionId", sh.user_id as "userId", sh.team_id as "teamId", sh.mode,
  sh.created_by as "createdBy", sh.created_at as "createdAt", u.handle as "userHandle", u.email as "userEmail", u.display_name as "userName", t.name as "teamName"`;
const SHARE_FROM = `session_shares sh left join users u on u.id = sh.user_id and u.tenant_id = sh.tenant_id left join teams t on t.id = sh.team_id and t.tenant_id = sh.tenant_id`;

/** The shares in force that reach a person: theirs, or of a team they are a member of (params: tenant $1, user $2). */
const REACHES = `sh.tenant_id = $1 and sh.revoked_at is null
  and (sh.user_id = $2 or sh.team_id in (select tm.team_id from team_members tm where tm.tenant_id = $1 and tm.user_id = $2))`;

/** The SQL of session_shares and session_handovers. Every query is filtered by tenant. */
export function createSessionSharesRepo() {
  return {
    async insert(q: Queryable, s: { tenantId: string; sessionId: string; userId: string | null; teamId: string | null; mode: ShareMode; transcript: unknown; createdBy: string }): Promise<string> {
      const { rows } = await q.query<{ id: string }>(
        `insert into session_shares (tenant_id, session_id, user_id, team_id, mode, transcript, created_by) values ($1, $2, $3, $4, $5, $6, $7) returning id`,
        [s.tenantId, s.sessionId, s.userId, s.teamId, s.mode, s.transcript === null ? null : JSON.stringify(s.transcript), s.createdBy],
      );
      return rows[0].id;
    },

    /** Ends the share in force for this person or team of the session, if any (a new one replaces it). */
    async revokeTarget(q: Queryable, tenantId: string, sessionId: string, target: { userId: string | null; teamId: string | null }, by: string): Promise<number> {
      const { rowCount } = await q.query(
        `update session_shares set revoked_at = now(), revoked_by = $5
          where tenant_id = $1 and session_id = $2 and revoked_at is null and (user_id = $3 or team_id = $4)`,
        [tenantId, sessionId, target.userId, target.teamId, by],
      );
      return rowCount ?? 0;
    },

    /** Ends one share in force of the session; null when there is none by that id. */
    async revoke(q: Queryable, tenantId: string, sessionId: string, shareId: string, by: string): Promise<{ userId: string | null; teamId: string | null; mode: ShareMode } | null> {
      const { rows } = await q.query<{ userId: string | null; teamId: string | null; mode: ShareMode }>(
        `update session_shares set revoked_at = now(), revoked_by = $4
          where tenant_id = $1 and session_id = $2 and id = $3 and revoked_at is null
          returning user_id as "userId", team_id as "teamId", mode`,
        [tenantId, sessionId, shareId, by],
      );
      return rows[0] ?? null;
    },

    /** Ends every share in force of the session (it was handed over); how many. */
    async revokeAll(q: Queryable, tenantId: string, sessionId: string, by: string): Promise<number> {
      const { rowCount } = await q.query(`update session_shares set revoked_at = now(), revoked_by = $3 where tenant_id = $1 and session_id = $2 and revoked_at is null`, [tenantId, sessionId, by]);
      return rowCount ?? 0;
    },

    /** The shares in force of a session, oldest first. */
    async ofSession(q: Queryable, tenantId: string, sessionId: string): Promise<ShareRow[]> {
      const { rows } = await q.query<ShareRow>(`select ${SHARE} from ${SHARE_FROM} where sh.tenant_id = $1 and sh.session_id = $2 and sh.revoked_at is null order by sh.created_at, sh.id`, [tenantId, sessionId]);
      return rows;
    },

    /**
     * How a person may read a session of somebody else: the share in force that reaches them (their own or
     * their team's; live before as-of-now, then the newest), on a live top-level session of the tenant.
     */
    async accessOf(q: Queryable, tenantId: string, sessionId: string, userId: string): Promise<ShareAccess | null> {
      const { rows } = await q.query<ShareAccess>(
        `select sh.id as "shareId", sh.mode, sh.created_at as "asOf", case when sh.user_id is null then 'team' else 'person' end as via
           from session_shares sh join agent_sessions s on s.id = sh.session_id and s.tenant_id = sh.tenant_id
          where ${REACHES} and sh.session_id = $3 and s.deleted_at is null and s.parent_id is null and s.owner_id <> $2
          order by (sh.mode = 'live') desc, sh.created_at desc limit 1`,
        [tenantId, userId, sessionId],
      );
      return rows[0] ?? null;
    },

    /** The transcript an as-of-now share keeps. */
    async transcriptOf(q: Queryable, tenantId: string, shareId: string): Promise<Array<{ info: Record<string, any>; parts: Array<Record<string, any>> }>> {
      const { rows } = await q.query<{ transcript: any }>(`select transcript from session_shares where tenant_id = $1 and id = $2`, [tenantId, shareId]);
      return (rows[0]?.transcript as never) ?? [];
    },

    /** The sessions shared with a person (theirs or their teams'), one row each with its best share, latest activity first. */
    async sharedWith(q: Queryable, tenantId: string, userId: string): Promise<Array<{ sessionId: string; title: string; updatedAt: Date; ownerId: string; ownerHandle: string; ownerEmail: string; ownerName: string; shareId: string; mode: ShareMode; sharedAt: Date; teamName: string | null }>> {
      const { rows } = await q.query<any>(
        `select distinct on (s.id) s.id as "sessionId", s.title, s.updated_at as "updatedAt", s.owner_id as "ownerId", o.handle as "ownerHandle", o.email as "ownerEmail", o.display_name as "ownerName",
                sh.id as "shareId", sh.mode, sh.created_at as "sharedAt", t.name as "teamName"
           from session_shares sh
           join agent_sessions s on s.id = sh.session_id and s.tenant_id = sh.tenant_id
           join users o on o.id = s.owner_id and o.tenant_id = s.tenant_id
           left join teams t on t.id = sh.team_id and t.tenant_id = sh.tenant_id
          where ${REACHES} and s.deleted_at is null and s.parent_id is null and s.owner_id <> $2
          order by s.id, (sh.mode = 'live') desc, sh.created_at desc
          limit 1000`,
        [tenantId, userId],
      );
      return rows.sort((a: { updatedAt: Date }, b: { updatedAt: Date }) => b.updatedAt.getTime() - a.updatedAt.getTime());
    },

    async insertHandover(q: Queryable, h: { tenantId: string; sessionId: string; fromUserId: string; toUserId: string; transcript: unknown; folder: string | null; files: unknown }): Promise<string> {
      const { rows } = await q.query<{ id: string }>(
        `insert into session_handovers (tenant_id, session_id, from_user_id, to_user_id, transcript, folder, files) values ($1, $2, $3, $4, $5, $6, $7) returning id`,
        [h.tenantId, h.sessionId, h.fromUserId, h.toUserId, JSON.stringify(h.transcript), h.folder, JSON.stringify(h.files)],
      );
      return rows[0].id;
    },

    /** The session's latest hand-over (its transcript is the whole conversation before it), or null. */
    async latestHandover(q: Queryable, tenantId: string, sessionId: string): Promise<HandoverRow | null> {
      const { rows } = await q.query<HandoverRow>(
        `select id, from_user_id as "fromUserId", to_user_id as "toUserId", transcript, folder, files, created_at as "createdAt"
           from session_handovers where tenant_id = $1 and session_id = $2 order by created_at desc, id desc limit 1`,
        [tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /**
     * Whether the session's first turn after its latest hand-over is still to come (no turn accepted since
     * then that was not withdrawn or given up): that turn carries the earlier conversation to the agent.
     */
    async contextPending(q: Queryable, tenantId: string, sessionId: string, since: Date): Promise<boolean> {
      const { rows } = await q.query(`select 1 from agent_turns where tenant_id = $1 and session_id = $2 and created_at > $3 and status <> 'failed' limit 1`, [tenantId, sessionId, since]);
      return rows.length === 0;
    },
  };
}

export type SessionSharesRepo = ReturnType<typeof createSessionSharesRepo>;
