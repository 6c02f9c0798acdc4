import { ValidationError } from '../kernel/errors.js';
import { colors } from './output.js';

/** Whether prompts may be shown: both ends of the conversation are a terminal. */
export function canPrompt(): boolean {
  return Boolean(process.stdin.isTTY && process.stderr.isTTY);
}

/** Reads a secret piped on stdin (`printf %s "$KEY" | ...`), without the trailing newline `echo` adds. */
async function readStdinSecret(noun = 'API key'): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new ValidationError(`stdin holds more than 64 KiB: pipe only the ${noun}`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8').trim();
}

/** Asks for a secret on the terminal, masked; the prompt goes to stderr so stdout stays for results. */
async function promptSecret(message: string, options: { allowEmpty?: boolean; short?: string } = {}): Promise<string> {
  const { password } = await import('@inquirer/prompts');
  const noun = options.short ?? 'key';
  try {
    const v = await password(
      { message, mask: '*', validate: (s) => options.allowEmpty || s.trim() !== '' || `enter the ${noun} (Ctrl-C to cancel)` },
      { output: process.stderr },
    );
    return v.trim();
  } catch (err) {
    if ((err as Error).name === 'ExitPromptError') throw new ValidationError('cancelled: nothing was changed');
    throw err;
  }
}

/** How one kind of secret is handed over: `--<flag> <value>` (warned) or `--<flag>-stdin`. */
export interface SecretKind {
  /** The flag's name without dashes, e.g. `api-key`; the stdin flag is `<flag>-stdin`. */
  flag: string;
  /** What it is, in messages: `API key`, `bot token`. */
  noun: string;
  /** The short form in sentences like "pipe the key in": `key`, `token`. */
  short: string;
  /** The shell variable shown in hints: `$KEY`, `$BOT_TOKEN`. */
  shellVar: string;
}

export interface SecretSources {
  /** --<flag> <value> */
  value?: string;
  /** --<flag>-stdin */
  stdin?: boolean;
}

/**
 * Gets a secret the way that keeps it out of shell history: piped on stdin with --<flag>-stdin, else
 * asked for (masked) when `ask` is set and there is a terminal; --<flag> works too but warns. Returns
 * undefined when no source was given and nothing was asked.
 */
export async function resolveSecret(kind: SecretKind, sources: SecretSources, options: { ask: boolean; prompt: string }): Promise<string | undefined> {
  const pipeHint = `printf %s "${kind.shellVar}" | npx aws ... --${kind.flag}-stdin`;
  if (sources.value !== undefined) {
    process.stderr.write(colors.err.yellow(`Warning: --${kind.flag} may be recorded in your shell history; prefer piping it: ${pipeHint}\n`));
    if (!sources.value.trim()) throw new ValidationError(`--${kind.flag} is empty`);
    return sources.value.trim();
  }
  if (sources.stdin) {
    // On a terminal there is nothing piped in: ask instead of waiting silently for typed input.
    if (process.stdin.isTTY) return promptSecret(options.prompt, { short: kind.short });
    const secret = await readStdinSecret(kind.noun);
    if (!secret) throw new ValidationError(`--${kind.flag}-stdin was given but stdin was empty`, { hint: `Pipe the ${kind.short} in: ${pipeHint}` });
    return secret;
  }
  if (options.ask && canPrompt()) return promptSecret(options.prompt, { short: kind.short });
  return undefined;
}
