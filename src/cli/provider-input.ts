import { Flags } from '@oclif/core';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { ValidationError } from '../core/errors.js';
import type { ProviderModel } from '../core/runtime/runtime.schemas.js';
import { colors } from './output.js';

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
    'The numbers are optional and read from the end, so ids with colons (llama3.1:8b) work; leave a field empty to skip it (gpt-4.1:::2:8). An id that itself ends in :<number> takes four empty fields after it (gemma:2::::). Defaults: 128000 context tokens, 8192 output tokens, no cost.',
};

/** Every way to hand over an API key (add and update). */
export const keyFlags = {
  'api-key-stdin': Flags.boolean({ summary: 'Read the API key from stdin (printf %s "$KEY" | ...); in a terminal, ask for it (masked).', exclusive: ['api-key'] }),
  'api-key': Flags.string({ summary: 'The API key itself (warns: it may be recorded in shell history; prefer --api-key-stdin).', exclusive: ['api-key-stdin'] }),
};

export const MODEL_HINT = 'Write --model <id> or --model <id>:<context tokens>:<output tokens>:<USD per M input tokens>:<USD per M output tokens>, e.g. --model gpt-4.1-mini:1047576:32768:0.4:1.6';

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

/** Whether prompts may be shown: both ends of the conversation are a terminal. */
export function canPrompt(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY);
}

/** Reads a secret piped on stdin (`printf %s "$KEY" | ...`), without the trailing newline `echo` adds. */
export async function readStdinSecret(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new ValidationError('stdin holds more than 64 KiB: pipe only the API key');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8').trim();
}

/** Asks for a secret on the terminal, masked; the prompt goes to stderr so stdout stays for results. */
export async function promptSecret(message: string, options: { allowEmpty?: boolean } = {}): Promise<string> {
  const { password } = await import('@inquirer/prompts');
  try {
    const v = await password(
      { message, mask: '*', validate: (s) => options.allowEmpty || s.trim() !== '' || 'enter the key (Ctrl-C to cancel)' },
      { output: process.stderr },
    );
    return v.trim();
  } catch (err) {
    if ((err as Error).name === 'ExitPromptError') throw new ValidationError('cancelled: nothing was changed');
    throw err;
  }
}

export interface KeySources {
  /** --api-key <key> */
  apiKey?: string;
  /** --api-key-stdin */
  apiKeyStdin?: boolean;
}

/**
 * Gets an API key the way that keeps it out of shell history: piped on stdin with --api-key-stdin, else
 * asked for (masked) when `ask` is set and there is a terminal; --api-key works too but warns. Returns
 * undefined when no source was given and nothing was asked.
 */
export async function resolveApiKey(sources: KeySources, options: { ask: boolean; prompt: string }): Promise<string | undefined> {
  if (sources.apiKey !== undefined) {
    process.stderr.write(colors.err.yellow('Warning: --api-key may be recorded in your shell history; prefer piping it: printf %s "$KEY" | npx aws ... --api-key-stdin\n'));
    if (!sources.apiKey.trim()) throw new ValidationError('--api-key is empty');
    return sources.apiKey.trim();
  }
  if (sources.apiKeyStdin) {
    // On a terminal there is nothing piped in: ask instead of waiting silently for typed input.
    if (process.stdin.isTTY) return promptSecret(options.prompt);
    const key = await readStdinSecret();
    if (!key) throw new ValidationError('--api-key-stdin was given but stdin was empty', { hint: 'Pipe the key in: printf %s "$KEY" | npx aws ... --api-key-stdin' });
    return key;
  }
  if (options.ask && canPrompt()) return promptSecret(options.prompt);
  return undefined;
}
