import type { Database } from '../../db/database.js';
import { UpstreamError } from '../../kernel/errors.js';
import { modelPrice } from '../llm-gateway/provider-endpoint.js';
import { callCost } from '../llm-gateway/model-call-fns.js';
import type { Logger } from '../../kernel/logger.js';
import type { ProviderRow, ProvidersRepo } from '../providers/providers.repo.js';
import type { SpendingService } from '../usage/spending.service.js';
import type { UsageService } from '../usage/usage.service.js';
import { EmbeddingCallError, type EmbeddingClient } from './embedding-client.js';
import type { EmbedderRow, EmbeddersRepo } from './embedders.repo.js';

/** usage_records.channel of embedding calls. */
const EMBEDDINGS_CHANNEL = 'embeddings';

/** One provider request, bounded: a slow provider fails the job (retried) or the search (full text). */
const CALL_TIMEOUT_MS = 30_000;
/** The probe when an embedder is set answers the admin's request: a shorter bound. */
const PROBE_TIMEOUT_MS = 15_000;
/** Query vectors kept (per tenant, model and text): a repeated search or turn prompt costs no call. */
const QUERY_CACHE_SIZE = 500;

export interface EmbeddedQuery {
  modelKey: string;
  vector: number[];
}

/**
 * Embedding calls. Every call goes to the tenant's own provider with its sealed key opened only here,
 * and is recorded in usage_records like a model call (channel `embeddings`, cost at the model's input
 * price when the provider's model list gives one). The jobs that embed memories with them are the
 * memories' indexer (memories/memory-indexer.ts).
 */
export function createEmbeddingsService(deps: {
  db: Database;
  repo: EmbeddersRepo;
  providers: Pick<ProvidersRepo, 'find'>;
  usage: UsageService;
  /** What a user may still spend this month: a search embedding is not made for a user who has spent it. */
  spending?: Pick<SpendingService, 'monthlyRoom'>;
  client: EmbeddingClient;
  log: Logger;
}) {
  const { db, repo, providers, client, log } = deps;
  const queryCache = new Map<string, number[]>();

  /** The tenant's embedder and its provider; null without one. */
  async function current(tenantId: string): Promise<{ embedder: EmbedderRow; provider: ProviderRow } | null> {
    const embedder = await repo.get(db, tenantId);
    if (!embedder) return null;
    const provider = await providers.find(db, tenantId, embedder.provider);
    return provider ? { embedder, provider } : null;
  }

  async function recordUsage(tenantId: string, provider: ProviderRow, model: string, texts: string[], reported: Awaited<ReturnType<EmbeddingClient['embed']>>['usage'], userId: string | null) {
    // Some servers (older text-embeddings-inference, some vLLM builds) report no usage: estimate ~4
    // characters a token rather than record a free call.
    const usage = reported ?? { input: Math.ceil(texts.reduce((n, t) => n + t.length, 0) / 4), output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 };
    await deps.usage.record(db, {
      tenantId,
      userId,
      sessionId: null,
      model,
      provider: provider.name,
      tokens: { input: usage.input, output: usage.output, reasoning: usage.reasoning, cacheRead: usage.cacheRead, cacheWrite: usage.cacheWrite },
      costUsd: callCost(usage, modelPrice(provider, model, usage.model)),
      channel: EMBEDDINGS_CHANNEL,
    });
  }

  // Usage records of query embeddings still being written (see call's `usage: 'background'`).
  const recording = new Set<Promise<void>>();

  /**
   * One provider request for `texts`, its usage recorded (a failure to record is logged, not fatal).
   * `usage: 'background'` answers before the record is written: a search should not wait for a commit
   * (its fsync was a few ms of a search's p95); `settle()` waits for those records.
   */
  async function call(
    tenantId: string,
    provider: ProviderRow,
    model: string,
    texts: string[],
    options: { dimensions?: number; userId: string | null; timeoutMs?: number; usage?: 'await' | 'background' },
  ): Promise<number[][]> {
    const r = await client.embed(provider, model, texts, { timeoutMs: options.timeoutMs ?? CALL_TIMEOUT_MS, dimensions: options.dimensions });
    const recorded = recordUsage(tenantId, provider, model, texts, r.usage, options.userId).catch((err) =>
      log.error({ err: (err as Error).message, tenantId, provider: provider.name }, 'could not record an embedding call\'s usage'),
    );
    if (options.usage !== 'background') await recorded;
    else {
      recording.add(recorded);
      void recorded.finally(() => recording.delete(recorded));
    }
    return r.vectors;
  }

  return {
    /** The tenant's embedder and its provider (null without one): what the memories' indexer embeds with. */
    current,
    /** One provider request, its usage recorded: the memories' indexer's calls. */
    call,

    /** Waits for the usage records still being written (before the database closes). */
    async settle(): Promise<void> {
      while (recording.size) await Promise.all([...recording]);
    },

    /**
     * Embeds one short text to learn the model's dimensions (and that the provider answers at all).
     * Throws EmbeddingCallError with the provider's reason.
     */
    async probe(tenantId: string, provider: ProviderRow, model: string, userId: string | null): Promise<number> {
      const [v] = await call(tenantId, provider, model, ['agentws embedder probe: does this model answer?'], { userId, timeoutMs: PROBE_TIMEOUT_MS });
      return v.length;
    },

    /**
     * The port search and memory injection use: the text's vector in the tenant's current model, or
     * null when the tenant has no embedder (or its provider is disabled), or `userId`, whom the call is
     * charged to, has spent their monthly limit: search then runs on full text alone. A provider failure
     * throws UpstreamError (502); callers that can fall back should.
     */
    async embedQuery(tenantId: string, text: string, options: { userId?: string | null } = {}): Promise<EmbeddedQuery | null> {
      const c = await current(tenantId);
      if (!c || !c.provider.enabled) return null;
      const { modelKey } = c.embedder;
      const cacheKey = `${tenantId}\n${modelKey}\n${text}`;
      const hit = queryCache.get(cacheKey);
      if (hit) {
        // Most recently used last: Map keeps insertion order, so the first key is the one to evict.
        queryCache.delete(cacheKey);
        queryCache.set(cacheKey, hit);
        return { modelKey, vector: hit };
      }
      // A search text is embedded at its user's cost: not once their monthly limit is spent (their search
      // then runs on full text alone, as without an embedder).
      if (options.userId && deps.spending) {
        const room = await deps.spending.monthlyRoom(tenantId, options.userId);
        if (room !== null && room <= 0) return null;
      }
      let vector: number[];
      try {
        [vector] = await call(tenantId, c.provider, c.embedder.model, [text], { dimensions: c.embedder.dimensions, userId: options.userId ?? null, usage: 'background' });
      } catch (err) {
        if (err instanceof EmbeddingCallError) throw new UpstreamError(`embedding the search text failed: ${err.message}`, { details: { provider: c.provider.name } });
        throw err;
      }
      queryCache.set(cacheKey, vector);
      if (queryCache.size > QUERY_CACHE_SIZE) queryCache.delete(queryCache.keys().next().value!);
      return { modelKey, vector };
    },
  };
}

export type EmbeddingsService = ReturnType<typeof createEmbeddingsService>;

