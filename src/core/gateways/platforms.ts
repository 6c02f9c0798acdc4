import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { cleanString } from '../../lib/clean-string.js';
import { UpstreamError } from '../../kernel/errors.js';

/**
 * Adapters for the two chat platforms a gateway can front. Each knows how to register our webhook, send a
 * reply, authenticate an inbound webhook call and pull the user's message out of it. Base URLs come from
 * configuration (tests point them at test/fixtures/fake-chat-platform.ts).
 *
 * bot_chat is the Telegram Bot API as documented: the token sits in the URL path (`/bot<token>/<method>`),
 * answers are `{ ok, result | description }`, and Telegram echoes the secret we registered in the
 * `X-Telegram-Bot-Api-Secret-Token` header of every update.
 *
 * team_chat is modelled on Bot Framework / Teams, with these choices where they offer no single answer:
 * - Registration is `POST {base}/v3/bots/{botId}/webhook` `{ url, secret }` with `Authorization: Bearer
 *   <botToken>`: the bot token is used as an opaque bearer credential (no OAuth client-credentials dance).
 * - Inbound activities are authenticated the way Teams outgoing webhooks are: `Authorization: HMAC
 *   <base64(HMAC-SHA256(key, rawBody))>`. The key is the UTF-8 bytes of the secret we generated and
 *   registered (Teams hands out a base64 secret instead; ours is ours, so no decoding step).
 * - Replies go to `POST {base}/v3/conversations/{conversationId}/activities` `{ type: 'message', text }`.
 *   Bot Framework would have us reply to the activity's `serviceUrl`; we never do: that field is chosen by
 *   whoever sent the request, so following it would let anyone make us POST our bot token anywhere.
 * - Teams wraps mentions in `<at>Name</at>` and may send other HTML; parse() drops the mention of the bot
 *   itself and reduces the rest to plain text.
 *
 * Errors never carry the bot token, nor the fetch error that might quote a URL holding it.
 */

export type GatewayKind = 'bot_chat' | 'team_chat';
export const GATEWAY_KINDS: readonly GatewayKind[] = ['bot_chat', 'team_chat'];

export interface InboundMessage {
  externalUserId: string;
  externalUserName: string;
  platformDisplayName: string;
  chatId: string;
  text: string;
  messageId: string;
}

export interface ChatPlatform {
  kind: GatewayKind;
  /** Calls the platform's webhook-setting API. Unreachable / non-2xx → UpstreamError (502) with a safe message (never the token). */
  setWebhook(input: { botToken: string; botId: string; url: string; secret: string }): Promise<void>;
  /** Sends a text message to a chat. */
  sendMessage(input: { botToken: string; botId: string; chatId: string; text: string }): Promise<void>;
  /** Checks an inbound webhook request's authenticity against the gateway's secret, in constant time. */
  verify(input: { headers: Record<string, string | string[] | undefined>; rawBody: Buffer; secret: string }): boolean;
  /** The message an inbound update carries, or null for updates that are not a user's text message. */
  parse(body: unknown): InboundMessage | null;
}

export interface PlatformOptions {
  botChatApiUrl: string;
  teamChatApiUrl: string;
  /** Per call to a platform; default 10 s. */
  timeoutMs?: number;
}

const BOT_CHAT_SECRET_HEADER = 'x-telegram-bot-api-secret-token';
/** Telegram's rule for secret_token; the secret must be generated within it (e.g. 32 random bytes, base64url). */
const BOT_CHAT_SECRET_PATTERN = /^[A-Za-z0-9_-]{1,256}$/;
/** Telegram refuses longer texts, so longer replies go out as several messages. */
const BOT_CHAT_MAX_TEXT = 4096;

/** The adapters for both kinds, talking to the given base URLs. */
export function createPlatforms(options: PlatformOptions): Record<GatewayKind, ChatPlatform> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  return {
    bot_chat: createBotChat(options.botChatApiUrl.replace(/\/+$/, ''), timeoutMs),
    team_chat: createTeamChat(options.teamChatApiUrl.replace(/\/+$/, ''), timeoutMs),
  };
}

