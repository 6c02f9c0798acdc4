import { Type, type Static } from '@sinclair/typebox';
import { PROVIDER_KINDS, PROVIDER_NAME } from './provider-names.js';

export type { ProviderKind } from './provider-names.js';

export const ProviderModel = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 200, description: 'Model id as the provider names it, e.g. gpt-4.1-mini' }),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    contextLimit: Type.Optional(Type.Integer({ minimum: 1, description: 'Context window in tokens (default 128000)' })),
    outputLimit: Type.Optional(Type.Integer({ minimum: 1, description: 'Most output tokens per reply (default 8192)' })),
    inputCostPerMTok: Type.Optional(Type.Number({ minimum: 0, description: 'USD per million input tokens (for cost accounting)' })),
    outputCostPerMTok: Type.Optional(Type.Number({ minimum: 0, description: 'USD per million output tokens' })),
    cacheReadCostPerMTok: Type.Optional(
      Type.Number({ minimum: 0, description: 'USD per million input tokens read from the provider\'s prompt cache (default: a tenth of the input price for anthropic, the input price otherwise)' }),
    ),
    cacheWriteCostPerMTok: Type.Optional(
      Type.Number({ minimum: 0, description: 'USD per million input tokens written to the prompt cache (default: 1.25x the input price for anthropic, the input price otherwise)' }),
    ),
  },
  { additionalProperties: false },
);
export type ProviderModel = Static<typeof ProviderModel>;

export const ProviderInput = Type.Object(
  {
    name: Type.String({ pattern: PROVIDER_NAME.source, description: 'Lower-case name, unique in the tenant; models are referenced as <name>/<model id>' }),
    kind: Type.Union(PROVIDER_KINDS.map((k) => Type.Literal(k)), { description: 'openai-compatible needs baseUrl; openai and anthropic are the named built-ins' }),
    baseUrl: Type.Optional(Type.String({ maxLength: 2000, description: 'http(s) URL of the API (required for openai-compatible)' })),
    apiKey: Type.Optional(Type.String({ minLength: 1, maxLength: 4000, description: 'Stored sealed (AES-256-GCM); never returned' })),
    models: Type.Array(ProviderModel, { minItems: 1, maxItems: 200 }),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);
export type ProviderInput = Static<typeof ProviderInput>;

export const ProviderPatch = Type.Partial(
  Type.Composite([
    Type.Omit(ProviderInput, ['name', 'kind', 'apiKey']),
    Type.Object({
      apiKey: Type.Union([Type.String({ minLength: 1, maxLength: 4000 }), Type.Null()], {
        description: 'A new key (stored sealed), or null to remove the stored key. Required when baseUrl moves to another origin while a key is stored',
      }),
    }),
  ]),
  { additionalProperties: false },
);
export type ProviderPatch = Static<typeof ProviderPatch>;
