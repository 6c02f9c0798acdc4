import type { Database } from '../../db/database.js';
import { isCleanString } from '../../lib/clean-string.js';
import { isUuid } from '../../lib/ids.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx, UserActor } from '../../kernel/context.js';
import { NotFoundError, ValidationError } from '../../kernel/errors.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { EmbeddersRepo } from '../embeddings/embedders.repo.js';
import type { MemoriesRepo, MemoryRow } from './memories.repo.js';
import { checkContent, checkKind, checkLimit, need, publicMemory, viewerOf, type PublicMemory } from './memory-checks.js';
import { fitToBudget, instructionSignals, MEMORY_LIMIT_MAX, MEMORY_QUERY_MAX, normaliseMemoryText, recallBlockers, type MemoryKind, type MemoryVisibility, type MemoryWriteLimits } from './memory-fns.js';
import { createMemorySearch, type EmbedQuery, type SearchMode } from './memory-search.js';
import { createMemoryWrites, type MemoryOwner } from './memory-writes.js';

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

/**
 * The memories of a person's agent: what it saves with its memory tool, what its search tool answers, and
 * what a turn recalls for the model. The agent acts for its user with their current permissions; what it
 * saves is private and quarantined when it reads like instructions, and nothing quarantined or
 * instruction-like reaches a model (memory-fns.ts).
 */
export function createAgentMemoriesService(deps: {
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
  const search = createMemorySearch(deps);
  const { checkWriteLimits, queueEmbedding } = createMemoryWrites(deps);

  /** Whether a memory may reach the model of `userId`'s agent now (memory-fns.ts recallBlockers). */
  const mayReachModel = (m: MemoryRow, userId: string): boolean =>
    m.status === 'active' && recallBlockers({ content: m.content, source: m.source, released: m.releasedAt != null }, m.userId === userId).length === 0;

  async function agentActor(owner: MemoryOwner): Promise<UserActor> {
    if (!isUuid(owner.tenantId) || !isUuid(owner.userId)) throw new NotFoundError('user not found');
    const permissions = await deps.permissionsOf(owner.tenantId, owner.userId);
    return { kind: 'user', userId: owner.userId, tenantId: owner.tenantId, roles: [], permissions, via: 'agent' };
  }
  const agentCtx = (actor: UserActor): Ctx => ({ tenantId: actor.tenantId, actor, requestId: crypto.randomUUID(), log: deps.log, channel: 'agent' });

  return {
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

export type AgentMemoriesService = ReturnType<typeof createAgentMemoriesService>;