function createBotChat(base: string, timeoutMs: number): ChatPlatform {
  // Telegram tokens are `<digits>:<letters>`; encoding anything else keeps a strange token from
  // steering the request to another path.
  const endpoint = (token: string, method: string) => `${base}/bot${encodeURIComponent(token).replace(/%3A/gi, ':')}/${method}`;

  async function call(token: string, method: string, body: unknown): Promise<void> {
    const r = await post({ kind: 'bot_chat', operation: method, url: endpoint(token, method), body, timeoutMs });
    const json = r.json as { ok?: unknown; description?: unknown } | undefined;
    if (r.status >= 200 && r.status < 300 && json?.ok === true) return;
    const why = typeof json?.description === 'string' ? json.description : 'unexpected response';
    throw refused('bot_chat', method, r.status, why, token);
  }

  return {
    kind: 'bot_chat',
    async setWebhook({ botToken, url, secret }) {
      if (!BOT_CHAT_SECRET_PATTERN.test(secret)) throw new Error('bot_chat webhook secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -');
      await call(botToken, 'setWebhook', { url, secret_token: secret, allowed_updates: ['message'] });
    },
    async sendMessage({ botToken, chatId, text }) {
      for (const part of splitText(text, BOT_CHAT_MAX_TEXT)) await call(botToken, 'sendMessage', { chat_id: chatId, text: part });
    },
    verify({ headers, secret }) {
      const given = header(headers, BOT_CHAT_SECRET_HEADER);
      if (given === undefined || secret === '') return false;
      // Hashing first makes the comparison constant-time whatever the lengths.
      return timingSafeEqual(sha256(given), sha256(secret));
    },
    parse(body) {
      // Only `message`: edited messages, channel posts, button callbacks etc. are not a new user message.
      const msg = field(body, 'message');
      const from = field(msg, 'from');
      const chat = field(msg, 'chat');
      const text = field(msg, 'text');
      const messageId = field(msg, 'message_id');
      if (!isRecord(from) || !isRecord(chat) || typeof text !== 'string' || text.trim() === '') return null;
      if (from.is_bot === true || !isId(from.id) || !isId(chat.id) || !isId(messageId)) return null;
      const name = [from.first_name, from.last_name].filter((p): p is string => typeof p === 'string' && p !== '').join(' ');
      return cleanMessage({
        externalUserId: String(from.id),
        externalUserName: typeof from.username === 'string' ? from.username : '',
        platformDisplayName: name,
        chatId: String(chat.id),
        text,
        messageId: String(messageId),
      });
    },
  };
}

function createTeamChat(base: string, timeoutMs: number): ChatPlatform {
  async function call(operation: string, path: string, token: string, body: unknown): Promise<void> {
    const r = await post({ kind: 'team_chat', operation, url: `${base}${path}`, body, headers: { authorization: `Bearer ${token}` }, timeoutMs });
    if (r.status >= 200 && r.status < 300) return;
    // Bot Framework errors look like `{ error: { code, message } }`.
    const error = field(r.json, 'error');
    const message = field(error, 'message');
    throw refused('team_chat', operation, r.status, typeof message === 'string' ? message : typeof error === 'string' ? error : 'unexpected response', token);
  }

  return {
    kind: 'team_chat',
    async setWebhook({ botToken, botId, url, secret }) {
      await call('setWebhook', `/v3/bots/${encodeURIComponent(botId)}/webhook`, botToken, { url, secret });
    },
    async sendMessage({ botToken, chatId, text }) {
      await call('sendMessage', `/v3/conversations/${encodeURIComponent(chatId)}/activities`, botToken, { type: 'message', text });
    },
    verify({ headers, rawBody, secret }) {
      const match = /^HMAC\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header(headers, 'authorization') ?? '');
      if (!match || secret === '') return false;
      const given = Buffer.from(match[1], 'base64');
      const expected = createHmac('sha256', secret).update(rawBody).digest();
      // A MAC's length is public; only its bytes must be compared in constant time.
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
    parse(body) {
      if (field(body, 'type') !== 'message') return null;
      const from = field(body, 'from');
      const conversationId = field(field(body, 'conversation'), 'id');
      const id = field(body, 'id');
      const html = field(body, 'text');
      if (!isRecord(from) || typeof from.id !== 'string' || from.id === '' || typeof conversationId !== 'string' || conversationId === '') return null;
      if (!isId(id) || typeof html !== 'string') return null;
      const botName = field(field(body, 'recipient'), 'name');
      const text = teamsText(html, typeof botName === 'string' ? botName : undefined);
      if (text === '') return null;
      const name = typeof from.name === 'string' ? from.name : '';
      // Teams has no user names distinct from display names.
      return cleanMessage({ externalUserId: from.id, externalUserName: name, platformDisplayName: name, chatId: conversationId, text, messageId: String(id) });
    },
  };
}

