import type { Queryable } from '../../db/database.js';
import { HEADLINE_OPTIONS, type IndexRow, type ListCursor, type ListState } from './session-manage-fns.js';
import type { Viewer } from './sessions.repo.js';

/**
 * The SQL of managing and searching sessions: the list's filters and paging, rename, pin and
 * archive (agent_sessions' columns of migration 0035), and the search index (session_search_entries).
 * Kept apart from sessions.repo.ts, which owns the rest of agent_sessions. Every query names the tenant.
 */

export interface ListedSession {
  id: string;
  title: string;
  templateSlug: string | null;
  createdAt: Date;
  updatedAt: Date;
  pinnedAt: Date | null;
  archivedAt: Date | null;
  /** A demo-mode session of the viewer's browser, not theirs yet (sessions.service claim). */
  claimable: boolean;
  /** updated_at as text, exact to the microsecond: the paging key. */
  cursorAt: string;
  /** A code host's issue or pull request this session was started from (set by codehost-runs). */
  originUrl: string | null;
  originLabel: string | null;
}

export interface ListFilter {
  state: ListState;
  pinned?: boolean;
  template?: string;
  cursor?: ListCursor;
  limit: number;
}

export interface SearchHit {
  sessionId: string;
  title: string;
  updatedAt: Date;
  pinnedAt: Date | null;
  archivedAt: Date | null;
  /** The message the snippet is from; null: the title matched best. */
  messageId: string | null;
  role: 'title' | 'user' | 'assistant';
  rank: number;
  /** ts_headline of the matching text, marks around the matched words (session-manage-fns.ts snippetOf). */
  headline: string;
}

/** The search's text as a query (parameter $3). */
const Q = `websearch_to_tsquery('english', $3)`;
/** Matching messages ranked at most per search (the most recent ones). */
const RANK_CANDIDATES = 2000;

const LISTED = `s.id, s.title, s.template_slug as "templateSlug", s.created_at as "createdAt", s.updated_at as "updatedAt",
  s.pinned_at as "pinnedAt", s.archived_at as "archivedAt", s.updated_at::text as "cursorAt", s.origin_url as "originUrl", s.origin_label as "originLabel"`;

/** Query text with numbered parameters, built up one condition at a time. */
function params() {
  const values: unknown[] = [];
  return { values, p: (v: unknown) => `$${values.push(v)}` };
}

