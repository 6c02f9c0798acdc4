import { ValidationError } from '../../kernel/errors.js';
import { MODEL_REF } from './provider-names.js';
import type { ProviderInput, ProviderKind, ProviderModel } from './providers.schemas.js';
import type { ProviderRow } from './providers.repo.js';

/** Where the built-in kinds send requests when no base URL is given (their SDKs' defaults). */
const DEFAULT_ORIGIN: Record<ProviderKind, string | null> = {
  'openai-compatible': null,
  openai: 'https://api.openai.com',
  anthropic: 'https://api.anthropic.com',
};

/** The origin a provider's requests (and its key) go to. */
export function providerOrigin(kind: ProviderKind, baseUrl: string | null): string | null {
  return baseUrl ? new URL(baseUrl).origin : DEFAULT_ORIGIN[kind];
}

/** A provider as the API shows it: never its key, only whether it has one; what each model is charged. */
export const publicProvider = (p: ProviderRow) => ({
  name: p.name,
  kind: p.kind,
  baseUrl: p.baseUrl,
  models: p.models,
  // The prices calls are charged, unset cache prices settled: a default is shown, never silent.
  prices: Object.fromEntries(p.models.map((m) => [m.id, modelPrices(p.kind, m)])),
  enabled: p.enabled,
  hasApiKey: Boolean(p.apiKeySealed),
  createdAt: p.createdAt,
  updatedAt: p.updatedAt,
});

/** A base URL as stored (trailing slashes cut), or null for a kind with a default; 400 when unusable. */
export function checkBaseUrl(kind: ProviderKind, baseUrl: string | null | undefined): string | null {
  if (!baseUrl) {
    if (kind === 'openai-compatible') throw new ValidationError('baseUrl is required for an openai-compatible provider');
    return null;
  }
  let u: URL;
  try {
    u = new URL(baseUrl);
  } catch {
    throw new ValidationError('baseUrl must be an absolute http(s) URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ValidationError('baseUrl must be an http(s) URL');
  if (u.username || u.password) throw new ValidationError('baseUrl must not carry credentials: pass the key as apiKey');
  return u.href.replace(/\/+$/, '');
}

/** A provider lists each model once. */
export function checkModels(models: ProviderInput['models']): void {
  const ids = models.map((m) => m.id);
  const dup = ids.find((id, i) => ids.indexOf(id) !== i);
  if (dup) throw new ValidationError(`model "${dup}" is listed twice`);
}

/**
 * Checks a model reference ("<provider>/<model id>") against the tenant's providers (existing, listing the
 * model). `field` names the input it came from in the refusal's details, so a form shows it there.
 */
export function checkModelRef(ref: string, providers: ProviderRow[], field = 'model'): { provider: ProviderRow; modelId: string } {
  const m = MODEL_REF.exec(ref);
  if (!m) throw new ValidationError(`model must be "<provider>/<model id>", got "${ref}"`, { details: { field } });
  const provider = providers.find((p) => p.name === m[1]);
  if (!provider) throw new ValidationError(`model ${ref}: no provider "${m[1]}"`, { details: { field } });
  if (!provider.models.some((x) => x.id === m[2])) throw new ValidationError(`model ${ref}: provider "${m[1]}" lists no model "${m[2]}"`, { details: { field, models: provider.models.map((x) => x.id) } });
  return { provider, modelId: m[2] };
}

/**
 * What Anthropic bills for prompt caching, in multiples of a model's input price: the same for every
 * Claude model (reads a tenth, writes to the 5-minute cache 1.25x, to the one-hour cache 2x).
 */
const ANTHROPIC_CACHE = { read: 0.1, write: 1.25, writeLong: 2 } as const;

/** A model's prices in USD per million tokens, each one settled: what its calls are charged. */
export interface ModelPrices {
  inputPerMTok: number;
  outputPerMTok: number;
  /** Input tokens the provider read from its prompt cache. */
  cacheReadPerMTok: number;
  /** Input tokens written to the prompt cache (Anthropic's 5-minute cache). */
  cacheWritePerMTok: number;
  /** Input tokens written to Anthropic's one-hour cache (its usage reports them apart). */
  cacheWriteLongPerMTok: number;
}

/**
 * A model's prices as charged, from what the tenant registered. Unset input and output prices are 0 (a
 * model without prices costs nothing, as before). An unset cache price is never 0 by accident: for an
 * anthropic provider it is Anthropic's own rule (reads 0.1x, writes 1.25x the input price); for the
 * others, whose cache discounts differ by model (OpenAI's cached input is 0.1x-0.5x), it is the input
 * price, which never charges less than the bill. A one-hour cache write costs twice the input price
 * (Anthropic's price), or the cache write price where that is higher.
 */
export function modelPrices(kind: ProviderKind, m: Partial<ProviderModel> | undefined): ModelPrices {
  const input = m?.inputCostPerMTok ?? 0;
  const anthropic = kind === 'anthropic';
  // 3 x 0.1 is 0.30000000000000004 in floating point: a price shows (and is written to the runtime) as 0.3.
  const times = (k: number) => Number((input * k).toPrecision(12));
  const cacheWrite = m?.cacheWriteCostPerMTok ?? (anthropic ? times(ANTHROPIC_CACHE.write) : input);
  return {
    inputPerMTok: input,
    outputPerMTok: m?.outputCostPerMTok ?? 0,
    cacheReadPerMTok: m?.cacheReadCostPerMTok ?? (anthropic ? times(ANTHROPIC_CACHE.read) : input),
    cacheWritePerMTok: cacheWrite,
    cacheWriteLongPerMTok: Math.max(cacheWrite, times(ANTHROPIC_CACHE.writeLong)),
  };
}