interface PostInput {
  kind: GatewayKind;
  operation: string;
  url: string;
  body: unknown;
  headers?: Record<string, string>;
  timeoutMs: number;
}

async function post(input: PostInput): Promise<{ status: number; json: unknown }> {
  let status: number;
  let text: string;
  try {
    const res = await fetch(input.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...input.headers },
      body: JSON.stringify(input.body),
      // A redirect from a platform API is not expected; following one could carry our credentials along.
      redirect: 'manual',
      signal: AbortSignal.timeout(input.timeoutMs),
    });
    status = res.status;
    text = await res.text();
  } catch (err) {
    throw new UpstreamError(`the ${input.kind} platform cannot be reached (${networkReason(err, input.timeoutMs)})`, {
      code: 'platform_unreachable',
      details: { platform: input.kind, operation: input.operation },
    });
  }
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status, json };
}

/** A short, token-free reason: fetch's own messages can quote the URL, which holds the bot_chat token. */
function networkReason(err: unknown, timeoutMs: number): string {
  const e = err as { name?: unknown; cause?: { code?: unknown; name?: unknown } };
  if (e?.name === 'TimeoutError' || e?.cause?.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const code = e?.cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'network error';
}

function refused(kind: GatewayKind, operation: string, status: number, why: string, token: string): UpstreamError {
  // The platform's own description helps ("bad webhook: ..."), but is scrubbed of the token and trimmed.
  const safe = (token ? why.split(token).join('***') : why).replace(/[\u0000-\u001f\u007f]+/g, ' ').slice(0, 200);
  return new UpstreamError(`the ${kind} platform refused ${operation} (HTTP ${status}: ${safe})`, {
    code: 'platform_error',
    details: { platform: kind, operation, status },
  });
}

/** Splits on UTF-16 length (never inside a surrogate pair), preferring line breaks. */
function splitText(text: string, max: number): string[] {
  if (text.length <= max) return [text];
  const parts: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + max, text.length);
    if (end < text.length) {
      const newline = text.lastIndexOf('\n', end - 1);
      if (newline > start) end = newline + 1;
      else if (isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
    }
    parts.push(text.slice(start, end));
    start = end;
  }
  return parts;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** Plain text from a Teams message: the bot's own mention removed, other mentions kept as names. */
function teamsText(html: string, botName: string | undefined): string {
  const mention = /<at\b[^>]*>([\s\S]*?)<\/at>/gi;
  const withoutBot = html.replace(mention, (_whole, inner: string, offset: number) => {
    const name = decodeEntities(stripTags(inner)).trim();
    // Without the recipient's name, a mention before any text is the one that addressed the bot.
    const isBot = botName !== undefined ? name === botName : stripTags(html.slice(0, offset)).trim() === '';
    return isBot ? '' : name;
  });
  const lines = withoutBot.replace(/<br\s*\/?>|<\/(p|div)>/gi, '\n');
  return decodeEntities(stripTags(lines))
    .replace(/[ \t\u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .trim();
}

function stripTags(html: string): string {
  return html.replace(/<[^>]*>/g, '');
}

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos|nbsp);/gi, (whole, entity: string) => {
    const e = entity.toLowerCase();
    if (e.startsWith('#')) {
      const code = e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' }[e] ?? whole;
  });
}

/**
 * What a platform sends is not a user's request to refuse: a 400 would only make the platform retry. So
 * its strings are made storable instead (PostgreSQL text refuses NUL, jsonb refuses lone surrogates),
 * the rule every string arriving through the API is held to: lone surrogates become U+FFFD, NULs go.
 * A message whose ids or text are empty after that is not one we can act on.
 */
function cleanMessage(m: InboundMessage): InboundMessage | null {
  const c: InboundMessage = {
    externalUserId: cleanString(m.externalUserId),
    externalUserName: cleanString(m.externalUserName),
    platformDisplayName: cleanString(m.platformDisplayName),
    chatId: cleanString(m.chatId),
    text: cleanString(m.text),
    messageId: cleanString(m.messageId),
  };
  return c.externalUserId && c.chatId && c.messageId && c.text.trim() ? c : null;
}

/** A header by case-insensitive name; a repeated header is ambiguous and counts as absent. */
function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
    return value;
  }
  return undefined;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function field(value: unknown, key: string): unknown {
  return isRecord(value) ? value[key] : undefined;
}

function isId(value: unknown): value is string | number {
  return (typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'string' && value !== '');
}
