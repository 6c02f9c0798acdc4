import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { PROVIDER_TEST_MAX_TOKENS, PROVIDER_TEST_TIMEOUT_MS } from '../../../core/providers/providers.service.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';

export const ProviderTest = Type.Object({
  provider: Type.String(),
  model: Type.String({ description: 'The model asked (the provider\'s first model unless one was named)' }),
  ok: Type.Boolean({ description: 'The provider answered the call' }),
  latencyMs: Type.Integer({ description: 'From sending the call to the answer\'s last byte (or the failure)' }),
  reply: Type.Optional(Type.String({ description: 'What the model answered (ok), at most 200 characters' })),
  status: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { description: 'The provider\'s HTTP status when it refused (not ok); null when it could not be reached or did not answer in time' })),
  message: Type.Optional(Type.String({ description: 'The provider\'s own error message (not ok); the key is never in it' })),
});

export const Setup = Type.Object({
  ready: Type.Boolean({ description: 'Whether prompts can start (else they get 409 runtime_not_ready)' }),
  detail: Type.Optional(Type.String({ description: 'Why not, when not ready' })),
  steps: Type.Object({
    provider: Type.Boolean({ description: 'An enabled provider with a model is registered' }),
    defaultModel: Type.Boolean({ description: 'A default model is chosen' }),
    applied: Type.Boolean({ description: 'The configuration is applied and serves the default model' }),
  }),
  canSetUp: Type.Boolean({ description: 'The caller holds admin.manage_providers' }),
  ask: Type.Array(Type.Object({ name: Type.String(), email: Type.String() }), { description: 'Who may set the workspace up (at most 5, owners first): only to a caller who cannot, while it is not ready' }),
});

/**
 * The first-run path: the provider test (admin.manage_providers, audited as provider.test) and the
 * workspace's setup state the sessions screen shows any member until it can prompt.
 */
export async function setupRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { runtime, providers } = opts.core;

  app.post(
    '/admin/providers/:name/test',
    {
      schema: {
        tags: ['runtime'],
        summary: 'Test a provider with one tiny chat call (its stored key, enabled or not, applied or not)',
        description: `Asks the model (\`model\`, else the provider's first) for a one-word reply, at most ${PROVIDER_TEST_MAX_TOKENS} tokens, waiting at most ${PROVIDER_TEST_TIMEOUT_MS / 1000} s. 200 either way: \`ok\` with the latency, or the provider's own refusal (\`status\`, \`message\`). The key is never returned. Audited (provider.test); not counted in usage.`,
        params: Type.Object({ name: Type.String({ maxLength: 40 }) }),
        body: Type.Optional(Type.Object({ model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'One of the provider\'s model ids' })) }, { additionalProperties: false })),
        response: { 200: ProviderTest, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (req) => providers.test(ctxOf(req), req.params.name, { model: req.body?.model }),
  );

  app.get(
    '/setup',
    { schema: { tags: ['runtime'], summary: 'Whether this workspace can prompt, its first-run steps, and who can set it up (any signed-in member)', response: { 200: Setup, ...errorResponses(401) } } },
    async (req) => runtime.setup(ctxOf(req)),
  );
}
