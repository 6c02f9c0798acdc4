import { ValidationError } from '../../kernel/errors.js';
import { MODEL_REF, type ProviderInput, type ProviderKind } from '../runtime/runtime.schemas.js';
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

/** A provider as the API shows it: never its key, only whether it has one. */
export const publicProvider = (p: ProviderRow) => ({
  name: p.name,
  kind: p.kind,
  baseUrl: p.baseUrl,
  models: p.models,
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

/** Checks a model reference ("<provider>/<model id>") against the tenant's providers (existing, listing the model). */
export function checkModelRef(ref: string, providers: ProviderRow[]): { provider: ProviderRow; modelId: string } {
  const m = MODEL_REF.exec(ref);
  if (!m) throw new ValidationError(`model must be "<provider>/<model id>", got "${ref}"`);
  const provider = providers.find((p) => p.name === m[1]);
  if (!provider) throw new ValidationError(`model ${ref}: no provider "${m[1]}"`);
  if (!provider.models.some((x) => x.id === m[2])) throw new ValidationError(`model ${ref}: provider "${m[1]}" lists no model "${m[2]}"`, { details: { models: provider.models.map((x) => x.id) } });
  return { provider, modelId: m[2] };
}
