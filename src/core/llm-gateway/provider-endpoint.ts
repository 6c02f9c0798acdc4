import { modelPrices, type ModelPrices } from '../providers/providers-fns.js';
import type { ProviderRow } from '../providers/providers.repo.js';
import type { ProviderKind } from '../providers/providers.schemas.js';

/**
 * What every call to a tenant's provider needs, whoever makes it: the LLM gateway forwarding a runtime's
 * model call, and the embeddings service calling `/embeddings` itself. One place, so a provider's URL,
 * its key's header and its prices are read the same way on both paths.
 */

/** Paths under a provider that are model endpoints, per wire format (nothing else a key could do). */
const MODEL_PATHS: Record<ProviderKind, RegExp> = {
  'openai-compatible': /^\/(chat\/completions|completions|embeddings|responses|models)$/,
  openai: /^\/(responses|chat\/completions|completions|embeddings|models)$/,
  anthropic: /^\/(messages|messages\/count_tokens|models)$/,
};

/** Whether `path` (under the provider's base URL) is a model endpoint of this kind of provider. */
export function isModelPath(kind: ProviderKind, path: string): boolean {
  return MODEL_PATHS[kind].test(path);
}

/** Where a provider without a base URL lives. */
const OFFICIAL_BASE_URL: Partial<Record<ProviderKind, string>> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
};

/** The provider's API root without a trailing slash; null when it has none (cannot be called). */
export function providerBaseUrl(p: Pick<ProviderRow, 'kind' | 'baseUrl'>): string | null {
  const base = p.baseUrl ?? OFFICIAL_BASE_URL[p.kind];
  return base ? base.replace(/\/+$/, '') : null;
}

/** The header carrying the tenant's real key, in the provider's convention (none without a key). */
export function providerAuthHeaders(kind: ProviderKind, key: string): Record<string, string> {
  if (!key) return {};
  return kind === 'anthropic' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
}

/**
 * The prices a model's calls are charged (the first of `ids` the provider lists; none listed: nothing),
 * cache prices settled by the provider's kind where the tenant gave none (providers-fns.ts modelPrices).
 */
export function modelPrice(p: Pick<ProviderRow, 'kind' | 'models'>, ...ids: Array<string | undefined>): ModelPrices {
  for (const id of ids) {
    const m = id ? p.models.find((x) => x.id === id) : undefined;
    if (m) return modelPrices(p.kind, m);
  }
  return modelPrices(p.kind, undefined);
}
