import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/kernel/errors.js';
import { createPlatforms, type ChatPlatform } from '../../src/core/gateways/platforms.js';
import { botChatHeaders, botChatUpdate, signTeamChat, startFakeChatPlatform, teamChatActivity, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';

const TOKEN = '123456789:AAF-secret_token_value';
const SECRET = 'whsec_0123456789abcdefghijklmnopqrstuvwxyzABCDE';

let fake: FakeChatPlatform;
let bot: ChatPlatform;
let team: ChatPlatform;

beforeAll(async () => {
  fake = await startFakeChatPlatform();
  ({ bot_chat: bot, team_chat: team } = createPlatforms({ botChatApiUrl: fake.url, teamChatApiUrl: `${fake.url}/` }));
});
afterAll(() => fake.close());
beforeEach(() => fake.setDown(false));

/** The thrown error, asserted to be a token-free 502. */
async function upstreamFailure(promise: Promise<unknown>): Promise<UpstreamError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UpstreamError);
  const e = err as UpstreamError;
  expect(e.status).toBe(502);
  expect(e.cause).toBeUndefined();
  expect(JSON.stringify({ message: e.message, details: e.details, stack: e.stack })).not.toContain('AAF-secret');
  return e;
}

describe('bot_chat', () => {
  it('registers its webhook the Telegram way', async () => {
    await bot.setWebhook({ botToken: TOKEN, botId: '123456789', url: 'https://hooks.example.com/gw/1', secret: SECRET });
    const call = fake.calls.at(-1)!;
    expect(call.path).toBe(`/bot${TOKEN}/setWebhook`);
    expect(call.headers['content-type']).toBe('application/json');
    expect(call.body).toEqual({ url: 'https://hooks.example.com/gw/1', secret_token: SECRET, allowed_updates: ['message'] });
    expect(fake.webhooks().at(-1)).toEqual({ kind: 'bot_chat', url: 'https://hooks.example.com/gw/1', secret: SECRET, token: TOKEN, botId: '123456789' });
  });

  it('refuses to register a secret Telegram would not accept', async () => {
    await expect(bot.setWebhook({ botToken: TOKEN, botId: '1', url: 'https://hooks.example.com/x', secret: 'has spaces' })).rejects.toThrow(/A-Z, a-z, 0-9/);
  });

  it('sends messages, splitting ones longer than Telegram allows', async () => {
    await bot.sendMessage({ botToken: TOKEN, botId: '123456789', chatId: '42', text: 'hello there' });
    expect(fake.sent().at(-1)).toEqual({ kind: 'bot_chat', chatId: '42', text: 'hello there', token: TOKEN });
    expect(fake.calls.at(-1)!.body).toEqual({ chat_id: '42', text: 'hello there' });

    const long = `${'a'.repeat(3000)}\n${'b'.repeat(3000)}\n${'😀'.repeat(3000)}`;
    const before = fake.sent().length;
    await bot.sendMessage({ botToken: TOKEN, botId: '1', chatId: '42', text: long });
    const parts = fake.sent().slice(before).map((s) => s.text);
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.every((p) => p.length <= 4096)).toBe(true);
    expect(parts.join('')).toBe(long);
    expect(parts[0]).toBe(`${'a'.repeat(3000)}\n`);
  });

  it('turns ok:false into a 502 carrying the description but not the token', async () => {
    fake.failNext({ status: 401, description: `Unauthorized: token ${TOKEN} revoked` });
    const e = await upstreamFailure(bot.setWebhook({ botToken: TOKEN, botId: '1', url: 'https://hooks.example.com/x', secret: SECRET }));
    expect(e.message).toBe('the bot_chat platform refused setWebhook (HTTP 401: Unauthorized: token *** revoked)');
    expect(e.code).toBe('platform_error');
    expect(e.details).toEqual({ platform: 'bot_chat', operation: 'setWebhook', status: 401 });

    fake.failNext({ status: 200, description: 'Bad Request: chat not found' });
    expect((await upstreamFailure(bot.sendMessage({ botToken: TOKEN, botId: '1', chatId: '9', text: 'x' }))).message).toMatch(/refused sendMessage \(HTTP 200: Bad Request: chat not found\)/);

    // The fake's own validation, as Telegram's: an http webhook URL.
    expect((await upstreamFailure(bot.setWebhook({ botToken: TOKEN, botId: '1', url: 'http://insecure.example/x', secret: SECRET }))).message).toMatch(/HTTP 400: Bad Request: bad webhook/);
  });

  it('answers 502 when the platform is down, without leaking the token', async () => {
    await fake.setDown(true);
    const e = await upstreamFailure(bot.setWebhook({ botToken: TOKEN, botId: '1', url: 'https://hooks.example.com/x', secret: SECRET }));
    expect(e.message).toBe('the bot_chat platform cannot be reached (ECONNREFUSED)');
    expect(e.code).toBe('platform_unreachable');
    await upstreamFailure(bot.sendMessage({ botToken: TOKEN, botId: '1', chatId: '1', text: 'x' }));
    await fake.setDown(false);
    await bot.sendMessage({ botToken: TOKEN, botId: '1', chatId: '1', text: 'back up' });
    expect(fake.sent().at(-1)!.text).toBe('back up');
  });

  it('gives up after the timeout', async () => {
    // Its own instance: the first fetch of a fresh worker can take longer than this short a timeout.
    const impatient = createPlatforms({ botChatApiUrl: fake.url, teamChatApiUrl: fake.url, timeoutMs: 500 }).bot_chat;
    fake.failNext({ hang: true });
    const e = await upstreamFailure(impatient.sendMessage({ botToken: TOKEN, botId: '1', chatId: '1', text: 'x' }));
    expect(e.message).toBe('the bot_chat platform cannot be reached (no answer within 500 ms)');
  });

  it('keeps a strange token inside its path segment', async () => {
    fake.failNext({ status: 404, description: 'Not Found' });
    await upstreamFailure(bot.sendMessage({ botToken: '1:a/../../v3/x?y#z', botId: '1', chatId: '1', text: 'x' }));
    expect(fake.calls.at(-1)!.path).toBe('/bot1:a%2F..%2F..%2Fv3%2Fx%3Fy%23z/sendMessage');
  });

  it('verifies the secret header', () => {
    const rawBody = Buffer.from(JSON.stringify(botChatUpdate({ userId: 7, text: 'hi' })));
    expect(bot.verify({ headers: botChatHeaders(SECRET), rawBody, secret: SECRET })).toBe(true);
    expect(bot.verify({ headers: { 'X-Telegram-Bot-Api-Secret-Token': SECRET }, rawBody, secret: SECRET })).toBe(true);
    expect(bot.verify({ headers: botChatHeaders(`${SECRET}x`), rawBody, secret: SECRET })).toBe(false);
    expect(bot.verify({ headers: botChatHeaders('wrong'), rawBody, secret: SECRET })).toBe(false);
    expect(bot.verify({ headers: botChatHeaders(''), rawBody, secret: SECRET })).toBe(false);
    expect(bot.verify({ headers: { 'content-type': 'application/json' }, rawBody, secret: SECRET })).toBe(false);
    expect(bot.verify({ headers: { 'x-telegram-bot-api-secret-token': [SECRET, 'other'] }, rawBody, secret: SECRET })).toBe(false);
    expect(bot.verify({ headers: botChatHeaders(''), rawBody, secret: '' })).toBe(false);
  });

  it('parses text messages and ignores other updates', () => {
    expect(bot.parse(botChatUpdate({ userId: 7, username: 'ada', firstName: 'Ada', lastName: 'Lovelace', text: 'pair me', chatId: 99, messageId: 5 }))).toEqual({
      externalUserId: '7',
      externalUserName: 'ada',
      platformDisplayName: 'Ada Lovelace',
      chatId: '99',
      text: 'pair me',
      messageId: '5',
    });
    expect(bot.parse(botChatUpdate({ userId: 8, firstName: 'Solo', text: 'hi' }))).toMatchObject({ externalUserName: '', platformDisplayName: 'Solo', chatId: '8' });

    const update = botChatUpdate({ userId: 7, text: 'x' });
    expect(bot.parse({ update_id: 1, edited_message: update.message })).toBeNull();
    expect(bot.parse({ update_id: 1, callback_query: { id: 'q', from: update.message.from, data: 'x' } })).toBeNull();
    expect(bot.parse({ update_id: 1, message: { ...update.message, text: undefined, photo: [{ file_id: 'f' }] } })).toBeNull();
    expect(bot.parse({ update_id: 1, message: { ...update.message, text: '   ' } })).toBeNull();
    expect(bot.parse({ update_id: 1, message: { ...update.message, from: { ...update.message.from, is_bot: true } } })).toBeNull();
    expect(bot.parse({ update_id: 1, message: { ...update.message, from: undefined } })).toBeNull();
    expect(bot.parse(null)).toBeNull();
    expect(bot.parse('message')).toBeNull();
    expect(bot.parse([update])).toBeNull();
  });
});