export function createSessionManageRepo() {
  return {
    /**
     * A page of the viewer's top-level sessions (SPEC.md sessions rule 1: their own, plus demo-mode ones of
     * their browser until claimed), pinned first, then most recently updated, after `cursor`. One more
     * than `limit` is read, so the caller knows whether another page follows.
     */
    async list(q: Queryable, v: Viewer, f: ListFilter): Promise<ListedSession[]> {
      const { values, p } = params();
      const where = [`s.tenant_id = ${p(v.tenantId)}`, 's.deleted_at is null', 's.parent_id is null'];
      const me = p(v.userId);
      // The plain owner condition when no demo-mode browser widens it: the list's index serves it in order.
      where.push(v.browserSession && v.operatorId ? `(s.owner_id = ${me} or (s.browser_session = ${p(v.browserSession)} and s.owner_id = ${p(v.operatorId)}))` : `s.owner_id = ${me}`);
      if (f.state === 'active') where.push('s.archived_at is null');
      else if (f.state === 'archived') where.push('s.archived_at is not null');
      if (f.pinned !== undefined) where.push(f.pinned ? 's.pinned_at is not null' : 's.pinned_at is null');
      if (f.template !== undefined) where.push(`s.template_slug = ${p(f.template)}`);
      if (f.cursor) where.push(`((s.pinned_at is not null), s.updated_at, s.id) < (${p(f.cursor.pinned)}::boolean, ${p(f.cursor.updatedAt)}::timestamptz, ${p(f.cursor.id)}::uuid)`);
      const { rows } = await q.query<ListedSession>(
        `select ${LISTED}, s.owner_id <> ${me} as claimable from agent_sessions s
          where ${where.join(' and ')}
          order by (s.pinned_at is not null) desc, s.updated_at desc, s.id desc
          limit ${p(f.limit + 1)}`,
        values,
      );
      return rows;
    },

    /** One session as the list shows it (the viewer's own or their browser's: the caller checked). */
    async listed(q: Queryable, tenantId: string, id: string, viewerId: string): Promise<ListedSession | null> {
      const { rows } = await q.query<ListedSession>(`select ${LISTED}, s.owner_id <> $3 as claimable from agent_sessions s where s.id = $1 and s.tenant_id = $2 and s.deleted_at is null`, [id, tenantId, viewerId]);
      return rows[0] ?? null;
    },

    /**
     * Renames, pins or archives a live session (each only when given); pinning or archiving what already
     * is keeps its moment. Never touches updated_at (the last activity). Null when it is not live.
     */
    async update(q: Queryable, tenantId: string, id: string, u: { title?: string; pinned?: boolean; archived?: boolean }): Promise<{ title: string; pinnedAt: Date | null; archivedAt: Date | null } | null> {
      const { rows } = await q.query<{ title: string; pinnedAt: Date | null; archivedAt: Date | null }>(
        `update agent_sessions set
            title = coalesce($3, title),
            pinned_at = case when $4::boolean is null then pinned_at when $4 then coalesce(pinned_at, now()) else null end,
            archived_at = case when $5::boolean is null then archived_at when $5 then coalesce(archived_at, now()) else null end
          where id = $1 and tenant_id = $2 and deleted_at is null
          returning title, pinned_at as "pinnedAt", archived_at as "archivedAt"`,
        [id, tenantId, u.title ?? null, u.pinned ?? null, u.archived ?? null],
      );
      return rows[0] ?? null;
    },

    /**
     * The best match in each of the person's own live top-level sessions (a claim or hand-over moves a
     * session, and so its text, to its new owner: ownership is read here, not stored with the text),
     * titles and messages, best first. The snippet is made for the page's hits only.
     */
    async search(q: Queryable, tenantId: string, ownerId: string, text: string, limit: number): Promise<SearchHit[]> {
      const { rows } = await q.query<SearchHit & { rank: string | number }>(
        // The query is written out where it is used, not taken from a CTE: a constant to the planner, whose
        // statistics of the index's words then tell a common word (walk the person's recent entries) from a
        // rare one (the text index). Candidates are taken by the index's copy of the owner (fast); the page
        // is checked against the session itself (its owner now, not deleted, top-level): a session that
        // changed hands since its text was indexed drops out there, so twice the page is read before it.
        `with hits as (
           -- Ranking reads every candidate's vector: a word in most of a person's messages would rank them
           -- all. The most recent RANK_CANDIDATES matching messages are ranked (a very common word finds
           -- recent work first); a word in fewer messages than that, every one.
           select c.session_id, c.message_id, c.role, ts_rank_cd(c.tsv, ${Q}) as rank
             from (select e.session_id, e.message_id, e.role, e.tsv from session_search_entries e
                    where e.tenant_id = $1 and e.owner_id = $2 and e.tsv @@ ${Q}
                    order by e.created_at desc limit ${RANK_CANDIDATES}) c
           union all
           -- A title says what the whole session is about: its match counts double.
           select s.id, null, 'title', 2 * ts_rank_cd(to_tsvector('english', s.title), ${Q})
             from agent_sessions s
            where s.tenant_id = $1 and s.owner_id = $2 and s.deleted_at is null and s.parent_id is null and to_tsvector('english', s.title) @@ ${Q}
         ),
         best as (
           select distinct on (session_id) session_id, message_id, role, rank from hits order by session_id, rank desc, message_id nulls first
         ),
         page as (select * from best order by rank desc, session_id limit $4 * 2)
         select page.session_id as "sessionId", s.title, s.updated_at as "updatedAt", s.pinned_at as "pinnedAt", s.archived_at as "archivedAt",
                page.message_id as "messageId", page.role, page.rank,
                ts_headline('english', coalesce(e.body, s.title), ${Q}, '${HEADLINE_OPTIONS}') as headline
           from page
           join agent_sessions s on s.id = page.session_id and s.tenant_id = $1 and s.owner_id = $2 and s.deleted_at is null and s.parent_id is null
           left join session_search_entries e on e.session_id = page.session_id and e.message_id = page.message_id
          order by page.rank desc, page.session_id
          limit $4`,
        [tenantId, ownerId, text, limit],
      );
      return rows.map((r) => ({ ...r, rank: Number(r.rank) }));
    },

    /**
     * Writes a session's transcript into the index: `rows` (new or changed messages) upserted, messages
     * no longer in the transcript (`keep`: every message id it still has) removed, and how far it was read
     * noted. One statement per step, the caller's transaction around them.
     */
    async index(q: Queryable, tenantId: string, sessionId: string, rows: IndexRow[], keep: string[], through: string | null): Promise<void> {
      // One statement (atomic, one round trip): the delete does not see the rows inserted beside it,
      // which `keep` names anyway.
      await q.query(
        `with owner as (select owner_id from agent_sessions where id = $2 and tenant_id = $1),
         written as (
           insert into session_search_entries as e (tenant_id, session_id, owner_id, message_id, role, body)
           select $1, $2, owner.owner_id, x.message_id, x.role, x.body from owner, jsonb_to_recordset($3::jsonb) as x(message_id text, role text, body text)
           on conflict (session_id, message_id) do update set body = excluded.body, role = excluded.role, owner_id = excluded.owner_id
             where e.body is distinct from excluded.body or e.owner_id <> excluded.owner_id
           returning 1
         ), dropped as (
           delete from session_search_entries where tenant_id = $1 and session_id = $2 and not (message_id = any($4::text[])) returning 1
         ), moved as (
           -- The session changed hands since (claimed, handed over): the copy of its owner follows.
           update session_search_entries e set owner_id = owner.owner_id from owner
            where e.tenant_id = $1 and e.session_id = $2 and e.owner_id <> owner.owner_id and e.message_id = any($4::text[]) and not (e.message_id = any($6::text[]))
           returning 1
         )
         update agent_sessions set search_through = coalesce($5, search_through) where id = $2 and tenant_id = $1`,
        [tenantId, sessionId, JSON.stringify(rows.map((r) => ({ message_id: r.messageId, role: r.role, body: r.body }))), keep, through, rows.map((r) => r.messageId)],
      );
    },

    /** How far the session's transcript is indexed (null: never) and the messages held, if it is a live top-level session. */
    async indexState(q: Queryable, tenantId: string, sessionId: string): Promise<{ through: string | null; held: string[] } | null> {
      const { rows } = await q.query<{ through: string | null; held: string[] }>(
        `select s.search_through as through, array(select e.message_id from session_search_entries e where e.session_id = s.id and e.tenant_id = s.tenant_id) as held
           from agent_sessions s where s.id = $1 and s.tenant_id = $2 and s.deleted_at is null and s.parent_id is null`,
        [sessionId, tenantId],
      );
      return rows[0] ?? null;
    },

    /** A deleted session's text leaves the index (in the deletion's transaction). */
    async dropIndex(q: Queryable, tenantId: string, sessionId: string): Promise<void> {
      await q.query(`delete from session_search_entries where tenant_id = $1 and session_id = $2`, [tenantId, sessionId]);
    },

    /** Live top-level sessions with a transcript never indexed, by id after `after`: the backfill's next batch. */
    async unindexed(q: Queryable, tenantId: string, after: string | null, limit: number): Promise<string[]> {
      const { rows } = await q.query<{ id: string }>(
        `select id from agent_sessions
          where tenant_id = $1 and deleted_at is null and parent_id is null and upstream_id is not null and search_through is null
            and ($2::uuid is null or id > $2::uuid)
          order by id limit $3`,
        [tenantId, after, limit],
      );
      return rows.map((r) => r.id);
    },

    async countUnindexed(q: Queryable, tenantId: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(
        `select count(*)::int as n from agent_sessions where tenant_id = $1 and deleted_at is null and parent_id is null and upstream_id is not null and search_through is null`,
        [tenantId],
      );
      return rows[0].n;
    },
  };
}

export type SessionManageRepo = ReturnType<typeof createSessionManageRepo>;
