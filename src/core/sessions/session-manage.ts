import type { Database } from '../../db/database.js';
import { requireTokenScope, requireUser } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { NotFoundError, ValidationError } from '../../kernel/errors.js';
import { isUuid } from '../../lib/ids.js';
import type { Logger } from '../../kernel/logger.js';
import type { AuditService } from '../audit/audit.service.js';
import type { JobKind } from '../jobs/jobs.service.js';
import type { JobsRepo } from '../jobs/jobs.repo.js';
import type { ChangeSet } from './session-changes.js';
import { exportFilename, exportJson, exportMarkdown, type ExportChanges } from './session-export.js';
import {
  decodeCursor,
  encodeCursor,
  indexRows,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  parseLimit,
  SEARCH_LIMIT_DEFAULT,
  SEARCH_LIMIT_MAX,
  snippetOf,
  type ListState,
} from './session-manage-fns.js';
import type { ListedSession, SessionManageRepo } from './session-manage.repo.js';
import type { SessionRow, SessionsRepo, Viewer } from './sessions.repo.js';

/**
 * Sessions people can manage, search and export, on top of the sessions
 * capability: the list with filters and paging; rename, pin, archive and restore; full-text search over
 * a person's own sessions (titles, and the text of prompts and answers: never tool input or output);
 * the session as Markdown or JSON. Only the owner acts on a session (sessions.service owned: 404 for
 * anyone else); search reads ownership from agent_sessions at query time, so it can never return
 * another person's or another tenant's text, whatever the index holds.
 *
 * The index is kept current as turns end (turnEnded: the transcript as the person reads it, written in
 * one transaction) and filled for sessions that had turns before it existed by the `index-sessions` job
 * (POST /v1/jobs), which reports its progress on the job. A deleted session's text leaves the index in
 * the deletion's transaction.
 *
 * What the agent reaches through this: nothing new. It can write any text into its own answers (and so
 * into its owner's index and exports), which is shown back to that owner only; snippets come back as text
 * with highlight ranges, never markup, and Markdown fences are sized so its text cannot break out.
 */

/** The job that indexes sessions whose transcripts were never indexed (the backfill). */
export const INDEX_SESSIONS_JOB = 'index-sessions';
/** Sessions read per batch of the backfill (each asks its owner's runtime for the transcript). */
const BACKFILL_BATCH = 20;

export interface BackfillData {
  tenantId: string;
  jobId: string;
}
/** tenant_jobs.result of the backfill, updated after every batch. */
interface BackfillResult {
  total: number;
  indexed: number;
  failed: number;
  remaining: number;
  /** The last session id the job went past (it resumes after it on a retry). */
  after: string | null;
}

type Transcript = Array<{ info: Record<string, any>; parts: Array<Record<string, any>> }>;