describe('team_chat', () => {
  it('registers its webhook with the bearer token, under the configured base only', async () => {
    await team.setWebhook({ botToken: 'team-token', botId: '28:bot/id', url: 'https://hooks.example.com/gw/2', secret: SECRET });
    const call = fake.calls.at(-1)!;
    expect(call.path).toBe('/v3/bots/28%3Abot%2Fid/webhook');
    expect(call.headers.authorization).toBe('Bearer team-token');
    expect(call.body).toEqual({ url: 'https://hooks.example.com/gw/2', secret: SECRET });
    expect(fake.webhooks().at(-1)).toEqual({ kind: 'team_chat', url: 'https://hooks.example.com/gw/2', secret: SECRET, token: 'team-token', botId: '28:bot/id' });
  });

  it('replies to a conversation as an activity', async () => {
    await team.sendMessage({ botToken: 'team-token', botId: 'b', chatId: '19:abc@thread.v2;messageid=1', text: 'hello' });
    const call = fake.calls.at(-1)!;
    expect(call.path).toBe(`/v3/conversations/${encodeURIComponent('19:abc@thread.v2;messageid=1')}/activities`);
    expect(call.body).toEqual({ type: 'message', text: 'hello' });
    expect(call.headers.authorization).toBe('Bearer team-token');
    expect(fake.sent().at(-1)).toEqual({ kind: 'team_chat', chatId: '19:abc@thread.v2;messageid=1', text: 'hello', token: 'team-token' });
  });

  it('turns errors into token-free 502s', async () => {
    fake.failNext({ status: 403, description: 'bot team-token is not allowed' });
    const e = await upstreamFailure(team.setWebhook({ botToken: 'team-token', botId: 'b', url: 'https://hooks.example.com/x', secret: SECRET }));
    expect(e.message).toBe('the team_chat platform refused setWebhook (HTTP 403: bot *** is not allowed)');

    await fake.setDown(true);
    const down = await upstreamFailure(team.sendMessage({ botToken: 'team-token', botId: 'b', chatId: 'c', text: 'x' }));
    expect(down.message).toBe('the team_chat platform cannot be reached (ECONNREFUSED)');
    expect(down.details).toEqual({ platform: 'team_chat', operation: 'sendMessage' });
  });

  it('verifies the HMAC signature over the raw body', () => {
    const rawBody = Buffer.from(JSON.stringify(teamChatActivity({ userId: 'u1', text: 'hi' })));
    const good = signTeamChat(SECRET, rawBody);
    expect(team.verify({ headers: { authorization: good }, rawBody, secret: SECRET })).toBe(true);
    expect(team.verify({ headers: { Authorization: good.replace('HMAC', 'hmac') }, rawBody, secret: SECRET })).toBe(true);
    expect(team.verify({ headers: { authorization: signTeamChat('other-secret', rawBody) }, rawBody, secret: SECRET })).toBe(false);
    expect(team.verify({ headers: { authorization: good }, rawBody: Buffer.concat([rawBody, Buffer.from(' ')]), secret: SECRET })).toBe(false);
    expect(team.verify({ headers: { authorization: good.replace('HMAC', 'Bearer') }, rawBody, secret: SECRET })).toBe(false);
    expect(team.verify({ headers: { authorization: 'HMAC ' }, rawBody, secret: SECRET })).toBe(false);
    expect(team.verify({ headers: { authorization: 'HMAC AAAA' }, rawBody, secret: SECRET })).toBe(false);
    expect(team.verify({ headers: {}, rawBody, secret: SECRET })).toBe(false);
    expect(team.verify({ headers: { authorization: signTeamChat('', rawBody) }, rawBody, secret: '' })).toBe(false);
  });

  it('parses message activities to plain text and ignores the rest', () => {
    expect(team.parse(teamChatActivity({ userId: 'u1', userName: 'Grace Hopper', text: 'pair me', conversationId: 'c1', id: 'm1', mention: true }))).toEqual({
      externalUserId: 'u1',
      externalUserName: 'Grace Hopper',
      platformDisplayName: 'Grace Hopper',
      chatId: 'c1',
      text: 'pair me',
      messageId: 'm1',
    });
    const base = teamChatActivity({ userId: 'u1', text: '' });
    const text = (t: string, recipient: unknown = base.recipient) => team.parse({ ...base, text: t, recipient })?.text ?? null;
    expect(text('<at>Workspace Bot</at> ask <at>Ada</at> about &lt;b&gt; &amp; more')).toBe('ask Ada about <b> & more');
    expect(text('<p>line one<br/>line <b>two</b></p>')).toBe('line one\nline two');
    expect(text('<at>Someone</at> hi', null)).toBe('hi'); // no recipient name: the leading mention is the bot
    expect(text('hi <at>Someone</at>', null)).toBe('hi Someone');
    expect(text('<at>Workspace Bot</at>')).toBeNull();

    expect(team.parse({ ...base, type: 'conversationUpdate', text: 'x' })).toBeNull();
    expect(team.parse({ ...base, type: 'typing' })).toBeNull();
    expect(team.parse({ ...base, text: 'x', from: undefined })).toBeNull();
    expect(team.parse({ ...base, text: 'x', conversation: {} })).toBeNull();
    expect(team.parse({ ...base, text: undefined, attachments: [{}] })).toBeNull();
    expect(team.parse(undefined)).toBeNull();
  });
});
