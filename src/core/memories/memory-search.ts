import type { Database } from '../../db/database.js';
import type { Logger } from '../../kernel/logger.js';
import { vectorLiteral } from '../embeddings/model-key.js';
import type { MemoriesRepo, MemoryFilter, MemoryRow, Viewer } from './memories.repo.js';
import { candidateCount } from './memory-fns.js';

/**
 * The port to the tenant's embedder: the embedding of a search text and the key of the model that made
 * it (`<provider id>/<model>/<dimensions>`), or null when the tenant has no embedder (or the person the
 * call is charged to, `userId`, has spent their monthly limit). Only memories embedded with that same
 * key take part in the vector arm of a search.
 */
export type EmbedQuery = (tenantId: string, text: string, userId: string) => Promise<{ modelKey: string; vector: number[] } | null>;

/** Which search answered: `hybrid` (full-text fused with vectors), `fulltext` (no embedder, or it failed). */
export type SearchMode = 'hybrid' | 'fulltext' | 'vector';

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

/** Memory search, for people's lists and for the agent's tools and turns alike. */
export function createMemorySearch(deps: { db: Database; repo: MemoriesRepo; embedQuery?: EmbedQuery }) {
  const { db, repo } = deps;
  /**
   * Search with the visibility rule in the statement. Hybrid when the tenant's embedder gives the text a
   * vector; full-text when it has none, and also when the embedder fails: a search that answers from
   * words is better than none, and the answer says which mode it was.
   */
  return async function search(
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
  };
}
