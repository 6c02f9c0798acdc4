import { createHash } from 'node:crypto';

/**
 * How vectors of different embedding models live side by side in `memories.embedding` (an untyped
 * `vector` column): each row says whose vector it holds (`embedding_model`, the model key), and each key
 * has its own partial HNSW index over the column cast to its dimensions. A search for key K must use the
 * same expression and the same predicate, or PostgreSQL cannot use K's index:
 *
 *   ... where embedding_model = '<K>' order by <embeddingExpression(dims)> <=> $1::<vectorType(dims)>
 *
 * with the key written as a literal (or as a parameter of an unnamed statement, which node-postgres
 * plans with its value), since a partial index is only chosen when its predicate is provably implied.
 */

/** pgvector's HNSW indexes take `vector` up to 2,000 dimensions and `halfvec` up to 4,000. */
export const MAX_VECTOR_DIMENSIONS = 2000;
export const MAX_INDEXED_DIMENSIONS = 4000;

/** The vector space of an embedder: "<provider id>/<model>/<dimensions>". */
export const modelKeyOf = (providerId: string, model: string, dimensions: number) => `${providerId}/${model}/${dimensions}`;

/** The SQL type vectors of this many dimensions are compared as (half precision above 2,000: HNSW's limit). */
export const vectorType = (dimensions: number) => `${dimensions > MAX_VECTOR_DIMENSIONS ? 'halfvec' : 'vector'}(${checkDims(dimensions)})`;

/** The indexed expression over `memories.embedding` (optionally qualified, e.g. `m.embedding`). */
export const embeddingExpression = (dimensions: number, column = 'embedding') => `(${column}::${vectorType(dimensions)})`;

/** The cosine operator class matching vectorType. */
export const cosineOpclass = (dimensions: number) => (dimensions > MAX_VECTOR_DIMENSIONS ? 'halfvec_cosine_ops' : 'vector_cosine_ops');

/** The index of one model key: named by a hash, since keys are long and may hold any character. */
export const embeddingIndexName = (modelKey: string) => `memories_embedding_${createHash('sha256').update(modelKey).digest('hex').slice(0, 16)}`;

/** A string as an SQL literal (standard_conforming_strings is on in every supported server). */
export function sqlLiteral(s: string): string {
  if (s.includes('\0')) throw new RangeError('an SQL literal cannot hold NUL');
  return `'${s.replaceAll("'", "''")}'`;
}

function checkDims(d: number): number {
  // Interpolated into SQL: only ever a small positive integer.
  if (!Number.isInteger(d) || d < 1 || d > MAX_INDEXED_DIMENSIONS) throw new Error(`invalid vector dimensions ${d}`);
  return d;
}

/** The statement creating a model key's partial HNSW index (idempotent). */
export function embeddingIndexSql(modelKey: string, dimensions: number): string {
  return `create index if not exists ${embeddingIndexName(modelKey)} on memories using hnsw (${embeddingExpression(dimensions)} ${cosineOpclass(dimensions)}) where embedding_model = ${sqlLiteral(modelKey)}`;
}

/** A vector as pgvector's text input ('[1,2,3]'), for a `$n::vector` parameter; refuses what pgvector would. */
export function vectorLiteral(values: number[]): string {
  if (!Array.isArray(values) || values.length < 1 || values.length > 16000) throw new RangeError(`a vector needs 1 to 16000 dimensions, got ${values?.length}`);
  for (const v of values) if (typeof v !== 'number' || !Number.isFinite(v)) throw new RangeError('a vector holds finite numbers only');
  return `[${values.join(',')}]`;
}
