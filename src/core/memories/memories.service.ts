import type { Database, Queryable, Tx } from '../../db/database.js';
import { isCleanString } from '../../lib/clean-string.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import { hasPermission, requireUser, type PermissionName } from '../../kernel/authz.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { EMBED_MEMORY_JOB } from './memory-indexer.js';
import { vectorLiteral } from '../embeddings/model-key.js';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitedError, UnprocessableError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { EmbeddersRepo } from '../embeddings/embedders.repo.js';
import type { MemoriesRepo, MemoryFilter, MemoryRow, Viewer } from './memories.repo.js';
import {
  candidateCount,
  fitToBudget,
  instructionSignals,
  isMemoryKind,
  isMemoryVisibility,
  isWidening,
  MEMORY_CONTENT_MAX,
  MEMORY_KINDS,
  MEMORY_LIMIT_DEFAULT,
  MEMORY_LIMIT_MAX,
  MEMORY_QUERY_MAX,
  MEMORY_VISIBILITIES,
  normaliseMemoryText,
  recallBlockers,
  screenMemoryText,
  writeRefusal,
  type MemoryKind,
  type MemoryVisibility,
  type MemoryWriteLimits,
} from './memory-fns.js';

// The job that embeds one new memory, queued in the transaction that creates it when the tenant has an
// embedder (data `{ tenantId, memoryId }`); its handler is the memories' indexer (memory-indexer.ts).
export { EMBED_MEMORY_JOB };

/**
 * The port to the tenant's embedder: the embedding of a search text and the key of the model that made
 * it (`<provider id>/<model>/<dimensions>`), or null when the tenant has no embedder (or the person the
 * call is charged to, `userId`, has spent their monthly limit). Only memories embedded with that same
 * key take part in the vector arm of a search.
 */
export type EmbedQuery = (tenantId: string, text: string, userId: string) => Promise<{ modelKey: string; vector: number[] } | null>;

/** Which search answered: `hybrid` (full-text fused with vectors), `fulltext` (no embedder, or it failed). */
export type SearchMode = 'hybrid' | 'fulltext' | 'vector';

/** The user a runtime acts for (the agent's memories are that user's). */
export interface MemoryOwner {
  tenantId: string;
  userId: string;
}

