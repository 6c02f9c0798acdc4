import { AppError, ForbiddenError, ValidationError } from '../../kernel/errors.js';
import { modelAllowed, type RbacPermissions } from '../../kernel/permissions.js';
import { MODEL_REF } from './provider-names.js';
import type { ProviderRow } from './providers.repo.js';

/**
 * The rules of choosing a model for a session or a turn, pure: which model a turn runs on, and
 * whether a person may choose one. The tenant's default model and a template's model are chosen by admins
 * and always usable (while their provider serves them); a person's own choice must also be in their
 * roles' allow-list (permissions.ts modelAllowed).
 */

/** Where a turn's model came from: precedence turn > session > template > tenant default. */
export type ModelSource = 'turn' | 'session' | 'template' | 'default';

/** The model a turn runs on and where that came from; null when not even a tenant default is applied. */
export function effectiveModel(c: { turn?: string | null; session?: string | null; template?: string | null }, tenantDefault: string | null): { ref: string; source: ModelSource } | null {
  if (c.turn) return { ref: c.turn, source: 'turn' };
  if (c.session) return { ref: c.session, source: 'session' };
  if (c.template) return { ref: c.template, source: 'template' };
  return tenantDefault ? { ref: tenantDefault, source: 'default' } : null;
}

/** A provider that does not serve now (disabled, or enabled since the last apply): 409, the field named. */
class ProviderDisabledError extends AppError {
  readonly status = 409;
  constructor(message: string, field: string, provider: string) {
    super(message, 'provider_disabled', { details: { field, provider }, hint: 'Choose another model (GET /v1/models lists those you may use), or ask an admin to enable and apply the provider.' });
  }
}

/** What the runtime serves now: the tenant's providers as stored, and the names applied to the runtimes. */
export interface Served {
  providers: ProviderRow[];
  applied: readonly string[];
}

const served = (p: ProviderRow, s: Served) => p.enabled && s.applied.includes(p.name);

/**
 * Checks a person's choice of model (`field` names where it came from: `model` of a prompt, a session's
 * model). Unknown (no such provider or model): 400 model_unknown. Its provider disabled or not applied:
 * 409 provider_disabled. Not in the person's allow-list: 403 model_not_allowed. Returns the provider and
 * model id.
 */
export function checkModelChoice(ref: string, s: Served, permissions: RbacPermissions, field = 'model', what: string = field): { provider: ProviderRow; modelId: string } {
  const m = MODEL_REF.exec(ref);
  if (!m) throw new ValidationError(`${what} must be "<provider>/<model id>", got "${ref.slice(0, 250)}"`, { code: 'model_unknown', details: { field } });
  const provider = s.providers.find((p) => p.name === m[1]);
  if (!provider || !provider.models.some((x) => x.id === m[2])) {
    throw new ValidationError(`${what}: the workspace has no model "${ref}"`, { code: 'model_unknown', details: { field, model: ref }, hint: 'GET /v1/models lists the models you may choose.' });
  }
  if (!served(provider, s)) {
    const why = provider.enabled ? 'is enabled but not applied to the runtime yet' : 'is disabled';
    throw new ProviderDisabledError(`${what}: the provider "${provider.name}" of model ${ref} ${why}`, field, provider.name);
  }
  if (!modelAllowed(permissions, ref)) {
    throw new ForbiddenError(`${what}: your role may not use the model ${ref}`, {
      code: 'model_not_allowed',
      details: { field, model: ref, permission: 'models.allowed' },
      hint: 'GET /v1/models lists the models you may choose; an admin can allow more in your role (Admin, Roles).',
    });
  }
  return { provider, modelId: m[2] };
}

/** One model a person may choose, as GET /v1/models lists it. */
export interface ModelChoice {
  /** "<provider>/<model id>": what a session's or a prompt's `model` names. */
  ref: string;
  provider: string;
  id: string;
  name: string;
  /** The tenant's default model (what a session without a choice or template model runs on). */
  default: boolean;
  contextLimit: number | null;
}

/**
 * The models a person may choose: every model of an enabled, applied provider that their allow-list
 * covers, and the tenant's default whatever the list says. `all`: every served model, each with whether
 * the person may choose it (the roles screen lists them to choose from).
 */
export function modelCatalog(s: Served, defaultRef: string | null, permissions: RbacPermissions, o: { all?: boolean } = {}): Array<ModelChoice & { allowed: boolean }> {
  const out: Array<ModelChoice & { allowed: boolean }> = [];
  for (const p of s.providers) {
    if (!served(p, s)) continue;
    for (const m of p.models) {
      const ref = `${p.name}/${m.id}`;
      const isDefault = ref === defaultRef;
      const allowed = isDefault || modelAllowed(permissions, ref);
      if (allowed || o.all) out.push({ ref, provider: p.name, id: m.id, name: m.name ?? m.id, default: isDefault, contextLimit: m.contextLimit ?? null, allowed });
    }
  }
  return out;
}
