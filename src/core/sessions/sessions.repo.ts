import type { Queryable } from '../../db/database.js';

export interface SessionRow {
  id: string;
  tenantId: string;
  ownerId: string;
  title: string;
  templateSlug: string | null;
  systemPrompt: string | null;
  model: string | null;
  /** The model the person chose for the session ("<provider>/<model id>"), over the template's `model`; null: none. */
  chosenModel: string | null;
  snapshotAt: Date | null;
  upstreamId: string | null;
  directory: string;
  channel: string;
  browserSession: string | null;
  /** A child session (a plan's planning turn or a subtask attempt): its parent, and its plan. */
  parentId: string | null;
  planId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const SESSION = `s.id, s.tenant_id as "tenantId", s.owner_id as "ownerId", s.title, s.template_slug as "templateSlug",
  s.system_prompt as "systemPrompt", s.model, s.chosen_model as "chosenModel", s.snapshot_at as "snapshotAt", s.upstream_id as "upstreamId", s.directory,
  s.channel, s.browser_session as "browserSession", s.parent_id as "parentId", s.plan_id as "planId", s.created_at as "createdAt", s.updated_at as "updatedAt"`;

/** Who may see a session: its owner, or (SPEC.md rule 1) a signed-in user of the browser that made it in demo mode. */
export interface Viewer {
  tenantId: string;
  userId: string;
  /** sha256 of the caller's browser-session id, if it sent one. */
  browserSession: string | null;
  /** The operator user whose demo-mode sessions that browser may still see; null when demo mode is off. */
  operatorId: string | null;
}

export function createSessionsRepo() {
  return {
    async insert(
      q: Queryable,
      s: Pick<SessionRow, 'tenantId' | 'ownerId' | 'title' | 'templateSlug' | 'systemPrompt' | 'model' | 'snapshotAt' | 'directory' | 'channel' | 'browserSession'> &
        Partial<Pick<SessionRow, 'parentId' | 'planId' | 'chosenModel' | 'upstreamId'>>,
    ): Promise<SessionRow> {
      const { rows } = await q.query<SessionRow>(
        `insert into agent_sessions as s (tenant_id, owner_id, title, template_slug, system_prompt, model, snapshot_at, directory, channel, browser_session, parent_id, plan_id, chosen_model, upstream_id)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) returning ${SESSION}`,
        [s.tenantId, s.ownerId, s.title, s.templateSlug, s.systemPrompt, s.model, s.snapshotAt, s.directory, s.channel, s.browserSession, s.parentId ?? null, s.planId ?? null, s.chosenModel ?? null, s.upstreamId ?? null],
      );
      return rows[0];
    },

    /** A live session the viewer may use; null for unknown, deleted, or somebody else's. */
    async findVisible(q: Queryable, id: string, v: Viewer): Promise<SessionRow | null> {
      const { rows } = await q.query<SessionRow>(
        `select ${SESSION} from agent_sessions s
          where s.id = $1 and s.tenant_id = $2 and s.deleted_at is null
            and (s.owner_id = $3 or ($4::text is not null and $5::uuid is not null and s.browser_session = $4 and s.owner_id = $5))`,
        [id, v.tenantId, v.userId, v.browserSession, v.operatorId],
      );
      return rows[0] ?? null;
    },

    /**
     * By the runtime's session id alone: the runtime's events name nothing else, so this lookup is how
     * the session stream learns which tenant an event belongs to (runtime ids are ours to bind, unique).
     */
    async byUpstreamId(q: Queryable, upstreamId: string): Promise<SessionRow | null> {
      const { rows } = await q.query<SessionRow>(`select ${SESSION} from agent_sessions s where s.upstream_id = $1`, [upstreamId]);
      return rows[0] ?? null;
    },

    async byId(q: Queryable, tenantId: string, id: string): Promise<SessionRow | null> {
      const { rows } = await q.query<SessionRow>(`select ${SESSION} from agent_sessions s where s.id = $1 and s.tenant_id = $2`, [id, tenantId]);
      return rows[0] ?? null;
    },

    /** Binds the runtime's session id once; returns whichever id won (another worker may have bound one). */
    async bindUpstream(q: Queryable, tenantId: string, id: string, upstreamId: string): Promise<string> {
      const { rows } = await q.query<{ upstreamId: string }>(
        `update agent_sessions set upstream_id = coalesce(upstream_id, $3) where id = $1 and tenant_id = $2 returning upstream_id as "upstreamId"`,
        [id, tenantId, upstreamId],
      );
      return rows[0].upstreamId;
    },

    /**
     * The runtime no longer knows the session's upstream one (it moved hosts without it): bind a new one,
     * once. With `beforeMessageId` (the prompt about to go to the new one), the move is recorded for the
     * transcript (session_moves: where the earlier turns went, and how many), in the same statement.
     */
    async rebindUpstream(q: Queryable, tenantId: string, id: string, from: string, to: string, o: { beforeMessageId?: string } = {}): Promise<string> {
      const { rows } = await q.query<{ upstreamId: string }>(
        `with moved as (
           update agent_sessions set upstream_id = $4 where id = $1 and tenant_id = $2 and upstream_id = $3 returning id
         ), noted as (
           insert into session_moves (tenant_id, session_id, previous_upstream_id, before_message_id, turns)
           select $2, moved.id, $3, $5,
             (select count(*)::int from agent_turns t where t.tenant_id = $2 and t.session_id = $1 and t.status in ('sent', 'done', 'lost')
                and coalesce(t.sent_at, t.created_at) > coalesce((select max(m.at) from session_moves m where m.tenant_id = $2 and m.session_id = $1), '-infinity'::timestamptz))
           from moved where $5::text is not null
         )
         select coalesce((select $4::text from moved), (select upstream_id from agent_sessions where id = $1 and tenant_id = $2)) as "upstreamId"`,
        [id, tenantId, from, to, o.beforeMessageId ?? null],
      );
      return rows[0].upstreamId;
    },

    /** Where the session's runtime session was started anew on another host (oldest first), for its transcript. */
    async movesOf(q: Queryable, tenantId: string, sessionId: string): Promise<Array<{ beforeMessageId: string; turns: number; at: Date }>> {
      const { rows } = await q.query<{ beforeMessageId: string; turns: number; at: Date }>(
        `select before_message_id as "beforeMessageId", turns, at from session_moves where tenant_id = $1 and session_id = $2 order by at limit 50`,
        [tenantId, sessionId],
      );
      return rows;
    },

    async snapshot(q: Queryable, tenantId: string, id: string, t: { systemPrompt: string; model: string | null }): Promise<void> {
      await q.query(`update agent_sessions set system_prompt = $3, model = $4, snapshot_at = now() where id = $1 and tenant_id = $2 and snapshot_at is null`, [id, tenantId, t.systemPrompt, t.model]);
    },

    /** Sets (or with null clears) the model the person chose for the session; false when the session is gone. */
    async setChosenModel(q: Queryable, tenantId: string, id: string, model: string | null): Promise<boolean> {
      const { rows } = await q.query(`update agent_sessions set chosen_model = $3 where id = $1 and tenant_id = $2 and deleted_at is null returning id`, [id, tenantId, model]);
      return rows.length > 0;
    },

    async touch(q: Queryable, tenantId: string, id: string): Promise<void> {
      await q.query(`update agent_sessions set updated_at = now() where id = $1 and tenant_id = $2`, [id, tenantId]);
    },

    /**
     * Marks a live session deleted. False when it was not live (deleted meanwhile): of several
     * concurrent deletes exactly one gets true, so only that one audits and announces it.
     */
    async softDelete(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rows } = await q.query(`update agent_sessions set deleted_at = now() where id = $1 and tenant_id = $2 and deleted_at is null returning id`, [id, tenantId]);
      return rows.length > 0;
    },

    /** Moves a session to another owner: their workspace, and no runtime session yet (their runtime makes one). */
    async claim(q: Queryable, tenantId: string, id: string, userId: string, directory: string): Promise<void> {
      await q.query(`update agent_sessions set owner_id = $3, directory = $4, upstream_id = null, browser_session = null, updated_at = now() where id = $1 and tenant_id = $2`, [id, tenantId, userId, directory]);
    },

    /**
     * Hands a live top-level session from one owner to another (session-shares.service.ts): their workspace,
     * and no runtime session yet (their runtime makes one). False when it is no longer `from`'s to hand.
     */
    async handOver(q: Queryable, tenantId: string, id: string, from: string, to: string, directory: string): Promise<boolean> {
      const { rows } = await q.query(
        `update agent_sessions set owner_id = $4, directory = $5, upstream_id = null, browser_session = null, updated_at = now()
          where id = $1 and tenant_id = $2 and owner_id = $3 and deleted_at is null and parent_id is null returning id`,
        [id, tenantId, from, to, directory],
      );
      return rows.length > 0;
    },

    /** Every session a person owns, deleted ones still held too, oldest first (their data export and erasure). */
    async ofOwner(q: Queryable, tenantId: string, userId: string): Promise<Array<SessionRow & { deletedAt: Date | null }>> {
      const { rows } = await q.query<SessionRow & { deletedAt: Date | null }>(
        `select ${SESSION}, s.deleted_at as "deletedAt" from agent_sessions s where s.tenant_id = $1 and s.owner_id = $2 order by s.created_at, s.id`,
        [tenantId, userId],
      );
      return rows;
    },


    /**
     * Sessions (top-level: a plan's child sessions go with their parent) whose last activity (their own
     * update, their last turn) is before `before`, with no turn in flight in them or their children,
     * least recently active first; deleted ones too (their rows and transcript are still held). Retention.
     */
    async inactiveSince(q: Queryable, tenantId: string, before: Date, limit: number): Promise<SessionRow[]> {
      const { rows } = await q.query<SessionRow>(
        `select ${SESSION} from agent_sessions s
          where s.tenant_id = $1 and s.parent_id is null and s.updated_at < $2
            and not exists (select 1 from agent_turns t join agent_sessions f on f.id = t.session_id
                             where t.tenant_id = $1 and (f.id = s.id or f.parent_id = s.id)
                               and (t.status in ('queued', 'sending', 'sent') or coalesce(t.sent_at, t.created_at) >= $2))
          order by s.updated_at, s.id limit $3`,
        [tenantId, before, limit],
      );
      return rows;
    },
    /** How many sessions inactiveSince would find, all of them (a dry run's count). */
    async countInactiveSince(q: Queryable, tenantId: string, before: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(
        `select count(*)::int as n from agent_sessions s
          where s.tenant_id = $1 and s.parent_id is null and s.updated_at < $2
            and not exists (select 1 from agent_turns t join agent_sessions f on f.id = t.session_id
                             where t.tenant_id = $1 and (f.id = s.id or f.parent_id = s.id)
                               and (t.status in ('queued', 'sending', 'sent') or coalesce(t.sent_at, t.created_at) >= $2))`,
        [tenantId, before],
      );
      return rows[0].n;
    },
    /** The session, deleted or not, with its children's runtime session ids (what a purge removes upstream). */
    async withChildren(q: Queryable, tenantId: string, id: string): Promise<{ session: SessionRow & { deletedAt: Date | null }; childUpstreamIds: string[] } | null> {
      const { rows } = await q.query<SessionRow & { deletedAt: Date | null }>(`select ${SESSION}, s.deleted_at as "deletedAt" from agent_sessions s where s.id = $1 and s.tenant_id = $2`, [id, tenantId]);
      if (!rows[0]) return null;
      const kids = await q.query<{ upstreamId: string }>(`select upstream_id as "upstreamId" from agent_sessions where tenant_id = $1 and parent_id = $2 and upstream_id is not null`, [tenantId, id]);
      return { session: rows[0], childUpstreamIds: kids.rows.map((r) => r.upstreamId) };
    },
    /** Whether a turn of the session or of its children is queued, being sent or running. */
    async turnInFlight(q: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rows } = await q.query(
        `select 1 from agent_turns t join agent_sessions f on f.id = t.session_id
          where t.tenant_id = $1 and (f.id = $2 or f.parent_id = $2) and t.status in ('queued', 'sending', 'sent') limit 1`,
        [tenantId, id],
      );
      return rows.length > 0;
    },
    /**
     * Removes the session's rows for good (its turns, permission requests, child sessions, trajectories and
     * plans go with it by their foreign keys), under a row lock and only while no turn is in flight. False
     * when it was gone already or a turn started meanwhile.
     */
    async purgeRows(tx: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rows: locked } = await tx.query(`select id from agent_sessions where id = $1 and tenant_id = $2 for update`, [id, tenantId]);
      if (!locked.length || (await this.turnInFlight(tx, tenantId, id))) return false;
      await tx.query(`delete from agent_sessions where tenant_id = $1 and parent_id = $2`, [tenantId, id]);
      const { rowCount } = await tx.query(`delete from agent_sessions where id = $1 and tenant_id = $2`, [id, tenantId]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type SessionsRepo = ReturnType<typeof createSessionsRepo>;