/** SPEC.md's Memory ({id, kind, content, visibility, createdAt}) with what a client needs besides. */
function publicMemory(m: MemoryRow) {
  return {
    id: m.id,
    kind: m.kind,
    content: m.content,
    visibility: m.visibility,
    status: m.status,
    source: m.source,
    author: { id: m.userId, handle: m.authorHandle },
    signals: m.signals ?? [],
    embedded: m.embedded,
    ...(m.source === 'agent' ? { sessionId: m.sessionId, messageId: m.messageId } : {}),
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}
export type PublicMemory = ReturnType<typeof publicMemory>;

/** A memory chosen for a turn: only what the model needs, possibly cut to the token budget. */
export interface RecalledMemory {
  id: string;
  kind: MemoryKind;
  content: string;
  visibility: MemoryVisibility;
  createdAt: Date;
  truncated: boolean;
  /** The handle of the other person who shared it; absent: the user's own (written by them or their agent). */
  sharedBy?: string;
}

/** What the agent's search tool answers: the memory, and who wrote it when it is not the user's own. */
export type AgentMemory = PublicMemory & { sharedBy?: string };

/** Defaults of AGENTWS_MEMORY_WRITES_PER_MINUTE and AGENTWS_MEMORY_QUOTA (see config.schema.ts). */
const MEMORY_WRITE_LIMITS_DEFAULT: MemoryWriteLimits = { writesPerMinute: 30, quota: 2000 };

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
 * Viewers (no memory.write) therefore only read. Memories saved by the agent are private, carry their
 * provenance, and are quarantined when they read like instructions to a model (memory-fns.ts).
 */
export function createMemoriesService(deps: {
  db: Database;
  repo: MemoriesRepo;
  /** Whether the tenant has an embedder: then every new memory gets an embedding job. */
  embedders: Pick<EmbeddersRepo, 'exists'>;
  audit: AuditService;
  queue: JobQueue;
  log: Logger;
  /** The user's current permissions, for calls made by their agent (no token in hand). */
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Absent, or answering null: search is full-text only. */
  embedQuery?: EmbedQuery;
  /** Per-user write limits; absent: the defaults. */
  limits?: MemoryWriteLimits;
}) {
  const { db, repo, audit } = deps;
  const limits = deps.limits ?? MEMORY_WRITE_LIMITS_DEFAULT;

  /** Memories belong to people: the operator (CLI) acts on tenants, not as anyone, so it has none. */
  const userOf = (ctx: Ctx): UserActor => requireUser(ctx, 'memories');

  const viewerOf = (actor: { tenantId: string; userId: string; permissions: RbacPermissions }): Viewer => ({
    tenantId: actor.tenantId,
    userId: actor.userId,
    readOwn: actor.permissions.memory.read_own,
    readTeam: actor.permissions.memory.read_team,
    readOrg: actor.permissions.memory.read_org,
  });

  function need(actor: UserActor, permission: PermissionName, what?: string): void {
    if (!hasPermission(actor.permissions, permission)) throw new ForbiddenError(what ?? `missing permission ${permission}`, { details: { permission } });
  }

  const checkKind = (kind: unknown): MemoryKind => {
    if (!isMemoryKind(kind)) throw new ValidationError(`kind must be one of ${MEMORY_KINDS.join(', ')}`, { details: { field: 'kind' } });
    return kind;
  };
  const checkVisibility = (visibility: unknown): MemoryVisibility => {
    if (!isMemoryVisibility(visibility)) throw new ValidationError(`visibility must be one of ${MEMORY_VISIBILITIES.join(', ')}`, { details: { field: 'visibility' } });
    return visibility;
  };
  /** The text as it is stored, screened and injected: normalised (memory-fns.ts normaliseMemoryText). */
  const checkContent = (content: unknown): string => {
    if (typeof content !== 'string' || !content.trim()) throw new ValidationError('content must not be empty', { details: { field: 'content' } });
    if (content.length > MEMORY_CONTENT_MAX) throw new ValidationError(`content must be at most ${MEMORY_CONTENT_MAX} characters`, { details: { field: 'content' } });
    if (!isCleanString(content)) throw new ValidationError('content must be valid Unicode without NUL characters', { details: { field: 'content' } });
    const text = normaliseMemoryText(content);
    if (!text) throw new ValidationError('content must not be empty: nothing visible is left once invisible and control characters are removed', { details: { field: 'content' } });
    // NFKC expands some characters (U+FDFA is 18 letters): the limit holds for what is stored.
    if (text.length > MEMORY_CONTENT_MAX) throw new ValidationError(`content must be at most ${MEMORY_CONTENT_MAX} characters once normalised (NFKC)`, { details: { field: 'content' } });
    return text;
  };

  /**
   * Team and org memories reach other people's agents: one that reads like instructions to a model is
   * refused (422 memory_flagged, naming the signals), when written and when widened. Kept private, it is
   * its author's own and allowed (their own words to their own agent).
   */
  const checkShareable = (content: string, visibility: MemoryVisibility): string[] => {
    const signals = screenMemoryText(content);
    if (visibility !== 'private' && signals.length) {
      throw new UnprocessableError(`a ${visibility} memory reaches other people's agents, and this one reads like instructions to a model (${signals.join(', ')})`, {
        code: 'memory_flagged',
        details: { field: 'content', visibility, signals },
        hint: 'Rephrase it as a plain fact or preference (no orders to the assistant, links to fetch or commands to run), or keep it private.',
      });
    }
    return signals;
  };

  /**
   * The per-user write limits, checked in the writing transaction under the user's lock: the rate (API
   * writes only: the agent's saves have their own limit, see agent-egress.ts) and the quota (every memory
   * the user keeps, whoever wrote it). 429 with Retry-After, 409 with the figures.
   */
  async function checkWriteLimits(tx: Tx, owner: MemoryOwner, via: 'api' | 'agent'): Promise<void> {
    const state = await repo.lockedWriteState(tx, owner.tenantId, owner.userId, { rateWindow: via === 'api' });
    const refusal = writeRefusal(state, limits);
    if (refusal?.reason === 'rate') {
      throw new RateLimitedError(`too many memories written: at most ${refusal.limit} a minute; try again in ${refusal.retryAfterSeconds} s`, {
        details: { limit: refusal.limit, windowSeconds: 60, retryAfterSeconds: refusal.retryAfterSeconds },
        headers: { 'retry-after': String(refusal.retryAfterSeconds) },
      });
    }
    if (refusal?.reason === 'quota') {
      throw new ConflictError(`memory quota reached: you keep ${refusal.memories} memories, the quota is ${refusal.quota} a person`, {
        code: 'memory_quota_exceeded',
        details: { memories: refusal.memories, quota: refusal.quota },
        hint: 'Delete memories you no longer need (DELETE /v1/memories/:id), or ask the operator to raise AGENTWS_MEMORY_QUOTA.',
      });
    }
  }

  /** Whether a memory may reach the model of `userId`'s agent now (memory-fns.ts recallBlockers). */
  const mayReachModel = (m: MemoryRow, userId: string): boolean =>
    m.status === 'active' && recallBlockers({ content: m.content, source: m.source, released: m.releasedAt != null }, m.userId === userId).length === 0;
  const checkLimit = (limit: unknown, max = MEMORY_LIMIT_MAX): number => {
    const n = limit ?? MEMORY_LIMIT_DEFAULT;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) throw new ValidationError(`limit must be a whole number from 1 to ${max}`, { details: { field: 'limit' } });
    return n;
  };

  /** Queues the new memory's embedding in its own transaction, when the tenant has an embedder. */
  async function queueEmbedding(tx: Tx, m: MemoryRow): Promise<void> {
    if (!(await deps.embedders.exists(tx, m.tenantId))) return;
    await deps.queue.send(EMBED_MEMORY_JOB, { tenantId: m.tenantId, memoryId: m.id }, { tx, singletonKey: `embed-memory:${m.id}` });
  }

  /**
   * A query vector the statement can use: finite numbers, as many as the model key's dimensions
   * (`<provider id>/<model>/<dimensions>`); a mismatch would make the cast of the stored vectors fail.
   */
  function usableVector(v: { modelKey: string; vector: number[] }): boolean {
    if (typeof v.modelKey !== 'string' || !v.modelKey || !Array.isArray(v.vector)) return false;
    try {
      vectorLiteral(v.vector);
    } catch {
      return false;
    }
    const dims = Number(v.modelKey.split('/').at(-1));
    return !Number.isInteger(dims) || dims === v.vector.length;
  }

  /**
   * Search with the visibility rule in the statement. Hybrid when the tenant's embedder gives the text a
   * vector; full-text when it has none, and also when the embedder fails: a search that answers from
   * words is better than none, and the answer says which mode it was.
   */
  async function search(
    v: Viewer,
    input: MemoryFilter & { text: string; match: 'all' | 'any'; limit: number; vectorOnly?: boolean },
    log: Logger,
    /** The text's embedding when the caller started it already (same tenant, same text). */
    embedding?: ReturnType<EmbedQuery>,
  ): Promise<{ rows: MemoryRow[]; mode: SearchMode }> {
    // Two arms fused need more candidates each than the limit; one arm alone ranks exactly the limit.
    const candidates = input.vectorOnly ? input.limit : candidateCount(input.limit);
    let vector: Awaited<ReturnType<EmbedQuery>> = null;
    if (deps.embedQuery) {
      try {
        vector = await (embedding ?? deps.embedQuery(v.tenantId, input.text, v.userId));
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'embedding the search text failed: answering with full-text search');
      }
    }
    if (vector && !usableVector(vector)) {
      log.warn({ modelKey: vector.modelKey, dimensions: vector.vector?.length }, 'the embedder gave an unusable query vector: answering with full-text search');
      vector = null;
    }
    if (vector) {
      const rows = await repo.search(db, v, { ...input, candidates, vector: { modelKey: vector.modelKey, values: vector.vector } });
      return { rows, mode: input.vectorOnly ? 'vector' : 'hybrid' };
    }
    return { rows: await repo.search(db, v, { ...input, candidates }), mode: 'fulltext' };
  }

  async function agentActor(owner: MemoryOwner): Promise<UserActor> {
    if (!isUuid(owner.tenantId) || !isUuid(owner.userId)) throw new NotFoundError('user not found');
    const permissions = await deps.permissionsOf(owner.tenantId, owner.userId);
    return { kind: 'user', userId: owner.userId, tenantId: owner.tenantId, roles: [], permissions, via: 'agent' };
  }
  const agentCtx = (actor: UserActor): Ctx => ({ tenantId: actor.tenantId, actor, requestId: crypto.randomUUID(), log: deps.log, channel: 'agent' });

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

    /**
     * Saves a memory the user's agent wrote (its memory tool). Always private (only a person widens it),
     * `source: agent`, with its provenance (the user's own session, by our id or the runtime's `ses_…` id,
     * and the message); stored normalised, and quarantined when that text reads like instructions to a
     * model, or whatever it says when the tenant holds every agent save for release
     * (settings.memory.agentSavesNeedRelease). Counts toward the user's quota. Needs the user's
     * memory.write. Audited as the user, channel `agent`, with the signals that quarantined it.
     */
    async saveFromAgent(owner: MemoryOwner, input: { kind: string; content: string; sessionId: string; messageId: string }): Promise<PublicMemory> {
      const actor = await agentActor(owner);
      need(actor, 'memory.write');
      const kind = checkKind(input.kind);
      const content = checkContent(input.content);
      if (typeof input.messageId !== 'string' || !input.messageId || input.messageId.length > 200 || !isCleanString(input.messageId)) {
        throw new ValidationError('messageId must be a message id of at most 200 characters', { details: { field: 'messageId' } });
      }
      const sessionId = typeof input.sessionId === 'string' && input.sessionId.length <= 200 ? await repo.ownSession(db, owner.tenantId, owner.userId, input.sessionId) : null;
      if (!sessionId) throw new NotFoundError('session not found');
      const signals = instructionSignals(content);
      const ctx = agentCtx(actor);
      return db.transaction(async (tx) => {
        await checkWriteLimits(tx, owner, 'agent');
        const held = await repo.agentSavesNeedRelease(tx, owner.tenantId);
        const status = signals.length || held ? 'quarantined' : 'active';
        const m = await repo.insert(tx, { tenantId: owner.tenantId, userId: owner.userId, kind, content, visibility: 'private', status, source: 'agent', signals, sessionId, messageId: input.messageId });
        await audit.record(tx, ctx, {
          action: 'memory.create',
          target: `memory:${m.id}`,
          sessionId,
          details: {
            kind,
            visibility: 'private',
            source: 'agent',
            via: 'agent',
            messageId: input.messageId,
            status,
            ...(signals.length ? { signals } : {}),
            ...(held ? { heldForRelease: true } : {}),
            length: content.length,
          },
        });
        await queueEmbedding(tx, m);
        return publicMemory(m);
      });
    },

    /**
     * What the agent's search tool answers: the user's visible, ACTIVE memories best matching `q`, each
     * screened again as at a turn's recall (quarantined ones and ones that read like instructions never
     * reach a model), with `sharedBy` naming the other person who wrote one that is not the user's own.
     */
    async searchForAgent(owner: MemoryOwner, input: { q: string; kind?: string; limit?: number }): Promise<{ memories: AgentMemory[]; searchMode: SearchMode }> {
      const actor = await agentActor(owner);
      const limit = checkLimit(input.limit ?? 10);
      const kind = input.kind === undefined ? undefined : checkKind(input.kind);
      const q = typeof input.q === 'string' ? input.q.trim().slice(0, MEMORY_QUERY_MAX) : '';
      if (!q) throw new ValidationError('q must not be empty', { details: { field: 'q' } });
      // More than `limit`, so the ones screened out can be replaced.
      const { rows, mode } = await search(viewerOf(actor), { text: q, match: 'any', kind, activeOnly: true, limit: Math.min(limit * 2, MEMORY_LIMIT_MAX) }, deps.log);
      const memories = rows
        .filter((m) => mayReachModel(m, owner.userId))
        .slice(0, limit)
        .map((m) => ({ ...publicMemory(m), content: normaliseMemoryText(m.content), ...(m.userId === owner.userId ? {} : { sharedBy: m.authorHandle }) }));
      return { memories, searchMode: mode };
    },

    /**
     * The memories to put in front of the model at the start of a turn: the user's visible ACTIVE
     * memories most relevant to the prompt (hybrid search when the tenant has an embedder, else
     * full-text where any word of the prompt may match), at most `limit`, cut to about `maxTokens`.
     * When nothing matches, the user's OWN most recent preferences come instead: a preference ("I prefer
     * tabs") applies to every turn whatever its words, a fact or event that shares no word with the prompt
     * is most likely noise, and another person's preference is not this user's. Quarantined memories never
     * come, nor any whose normalised text reads like instructions unless it is the user's own and they
     * vouched for it (memory-fns.ts recallBlockers). Another person's memory carries `sharedBy`.
     */
    async recallForTurn(owner: MemoryOwner, prompt: string, options: { limit?: number; maxTokens?: number } = {}): Promise<{ memories: RecalledMemory[]; searchMode: SearchMode | 'recent' }> {
      const limit = options.limit ?? 5;
      const maxTokens = options.maxTokens ?? 800;
      // A long prompt says what it is about early; its tail only makes the query slower.
      const text = (typeof prompt === 'string' ? prompt : '').trim().slice(0, 4000);
      // The prompt's embedding and the user's permissions are independent: both round trips at once.
      const embedding = text && deps.embedQuery && isUuid(owner.tenantId) ? deps.embedQuery(owner.tenantId, text, owner.userId) : undefined;
      embedding?.catch(() => {}); // search awaits it and handles its failure; nobody does if agentActor throws first
      const actor = await agentActor(owner);
      const v = viewerOf(actor);
      let rows: MemoryRow[] = [];
      let mode: SearchMode | 'recent' = 'fulltext';
      if (text) {
        // More candidates than `limit`, so memories the token budget skips can be replaced. With an
        // embedder, by meaning alone: a prompt's words ORed match thousands of rows to rank (66 ms p95 at
        // 100,000 memories against 13 ms for the vector arm alone: the memories benchmark).
        ({ rows, mode } = await search(v, { text, match: 'any', activeOnly: true, limit: Math.min(limit * 3, MEMORY_LIMIT_MAX), vectorOnly: true }, deps.log, embedding));
        rows = rows.filter((m) => mayReachModel(m, owner.userId));
      }
      if (!rows.length) {
        rows = (await repo.list(db, v, { kind: 'preference', activeOnly: true, ownOnly: true, limit: Math.min(limit * 3, MEMORY_LIMIT_MAX) })).filter((m) => mayReachModel(m, owner.userId));
        mode = 'recent';
      }
      // Budgeted on the text the model will read (normalised: legacy rows may hold raw text).
      const picked = fitToBudget(
        rows.map((m) => ({ ...m, content: normaliseMemoryText(m.content) })),
        { limit, maxTokens },
      );
      return {
        memories: picked.map((m) => ({
          id: m.id,
          kind: m.kind,
          content: m.content,
          visibility: m.visibility,
          createdAt: m.createdAt,
          truncated: m.truncated,
          ...(m.userId === owner.userId ? {} : { sharedBy: m.authorHandle }),
        })),
        searchMode: mode,
      };
    },
  };
}

export type MemoriesService = ReturnType<typeof createMemoriesService>;
