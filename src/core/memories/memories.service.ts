import type { Database, Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission, requireUser } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { EmbeddersRepo } from '../embeddings/embedders.repo.js';
import type { MemoriesRepo, MemoryFilter, MemoryRow } from './memories.repo.js';
import { checkContent, checkKind, checkLimit, checkShareable, checkVisibility, need, publicMemory, viewerOf, type PublicMemory } from './memory-checks.js';
import { isWidening, MEMORY_QUERY_MAX, type MemoryWriteLimits } from './memory-fns.js';
import { createMemorySearch, type EmbedQuery, type SearchMode } from './memory-search.js';
import { createMemoryWrites } from './memory-writes.js';

export interface ListInput {
  q?: string;
  kind?: string;
  visibility?: string;
  limit?: number;
}

/**
 * Long-term memories (SPEC.md "Memory", "Memory endpoints"). Who sees what is decided in one SQL fragment
 * (memories.repo.ts `visibleTo`); this service decides who may change what:
 * - creating needs memory.write; creating it anything but private, memory.share;
 * - only the author changes a memory's visibility (memory.write), widening it needs memory.share;
 * - deleting needs authorship (with memory.write) or memory.delete, and the memory must be visible;
 * - a memory the caller cannot see is 404, whatever the reason (another tenant's, someone's private one).
 * Viewers (no memory.write) therefore only read. What a person's agent saves and recalls goes through
 * agent-memories.service.ts; its memories are changed and released here, by their author.
 */
