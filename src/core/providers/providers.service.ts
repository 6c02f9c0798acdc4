import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, NotFoundError, ValidationError } from '../../kernel/errors.js';
import { testFailure, testSuccess, type ProviderAnswer, type ProviderQuestion } from './provider-test-fns.js';
import { PROVIDER_NAME } from './provider-names.js';
import type { ProviderInput, ProviderPatch } from './providers.schemas.js';
import { checkBaseUrl, checkModels, providerOrigin, publicProvider } from './providers-fns.js';
import type { ProviderRow, ProvidersRepo } from './providers.repo.js';

/** The provider test: one short question, a handful of tokens back, a short wait. */
const PROVIDER_TEST_PROMPT = 'Reply with the single word: ok';
export const PROVIDER_TEST_MAX_TOKENS = 16;
export const PROVIDER_TEST_TIMEOUT_MS = 15_000;

/**
 * A tenant's model providers (admin.manage_providers): registered, changed, removed and tested here; a
 * change reaches the runtimes at the next apply (runtime.service.ts), which reads them from the same repo.
 */
export function createProvidersService(deps: {
  db: Database;
  repo: ProvidersRepo;
  audit: AuditService;
  box: SecretBox;
  /**
   * The provider test's call: made with the code every service-side model call uses (the same base URL,
   * key header and error reading as the LLM gateway: llm-gateway/chat-client.ts askProvider, given by
   * create-core, so that providers, which the gateway reads, do not import it back).
   */
  ask(provider: ProviderRow, model: string, question: ProviderQuestion): Promise<ProviderAnswer>;
}) {
  const { db, repo, audit, box } = deps;

  async function load(tenantId: string, name: string): Promise<ProviderRow> {
    const p = await repo.find(db, tenantId, name);
    if (!p) throw new NotFoundError(`provider "${name}" not found`, { hint: 'List providers with `npx aws provider list`.' });
    return p;
  }

  return {
    /** The tenant's providers (admin.manage_providers). API keys are never returned. */
    async list(ctx: Ctx) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      return (await repo.list(db, tenantId)).map(publicProvider);
    },

    /** Registers a provider; its key is sealed before it is stored. Takes effect at the next apply. */
    async add(ctx: Ctx, input: ProviderInput) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      if (!PROVIDER_NAME.test(input.name)) throw new ValidationError('name must be lower-case letters, digits and dashes (at most 40)');
      checkModels(input.models);
      const baseUrl = checkBaseUrl(input.kind, input.baseUrl);
      if (input.kind !== 'openai-compatible' && !input.apiKey) throw new ValidationError(`an ${input.kind} provider needs an apiKey`);
      return db.transaction(async (tx) => {
        const row = await repo.insert(tx, {
          tenantId,
          name: input.name,
          kind: input.kind,
          baseUrl,
          apiKeySealed: input.apiKey ? box.seal(input.apiKey) : null,
          models: input.models,
          enabled: input.enabled ?? true,
        });
        if (!row) throw new ConflictError(`provider "${input.name}" already exists`, { hint: 'Change it instead (`npx aws provider update`, PATCH /v1/admin/providers/:name), or remove it first.' });
        await audit.record(tx, ctx, { action: 'provider.create', target: `provider:${input.name}`, details: { kind: input.kind, baseUrl, models: input.models.map((m) => m.id), apiKey: input.apiKey ? 'set' : 'none' } });
        return publicProvider(row);
      });
    },

    /**
     * Changes a provider (key rotation or removal, models, base URL, enabled). Takes effect at the next
     * apply. A stored key never follows the base URL to another origin on its own: such a change must
     * bring the key for the new host or drop the stored one (`apiKey: null`); a new path on the same
     * origin keeps it.
     */
    async update(ctx: Ctx, name: string, patch: ProviderPatch) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const p = await load(tenantId, name);
      if (patch.models) checkModels(patch.models);
      const baseUrl = patch.baseUrl !== undefined ? checkBaseUrl(p.kind, patch.baseUrl) : p.baseUrl;
      const from = providerOrigin(p.kind, p.baseUrl);
      const to = providerOrigin(p.kind, baseUrl);
      if (from !== to && p.apiKeySealed && patch.apiKey === undefined) {
        throw new ValidationError(`apiKey: the base URL moves to another origin (${from ?? 'none'} -> ${to ?? 'none'}), and the stored key must not be sent there without your say`, {
          details: { field: 'apiKey', from, to },
          hint: 'Send the key for the new host with the change (apiKey; CLI: --api-key-stdin), or drop the stored key (apiKey: null; CLI: --no-api-key).',
        });
      }
      if (patch.apiKey === null && p.kind !== 'openai-compatible') {
        throw new ValidationError(`apiKey: an ${p.kind} provider needs a key; send a new one instead of removing it`, { details: { field: 'apiKey' } });
      }
      const apiKey = patch.apiKey === null ? 'removed' : patch.apiKey ? 'rotated' : 'unchanged';
      return db.transaction(async (tx) => {
        const row = await repo.update(tx, tenantId, p.id, {
          baseUrl,
          apiKeySealed: patch.apiKey === null ? null : patch.apiKey ? box.seal(patch.apiKey) : p.apiKeySealed,
          models: patch.models ?? p.models,
          enabled: patch.enabled ?? p.enabled,
        });
        if (!row) throw new NotFoundError(`provider "${name}" not found`);
        const changed = Object.keys(patch).filter((k) => k !== 'apiKey');
        await audit.record(tx, ctx, { action: 'provider.update', target: `provider:${name}`, details: { changed, apiKey, ...(from !== to ? { origin: { from, to } } : {}) } });
        return publicProvider(row);
      });
    },

    /** Removes a provider. If it served the default model, prompting fails closed until the next apply. */
    async remove(ctx: Ctx, name: string): Promise<void> {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const p = await load(tenantId, name);
      await db.transaction(async (tx) => {
        await repo.remove(tx, tenantId, p.id);
        await audit.record(tx, ctx, { action: 'provider.delete', target: `provider:${name}`, details: {} });
      });
    },

    /**
     * One tiny chat call to a provider with its stored key (admin.manage_providers), enabled or not and
     * applied or not: `ok` with the latency, or the provider's own refusal (its HTTP status and message;
     * status null when it could not be reached or did not answer within PROVIDER_TEST_TIMEOUT_MS). The
     * key never appears in what is returned (the chat client cuts it out of refusals; the reply too).
     * Audited (`provider.test`): it spends a few tokens on the tenant's key. Not counted in usage.
     */
    async test(ctx: Ctx, name: string, input: { model?: string } = {}) {
      const tenantId = requirePermission(ctx, 'admin.manage_providers');
      const p = await load(tenantId, name);
      const model = input.model ?? p.models[0]?.id;
      if (!model || !p.models.some((m) => m.id === model)) {
        throw new ValidationError(`model: provider "${name}" lists no model "${model ?? ''}"`, { details: { field: 'model', models: p.models.map((m) => m.id) } });
      }
      const key = p.apiKeySealed ? box.open(p.apiKeySealed) : '';
      const started = performance.now();
      const answer = await deps.ask(p, model, { prompt: PROVIDER_TEST_PROMPT, maxTokens: PROVIDER_TEST_MAX_TOKENS, timeoutMs: PROVIDER_TEST_TIMEOUT_MS });
      const outcome = answer.ok ? testSuccess(answer.text, key) : testFailure(answer.message, answer.status, key);
      const latencyMs = Math.round(performance.now() - started);
      await db.transaction((tx) =>
        audit.record(tx, ctx, { action: 'provider.test', target: `provider:${name}`, details: { model, ok: outcome.ok, latencyMs, ...(outcome.ok ? {} : { status: outcome.status }) } }),
      );
      return { provider: name, model, latencyMs, ...outcome };
    },
  };
}