export function createSessionManage(deps: {
  db: Database;
  repo: SessionManageRepo;
  sessionsRepo: Pick<SessionsRepo, 'byId'>;
  jobsRepo: JobsRepo;
  audit: AuditService;
  /** The session the caller may act on, else 404 (sessions.service owned). */
  owned: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<SessionRow>;
  /** Who the caller is for the list (sessions.service viewer: their own, and their browser's demo sessions). */
  viewer: (ctx: Ctx, browserSession: string | undefined) => Promise<Viewer>;
  /** The transcript as the person reads it (sessions.service transcriptOf); starts the owner's runtime if need be. */
  transcriptOf: (s: SessionRow) => Promise<Transcript>;
  /** The same when the owner's runtime runs, null when it does not (never starts one). */
  runningTranscriptOf: (s: SessionRow) => Promise<Transcript | null>;
  /** What the session's turns changed (session-changes.ts list), for the export. */
  changesOf: (ctx: Ctx, id: string, browserSession: string | undefined) => Promise<ChangeSet>;
  clock: { now(): Date };
  log: Logger;
}) {
  const { db, repo, audit } = deps;

  const item = (s: ListedSession) => ({
    sessionId: s.id,
    title: s.title,
    updatedAt: s.updatedAt,
    createdAt: s.createdAt,
    templateSlug: s.templateSlug,
    pinned: s.pinnedAt !== null,
    archived: s.archivedAt !== null,
    pinnedAt: s.pinnedAt,
    archivedAt: s.archivedAt,
    ...(s.claimable ? { claimable: true } : {}),
    origin: s.originUrl ? { url: s.originUrl, label: s.originLabel ?? s.originUrl } : null,
  });

  /**
   * Writes a session's transcript into the index: the messages it does not hold yet, those past how far
   * it was read (a lost turn's answer may have grown), and drops what the transcript no longer has (turns
   * undone, or left on a lost host). A redo brings undone turns back: not held, they are written again.
   */
  async function indexMessages(session: { id: string; tenantId: string }, messages: Transcript): Promise<number> {
    const state = await repo.indexState(db, session.tenantId, session.id);
    if (!state) return 0; // deleted meanwhile, or a plan's child session (not listed, not searched)
    // Up to the first answer still being written: what comes after is indexed when its turn ends.
    const open = messages.findIndex((m) => m.info.role === 'assistant' && !m.info.time?.completed && !m.info.error);
    const done = open < 0 ? messages : messages.slice(0, open);
    const held = new Set(state.held);
    const rows = indexRows(done).filter((r) => !held.has(r.messageId) || state.through === null || r.messageId > state.through);
    const last = done.at(-1)?.info.id;
    const keep = messages.map((m) => String(m.info.id));
    await repo.index(db, session.tenantId, session.id, rows, keep, typeof last === 'string' ? last : state.through);
    return rows.length;
  }

  const service = {
    /**
     * The caller's sessions (SPEC.md sessions rule 1), pinned first then most recently updated, filtered
     * (state: active by default, archived or all; pinned; template) and paged: `nextCursor` asks for
     * the next page, null on the last.
     */
    async list(ctx: Ctx, input: { browserSession?: string; state?: ListState; pinned?: boolean; template?: string; limit?: number; cursor?: string }) {
      const limit = parseLimit(input.limit, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX);
      const cursor = input.cursor ? decodeCursor(input.cursor) : undefined;
      const v = await deps.viewer(ctx, input.browserSession);
      const rows = await repo.list(db, v, { state: input.state ?? 'active', pinned: input.pinned, template: input.template, cursor, limit });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        sessions: page.map(item),
        nextCursor: rows.length > limit && last ? encodeCursor({ pinned: last.pinnedAt !== null, updatedAt: last.cursorAt, id: last.id }) : null,
      };
    },

    /** Renames, pins or unpins, archives or restores a session of the caller's (each when given); audited with what changed. */
    async update(ctx: Ctx, input: { id: string; browserSession?: string; title?: string; pinned?: boolean; archived?: boolean }) {
      requireTokenScope(ctx, 'sessions');
      const actor = requireUser(ctx, 'sessions');
      const title = input.title === undefined ? undefined : input.title.trim();
      if (title !== undefined && !title) throw new ValidationError('title: must not be empty', { details: { field: 'title' } });
      if (title === undefined && input.pinned === undefined && input.archived === undefined) {
        throw new ValidationError('body: give at least one of title, pinned, archived', { details: { field: 'body' } });
      }
      const s = await deps.owned(ctx, input.id, input.browserSession);
      const changed = await db.transaction(async (tx) => {
        const after = await repo.update(tx, s.tenantId, s.id, { title, pinned: input.pinned, archived: input.archived });
        if (!after) return null;
        const details: Record<string, unknown> = {};
        if (title !== undefined && title !== s.title) details.title = { from: s.title, to: title };
        if (input.pinned !== undefined) details.pinned = input.pinned;
        if (input.archived !== undefined) details.archived = input.archived;
        await audit.record(tx, ctx, { action: 'session.update', target: `session:${s.id}`, sessionId: s.id, details });
        return after;
      });
      if (!changed) throw new NotFoundError('session not found');
      const listed = await repo.listed(db, s.tenantId, s.id, actor.userId);
      if (!listed) throw new NotFoundError('session not found');
      return item(listed);
    },

    /**
     * Full-text search over the caller's own sessions (not another person's, whatever a browser id says):
     * the best match in each, best first, with a snippet of it (plain text and the ranges of the matched
     * words) and the message it is in (null: the title). PostgreSQL's English text search
     * (websearch_to_tsquery: words, "a phrase", -not, or), the same on the embedded database.
     */
    async search(ctx: Ctx, input: { q: string; limit?: number }) {
      requireTokenScope(ctx, 'sessions');
      const actor = requireUser(ctx, 'sessions');
      const q = input.q.trim();
      if (!q) throw new ValidationError('q: must not be empty', { details: { field: 'q' } });
      const limit = parseLimit(input.limit, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX);
      const hits = await repo.search(db, actor.tenantId, actor.userId, q, limit);
      return {
        results: hits.map((h) => ({
          sessionId: h.sessionId,
          title: h.title,
          updatedAt: h.updatedAt,
          pinned: h.pinnedAt !== null,
          archived: h.archivedAt !== null,
          messageId: h.messageId,
          role: h.role,
          rank: Math.round(h.rank * 1e4) / 1e4,
          ...snippetOf(h.headline),
        })),
      };
    },

    /**
     * The session as a document: Markdown (for people) or JSON (messages with their tool calls, and the
     * workspace changes of its turns). Owner only; audited (it takes the whole conversation out).
     */
    async export(ctx: Ctx, input: { id: string; format: 'markdown' | 'json'; browserSession?: string }): Promise<{ filename: string; contentType: string; body: string }> {
      requireTokenScope(ctx, 'sessions');
      const s = await deps.owned(ctx, input.id, input.browserSession);
      const messages = await deps.transcriptOf(s);
      let changes: ExportChanges | null = null;
      let note: string | undefined;
      try {
        const c = await deps.changesOf(ctx, s.id, input.browserSession);
        changes = { files: c.files, totals: c.totals, turns: c.turns, recorded: c.recorded, snapshots: c.snapshots };
      } catch (err) {
        // The transcript is the export; the changes are its appendix, and say when they could not be read.
        note = `The workspace changes could not be read: ${(err as Error).message}`;
        ctx.log.warn({ sessionId: s.id, err: (err as Error).message }, 'export: changes not read');
      }
      const now = deps.clock.now();
      const listed = await repo.listed(db, s.tenantId, s.id, s.ownerId);
      const meta = { sessionId: s.id, title: listed?.title ?? s.title, templateSlug: s.templateSlug, createdAt: s.createdAt, updatedAt: listed?.updatedAt ?? s.updatedAt };
      await db.transaction((tx) => audit.record(tx, ctx, { action: 'session.export', target: `session:${s.id}`, sessionId: s.id, details: { format: input.format, messages: messages.length } }));
      if (input.format === 'json') {
        return { filename: exportFilename(meta.title, now, 'json'), contentType: 'application/json; charset=utf-8', body: JSON.stringify(exportJson(meta, messages, changes, now, note), null, 2) };
      }
      return { filename: exportFilename(meta.title, now, 'md'), contentType: 'text/markdown; charset=utf-8', body: exportMarkdown(meta, messages, changes, now, note) };
    },

    /**
     * A turn of a session ended (or failed): its transcript's new messages go into the index. Background
     * work of the process that saw the end; idempotent (every serve that follows the runtime may call it).
     */
    async turnEnded(session: { id: string; tenantId: string }): Promise<void> {
      const s = await deps.sessionsRepo.byId(db, session.tenantId, session.id);
      if (!s?.upstreamId || s.parentId) return;
      // Read only from a runtime that runs: a turn that failed because its owner was deactivated, or whose
      // runtime went away, must not start one. What is not read now is read at the session's next turn's end
      // (or by the index-sessions job when the session was never indexed).
      const messages = await deps.runningTranscriptOf(s);
      if (messages) await indexMessages(s, messages);
    },

    /** The index write of a turn's end, its transcript in hand (turnEnded after it read it; the benchmark). */
    indexMessages,

    /** A session being deleted leaves the index (in the deletion's transaction). */
    dropIndex: repo.dropIndex,

    /**
     * The `index-sessions` job: indexes the tenant's live sessions whose transcript never was (they had
     * turns before the index existed, or their indexing at a turn's end failed), in batches, its progress
     * on the job after each. A session whose transcript cannot be read now (its owner's runtime cannot
     * start) is counted failed and stays unindexed for a later run; the job goes on.
     */
    async backfill(ctx: Ctx, data: BackfillData): Promise<void> {
      if (!isUuid(data?.tenantId) || !isUuid(data?.jobId)) throw new ValidationError('index-sessions: tenantId and jobId must be UUIDs');
      const { tenantId, jobId } = data;
      const job = await deps.jobsRepo.start(db, tenantId, jobId);
      if (!job) return;
      const prev = job.result as unknown as BackfillResult | null;
      let progress: BackfillResult = prev?.total !== undefined ? prev : { total: await repo.countUnindexed(db, tenantId), indexed: 0, failed: 0, remaining: 0, after: null };
      progress.remaining = Math.max(0, progress.total - progress.indexed - progress.failed);
      await deps.jobsRepo.progress(db, tenantId, jobId, progress);
      try {
        for (;;) {
          const ids = await repo.unindexed(db, tenantId, progress.after, BACKFILL_BATCH);
          if (!ids.length) break;
          let { indexed, failed } = progress;
          for (const id of ids) {
            const s = await deps.sessionsRepo.byId(db, tenantId, id);
            if (!s) continue;
            try {
              await indexMessages(s, await deps.transcriptOf(s));
              indexed++;
            } catch (err) {
              failed++;
              ctx.log.warn({ tenantId, sessionId: id, err: (err as Error).message }, 'index-sessions: a transcript could not be read; left for a later run');
            }
          }
          progress = { total: Math.max(progress.total, indexed + failed), indexed, failed, remaining: Math.max(0, progress.total - indexed - failed), after: ids.at(-1)! };
          await deps.jobsRepo.progress(db, tenantId, jobId, progress);
        }
        await deps.jobsRepo.finish(db, tenantId, jobId, { status: 'completed', result: { ...progress, remaining: await repo.countUnindexed(db, tenantId) }, error: null });
        deps.log.info({ tenantId, jobId, indexed: progress.indexed, failed: progress.failed }, 'index-sessions finished');
      } catch (err) {
        // A failure of the database itself: said on the job (start it again to resume), not retried blindly.
        ctx.log.error({ tenantId, jobId, err: (err as Error).message }, 'index-sessions failed');
        await deps.jobsRepo.finish(db, tenantId, jobId, { status: 'failed', result: progress, error: `${(err as Error).message}; start it again to resume` }).catch(() => {});
      }
    },
  };
  return service;
}

/** The `index-sessions` kind of the jobs API (POST /v1/jobs): no payload; one at a time per tenant. */
export function indexSessionsKind(): JobKind {
  return {
    queue: INDEX_SESSIONS_JOB,
    exclusive: true,
    parse(payload) {
      const extra = Object.keys(payload);
      if (extra.length) throw new ValidationError(`payload.${extra[0]}: unknown field (index-sessions takes no payload)`, { details: { field: `payload.${extra[0]}` } });
      return {};
    },
    send: { retryLimit: 2, heartbeatSeconds: 30, expireInSeconds: 6 * 3600 },
  };
}
