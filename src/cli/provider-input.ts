import { Flags } from '@oclif/core';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { ValidationError } from '../kernel/errors.js';
import type { ProviderModel } from '../core/providers/providers.schemas.js';
import { resolveSecret } from './secret-input.js';

const NUMBER = /^\d+(\.\d+)?$/;
const FIELDS = ['contextLimit', 'outputLimit', 'inputCostPerMTok', 'outputCostPerMTok'] as const;

/**
 * Parses one `--model` value: `id`, or `id:context:output:inCostPerMTok:outCostPerMTok` with any
 * trailing fields left out and any field left empty. The numbers are read from the end (at most four
 * numeric-or-empty fields), so model ids with colons of their own (`llama3.1:8b`) stay whole; an id
 * that itself ends in `:<number>` is written with four empty fields after it (`gemma:2::::`).
 */
export function parseModelSpec(spec: string): ProviderModel {
  const parts = spec.split(':');
  let k = 0;
  while (k < FIELDS.length && parts.length - k > 1 && (parts[parts.length - 1 - k] === '' || NUMBER.test(parts[parts.length - 1 - k]))) k++;
  const id = parts.slice(0, parts.length - k).join(':');
  if (!id) throw new ValidationError(`--model "${spec}": the model id is empty`, { hint: MODEL_HINT });
  const model: ProviderModel = { id };
  parts.slice(parts.length - k).forEach((v, i) => {
    if (v === '') return;
    const field = FIELDS[i];
    const n = Number(v);
    if (i < 2 && (!Number.isInteger(n) || n < 1)) throw new ValidationError(`--model "${spec}": the ${i === 0 ? 'context' : 'output'} limit must be a whole number of tokens`, { hint: MODEL_HINT });
    model[field] = n;
  });
  return model;
}

/** Help text of --model (add and update). */
export const MODEL_FLAG_TEXT = {
  summary: 'A model the provider serves: <id> or <id>:<context>:<output>:<USD/M input>:<USD/M output> (repeatable).',
  description:
    'The numbers are optional and read from the end, so ids with colons (llama3.1:8b) work; leave a field empty to skip it (gpt-4.1:::2:8). An id that itself ends in :<number> takes four empty fields after it (gemma:2::::). Defaults: 128000 context tokens, 8192 output tokens, no cost. Prompt-cache prices: --cache-price.',
};

const CACHE_PRICE_HINT =
  'Write --cache-price <model id>=<USD per M cache read>:<USD per M cache write>, e.g. --cache-price claude-sonnet-4-5=0.3:3.75; leave one out to keep its default (gpt-4.1=0.5, or claude-x=:6)';

/** Help text of --cache-price (add and update). */
export const CACHE_PRICE_FLAG_TEXT = {
  summary: 'Prompt-cache prices of a model: <model id>=<USD/M cache read>:<USD/M cache write> (repeatable).',
  description:
    'Either price may be left out (gpt-4.1=0.5 sets the read price only; m=:3.75 the write price only). Unset, an anthropic model\'s cache reads cost 0.1x and writes 1.25x its input price (Anthropic\'s rule); other kinds\' cost the input price. The model must be one of the provider\'s (--model, or on update its current models, whose other fields stay).',
};

/** Parses one `--cache-price` value: `<model id>=<read>[:<write>]`, USD per million tokens, either one empty to leave it unset. */
export function parseCachePrice(spec: string): { id: string; cacheReadCostPerMTok?: number; cacheWriteCostPerMTok?: number } {
  const eq = spec.lastIndexOf('=');
  const id = eq > 0 ? spec.slice(0, eq) : '';
  const prices = spec.slice(eq + 1).split(':');
  const bad = (why: string) => new ValidationError(`--cache-price "${spec}": ${why}`, { hint: CACHE_PRICE_HINT });
  if (!id) throw bad('name the model: <model id>=<read>:<write>');
  if (prices.length > 2 || prices.some((p) => p !== '' && !NUMBER.test(p))) throw bad('the prices must be USD per million tokens, read then write (0.3:3.75)');
  const [read, write] = prices;
  if (!read && !write) throw bad('give a cache read price, a cache write price, or both');
  return { id, ...(read ? { cacheReadCostPerMTok: Number(read) } : {}), ...(write ? { cacheWriteCostPerMTok: Number(write) } : {}) };
}

/** The models with the cache prices of `specs` set on them; 400 naming --cache-price for a model that is not among them. */
export function withCachePrices(models: ProviderModel[], specs: string[]): ProviderModel[] {
  const prices = specs.map(parseCachePrice);
  for (const p of prices) {
    if (!models.some((m) => m.id === p.id)) throw new ValidationError(`--cache-price: the provider has no model "${p.id}" (its models: ${models.map((m) => m.id).join(', ') || 'none'})`, { hint: CACHE_PRICE_HINT });
  }
  return models.map((m) => prices.filter((p) => p.id === m.id).reduce<ProviderModel>((acc, { id: _id, ...set }) => ({ ...acc, ...set }), m));
}

/** Every way to hand over an API key (add and update). */
export const keyFlags = {
  'api-key-stdin': Flags.boolean({ summary: 'Read the API key from stdin (printf %s "$KEY" | ...); in a terminal, ask for it (masked).', exclusive: ['api-key'] }),
  'api-key': Flags.string({ summary: 'The API key itself (warns: it may be recorded in shell history; prefer --api-key-stdin).', exclusive: ['api-key-stdin'] }),
};

const MODEL_HINT = 'Write --model <id> or --model <id>:<context tokens>:<output tokens>:<USD per M input tokens>:<USD per M output tokens>, e.g. --model gpt-4.1-mini:1047576:32768:0.4:1.6';

const FLAG_OF: Record<string, string> = { kind: '--kind', baseUrl: '--base-url', apiKey: 'the API key', enabled: '--disabled' };

/** Schemas at the edge: checks input against the same TypeBox schema the API uses, naming the flag at fault. */
export function checkAgainst(schema: TSchema, value: unknown): void {
  const first = Value.Errors(schema, value).First();
  if (!first) return;
  const [top, index, field] = first.path.split('/').slice(1);
  if (top === 'name') throw new ValidationError(`provider name "${String(first.value)}": use lower-case letters, digits and dashes (at most 40, not starting with a dash)`);
  const where = top === 'models' ? `--model #${Number(index) + 1}${field ? ` (${field})` : ''}` : FLAG_OF[top] ?? (top || 'input');
  throw new ValidationError(`${where} is invalid: ${first.message.replace(/^Expected/, 'expected')}`, top === 'models' ? { hint: MODEL_HINT } : undefined);
}

export interface KeySources {
  /** --api-key <key> */
  apiKey?: string;
  /** --api-key-stdin */
  apiKeyStdin?: boolean;
}

/** API keys of providers: the shared secret rules of secret-input.ts under the --api-key flags. */
export async function resolveApiKey(sources: KeySources, options: { ask: boolean; prompt: string }): Promise<string | undefined> {
  return resolveSecret({ flag: 'api-key', noun: 'API key', short: 'key', shellVar: '$KEY' }, { value: sources.apiKey, stdin: sources.apiKeyStdin }, options);
}
