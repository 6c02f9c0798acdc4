/**
 * How vectors of different embedding models live side by side in `memories.embedding` (an untyped
 * `vector` column): each row says whose vector it holds (`embedding_model`, the model key), and vectors
 * of different keys never meet in one comparison. Searches short-list by the vectors' binary codes
 * (`embedding_bits`, generated: one sign bit per dimension) and re-rank by the exact cosine distance of
 * the vectors (migrations/0010_memory_vector_codes.sql, memories.repo.ts search).
 */

/** pgvector's `vector` holds up to 16,000 dimensions. */
export const MAX_EMBEDDING_DIMENSIONS = 16000;

/** The vector space of an embedder: "<provider id>/<model>/<dimensions>". */
export const modelKeyOf = (providerId: string, model: string, dimensions: number) => `${providerId}/${model}/${dimensions}`;

/** A stored vector of this many dimensions, for exact distances (optionally qualified, e.g. `m.embedding`). */
export const vectorExpression = (dimensions: number, column = 'embedding') => `(${column}::vector(${checkDims(dimensions)}))`;

/** The binary code of a query vector given as SQL (e.g. `$3::vector(1536)`). */
export const queryBits = (dimensions: number, vectorSql: string) => `binary_quantize(${vectorSql})::bit(${checkDims(dimensions)})`;

function checkDims(d: number): number {
  // Interpolated into SQL: only ever a small positive integer.
  if (!Number.isInteger(d) || d < 1 || d > MAX_EMBEDDING_DIMENSIONS) throw new Error(`invalid vector dimensions ${d}`);
  return d;
}

/** A vector as pgvector's text input ('[1,2,3]'), for a `$n::vector` parameter; refuses what pgvector would. */
export function vectorLiteral(values: number[]): string {
  if (!Array.isArray(values) || values.length < 1 || values.length > 16000) throw new RangeError(`a vector needs 1 to 16000 dimensions, got ${values?.length}`);
  for (const v of values) if (typeof v !== 'number' || !Number.isFinite(v)) throw new RangeError('a vector holds finite numbers only');
  return `[${values.join(',')}]`;
}
