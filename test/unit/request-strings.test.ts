import { describe, expect, it } from 'vitest';
import { createPlatforms } from '../../src/core/gateways/platforms.js';
import { cleanString, isCleanString } from '../../src/lib/clean-string.js';
import { compileBodyValidator, findUnclean } from '../../src/http/validation.js';
import { botChatUpdate, teamChatActivity } from '../fixtures/fake-chat-platform.js';

describe('the string rule: valid Unicode without NUL', () => {
  it('accepts any well-formed text, including astral characters, and refuses NUL and lone surrogates', () => {
    for (const ok of ['', 'plain', 'zwölf 十二 🙂', '\u{10FFFF}', 'tab\tnewline\n']) expect(isCleanString(ok), ok).toBe(true);
    for (const bad of ['\0', 'a\0b', '\ud800', 'x\udfff', '🙂'.slice(0, 1), '\udc00\ud800']) expect(isCleanString(bad), JSON.stringify(bad)).toBe(false);
  });

  it('cleans to the nearest storable string: U+FFFD for lone surrogates, NULs dropped, pairs kept', () => {
    expect(cleanString('a\0b\ud800c🙂')).toBe('ab\ufffdc🙂');
    expect(isCleanString(cleanString('\udc00\0\ud800'))).toBe(true);
  });
});

describe('findUnclean: where in a request the first unclean string is', () => {
  it('names values by JSON pointer, at any depth and in arrays', () => {
    expect(findUnclean({ title: 'ok', n: 1, b: true, z: null })).toBeUndefined();
    expect(findUnclean({ title: 'a\0' })).toEqual({ at: '/title', key: false });
    expect(findUnclean({ parts: [{ text: 'ok' }, { text: '\ud800' }] })).toEqual({ at: '/parts/1/text', key: false });
    expect(findUnclean(['ok', ['x', 'y\0']])).toEqual({ at: '/1/1', key: false });
    expect(findUnclean('\0')).toEqual({ at: '', key: false });
  });

  it('names the object that holds an unclean property name, and escapes pointer characters', () => {
    expect(findUnclean({ settings: { groupRoleMapping: { ok: 'member', 'x\0': 'member' } } })).toEqual({ at: '/settings/groupRoleMapping', key: true });
    expect(findUnclean({ 'a/b': { '~c': '\0' } })).toEqual({ at: '/a~1b/~0c', key: false });
  });

  it('walks without recursion, so a deeply nested body cannot overflow the stack', () => {
    let deep: unknown = 'bad\0';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(findUnclean(deep)?.at.split('/').length).toBe(200_001);
  });

  it('runs after the schema: a validator reports a type error first, then the string rule', () => {
    const validate = compileBodyValidator({ type: 'object', properties: { title: { type: 'string' } } });
    expect(validate({ title: 1 })).toBe(false);
    expect(validate.errors![0]).toMatchObject({ instancePath: '/title', message: 'must be string' });
    expect(validate({ title: 'a\0' })).toBe(false);
    expect(validate.errors![0]).toMatchObject({ instancePath: '/title', message: 'must be valid Unicode without NUL characters' });
    expect(validate({ title: 'fine' })).toBe(true);
    expect(validate.errors).toBeNull();
  });
});

describe('inbound chat messages are made storable, not refused', () => {
  const { bot_chat: bot, team_chat: team } = createPlatforms({ botChatApiUrl: 'http://127.0.0.1:9', teamChatApiUrl: 'http://127.0.0.1:9' });

  it('cleans every string a bot_chat update gives us', () => {
    const msg = bot.parse(JSON.parse(JSON.stringify(botChatUpdate({ userId: 5, username: 'u\0ser', firstName: 'Ann\ud800', text: 'hi\0 there' }))));
    expect(msg).toMatchObject({ externalUserId: '5', externalUserName: 'user', platformDisplayName: 'Ann\ufffd', text: 'hi there' });
  });

  it('cleans a team_chat activity, and drops one that is left without an id or text', () => {
    const activity = teamChatActivity({ userId: 'u\0-1', userName: 'Bo\udc00b', text: 'hello\0', conversationId: 'c-1' });
    expect(team.parse(activity)).toMatchObject({ externalUserId: 'u-1', externalUserName: 'Bo\ufffdb', text: 'hello', chatId: 'c-1' });
    expect(team.parse(teamChatActivity({ userId: '\0', userName: 'x', text: 'hi', conversationId: 'c' }))).toBeNull();
    expect(bot.parse(botChatUpdate({ userId: 6, text: '\0\0' }))).toBeNull();
  });
});