export function createMemoriesService(deps: {
  db: Database;
  repo: MemoriesRepo;
  /** Whether the tenant has an embedder: then every new memory gets an embedding job. */
  embedders: Pick<EmbeddersRepo, 'exists'>;
  audit: AuditService;
  queue: JobQueue;
  /** Absent, or answering null: search is full-text only. */
  embedQuery?: EmbedQuery;
  /** Per-user write limits; absent: the defaults. */
  limits?: MemoryWriteLimits;
}) {
  const { db, repo, audit } = deps;
  const search = createMemorySearch(deps);
  const { checkWriteLimits, queueEmbedding } = createMemoryWrites(deps);

  /** Memories belong to people: the operator (CLI) acts on tenants, not as anyone, so it has none. */
  const userOf = (ctx: Ctx): UserActor => requireUser(ctx, 'memories');

  async function loadForChange(tx: Queryable, actor: UserActor, id: string): Promise<MemoryRow> {
    const m = isUuid(id) ? await repo.findVisible(tx, viewerOf(actor), id, { lock: true }) : null;
    if (!m) throw new NotFoundError('memory not found');
    return m;
  }

  return {
    /**
     * The caller's visible memories, newest first; with `q`, the best matches first (hybrid or full-text
     * search, `searchMode` says which). Filters: kind, visibility; limit 1-100 (default 20).
     */
    async list(ctx: Ctx, input: ListInput): Promise<{ memories: PublicMemory[]; searchMode?: SearchMode }> {
      const actor = userOf(ctx);
      const limit = checkLimit(input.limit);
      const filter: MemoryFilter = {
        kind: input.kind === undefined ? undefined : checkKind(input.kind),
        visibility: input.visibility === undefined ? undefined : checkVisibility(input.visibility),
      };
      const q = input.q?.trim() ?? '';
      if (q.length > MEMORY_QUERY_MAX) throw new ValidationError(`q must be at most ${MEMORY_QUERY_MAX} characters`, { details: { field: 'q' } });
      const v = viewerOf(actor);
      if (!q) return { memories: (await repo.list(db, v, { ...filter, limit })).map(publicMemory) };
      const { rows, mode } = await search(v, { ...filter, text: q, match: 'all', limit }, ctx.log);
      return { memories: rows.map(publicMemory), searchMode: mode };
    },

    /** One visible memory (404 otherwise). */
    async get(ctx: Ctx, id: string): Promise<PublicMemory> {
      const actor = userOf(ctx);
      const m = isUuid(id) ? await repo.findVisible(db, viewerOf(actor), id) : null;
      if (!m) throw new NotFoundError('memory not found');
      return publicMemory(m);
    },

    /**
     * Writes a memory (memory.write); private unless set, and set wider only with memory.share. The text
     * is stored normalised; a shared one that reads like instructions is refused (422 memory_flagged).
     * Limited per user: writes a minute (429) and memories kept (409).
     */
    async create(ctx: Ctx, input: { kind: string; content: string; visibility?: string }): Promise<PublicMemory> {
      const actor = userOf(ctx);
      need(actor, 'memory.write');
      const kind = checkKind(input.kind);
      const content = checkContent(input.content);
      const visibility = input.visibility === undefined ? 'private' : checkVisibility(input.visibility);
      if (visibility !== 'private') need(actor, 'memory.share', `sharing a memory (visibility ${visibility}) needs memory.share`);
      const signals = checkShareable(content, visibility);
      return db.transaction(async (tx) => {
        await checkWriteLimits(tx, actor, 'api');
        const m = await repo.insert(tx, { tenantId: actor.tenantId, userId: actor.userId, kind, content, visibility, status: 'active', source: 'api', signals });
        await audit.record(tx, ctx, { action: 'memory.create', target: `memory:${m.id}`, details: { kind, visibility, source: 'api', length: content.length, ...(signals.length ? { signals } : {}) } });
        await queueEmbedding(tx, m);
        return publicMemory(m);
      });
    },

    /**
     * Changes a memory's visibility, the only thing that changes (SPEC.md). Only its author may
     * (memory.write); widening needs memory.share and is audited as `memory.share`, narrowing as
     * `memory.unshare`. A quarantined memory stays private until released; a released one, or one of the
     * author's own, that reads like instructions is not widened to team or org (422 memory_flagged, as
     * when written so). Same visibility: no change.
     */
    async update(ctx: Ctx, id: string, input: { visibility: string }): Promise<PublicMemory> {
      const actor = userOf(ctx);
      need(actor, 'memory.write');
      const visibility = checkVisibility(input.visibility);
      return db.transaction(async (tx) => {
        const m = await loadForChange(tx, actor, id);
        if (m.userId !== actor.userId) throw new ForbiddenError("only a memory's author may change its visibility");
        if (m.visibility === visibility) return publicMemory(m);
        const widened = isWidening(m.visibility, visibility);
        if (widened) need(actor, 'memory.share', `widening a memory to ${visibility} needs memory.share`);
        if (widened && m.status === 'quarantined') {
          throw new ConflictError('this memory is quarantined: it waits for its author to release it', { hint: `Read it, then release it (POST /v1/memories/${m.id}/release) before sharing it.` });
        }
        if (widened) checkShareable(m.content, visibility);
        const updated = await repo.updateVisibility(tx, m.tenantId, m.id, visibility);
        if (!updated) throw new NotFoundError('memory not found');
        await audit.record(tx, ctx, { action: widened ? 'memory.share' : 'memory.unshare', target: `memory:${m.id}`, details: { from: m.visibility, to: visibility } });
        return publicMemory(updated);
      });
    },

    /** Deletes a visible memory: its author (with memory.write) or anyone holding memory.delete. */
    async remove(ctx: Ctx, id: string): Promise<void> {
      const actor = userOf(ctx);
      await db.transaction(async (tx) => {
        const m = await loadForChange(tx, actor, id);
        const own = m.userId === actor.userId && hasPermission(actor.permissions, 'memory.write');
        if (!own) need(actor, 'memory.delete', m.userId === actor.userId ? 'deleting memories needs memory.write or memory.delete' : "deleting someone else's memory needs memory.delete");
        if (!(await repo.remove(tx, m.tenantId, m.id))) throw new NotFoundError('memory not found');
        await audit.record(tx, ctx, { action: 'memory.delete', target: `memory:${m.id}`, details: { kind: m.kind, visibility: m.visibility, source: m.source, authorId: m.userId, asAuthor: own } });
      });
    },

    /**
     * Its author releases a quarantined memory (one the agent saved that reads like instructions, or any
     * the agent saved while the tenant holds them for release): from then on it is active and vouched for
     * by its author, so it is injected into their own turns; sharing it is screened as ever. Releasing an
     * active one changes nothing.
     */
    async release(ctx: Ctx, id: string): Promise<PublicMemory> {
      const actor = userOf(ctx);
      need(actor, 'memory.write');
      return db.transaction(async (tx) => {
        const m = await loadForChange(tx, actor, id);
        if (m.userId !== actor.userId) throw new ForbiddenError("only a memory's author may release it");
        if (m.status === 'active') return publicMemory(m);
        const released = await repo.release(tx, m.tenantId, m.id);
        if (!released) throw new NotFoundError('memory not found');
        await audit.record(tx, ctx, { action: 'memory.release', target: `memory:${m.id}`, sessionId: m.sessionId, details: { source: m.source } });
        return publicMemory(released);
      });
    },
  };
}

export type MemoriesService = ReturnType<typeof createMemoriesService>;
