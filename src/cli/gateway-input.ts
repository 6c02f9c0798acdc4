import { Flags } from '@oclif/core';
import type { Ctx } from '../kernel/context.js';
import type { Core } from '../core/create-core.js';
import { NotFoundError, ValidationError } from '../kernel/errors.js';
import type { PublicGateway } from '../core/gateways/gateways.service.js';
import { resolveSecret, type SecretKind } from './secret-input.js';

const BOT_TOKEN: SecretKind = { flag: 'bot-token', noun: 'bot token', short: 'token', shellVar: '$BOT_TOKEN' };

/** Every way to hand over a bot token (gateway create and rotate-token). */
export const tokenFlags = {
  'bot-token-stdin': Flags.boolean({ summary: 'Read the bot token from stdin (printf %s "$BOT_TOKEN" | ...); in a terminal, ask for it (masked).', exclusive: ['bot-token'] }),
  'bot-token': Flags.string({ summary: 'The bot token itself (warns: it may be recorded in shell history; prefer --bot-token-stdin).', exclusive: ['bot-token-stdin'] }),
};

/**
 * A bot token from stdin, a masked prompt or the (warned) flag; without any of them and without a
 * terminal it fails with a hint showing `usage` with the token piped in.
 */
export async function resolveBotToken(flags: { 'bot-token'?: string; 'bot-token-stdin'?: boolean }, prompt: string, usage: string): Promise<string> {
  const token = await resolveSecret(BOT_TOKEN, { value: flags['bot-token'], stdin: flags['bot-token-stdin'] }, { ask: true, prompt });
  if (!token) {
    throw new ValidationError('a bot token is needed, and there is no terminal to ask for it', {
      hint: `Pipe it in: printf %s "$BOT_TOKEN" | npx aws ${usage} --bot-token-stdin`,
    });
  }
  return token;
}

/** Flag for commands that may name the gateway of a pairing code. */
export const gatewayFlag = Flags.string({ char: 'g', summary: 'The gateway: its id or its bot username.' });

export const GATEWAY_ARG_TEXT = 'Gateway id, or its bot username (with or without @)';

/**
 * Finds a gateway of the tenant by id or bot username (case-insensitive, `@` optional). A username
 * shared by several gateways is refused with the list of them, so the operator can pick an id.
 */
export async function resolveGateway(core: Core, ctx: Ctx, ref: string): Promise<PublicGateway> {
  const wanted = ref.trim().replace(/^@/, '').toLowerCase();
  const all = await core.gateways.list(ctx);
  const byId = all.find((g) => g.id.toLowerCase() === wanted);
  if (byId) return byId;
  const matches = all.filter((g) => g.botUsername.toLowerCase() === wanted);
  if (matches.length === 1) return matches[0];
  if (matches.length > 1) {
    throw new ValidationError(`${matches.length} gateways have the bot username @${matches[0].botUsername}: name one by id`, {
      hint: matches.map((g) => `${g.id}  ${g.kind}  bot id ${g.botId}${g.enabled ? '' : '  (disabled)'}`).join('\n'),
    });
  }
  throw new NotFoundError(`gateway "${ref}" not found`, {
    hint: all.length ? `Gateways: ${all.map((g) => `@${g.botUsername} (${g.id})`).join(', ')}` : 'Create one with `npx aws gateway create`.',
  });
}

/** `@name (id)`, or just the id when the platform sent no user name. */
export function who(user: { externalUserId: string; externalUserName: string }): string {
  return user.externalUserName ? `@${user.externalUserName} (${user.externalUserId})` : user.externalUserId;
}

/** A short human duration: `just now`, `42 s`, `3 min`, `2 h`, `5 d`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

export function ago(at: Date | string, now = Date.now()): string {
  const ms = now - new Date(at).getTime();
  return ms < 5000 ? 'just now' : `${duration(ms)} ago`;
}
