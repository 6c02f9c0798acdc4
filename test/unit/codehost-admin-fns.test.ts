import { describe, expect, it } from 'vitest';
import { checkKind, checkLabel, checkMention, checkRepos, newHookId, newWebhookSecret, webhookUrl } from '../../src/core/codehost/codehost-admin-fns.js';
import { originHref } from '../../src/web/sessions-list.js';

describe('a git host webhook settings', () => {
  it('takes a mention of "@" and a user name, nothing that could match more or span lines', () => {
    for (const ok of ['@agent', '@acme-bot', '@acme.ai', '@A_1']) expect(checkMention(ok)).toBe(ok);
    for (const bad of ['agent', '@', '@ agent', '@agent\n@other', '@a*', `@${'x'.repeat(61)}`, '', 7, null]) expect(() => checkMention(bad)).toThrow(/mention must be/);
  });

  it('takes a label of 1-50 printable characters, without padding or control characters', () => {
    for (const ok of ['agent', 'ai: fix me', 'Üben', 'x'.repeat(50)]) expect(checkLabel(ok)).toBe(ok);
    for (const bad of ['', ' agent', 'agent ', 'a\nb', 'a\u200eb', 'x'.repeat(51), 3]) expect(() => checkLabel(bad)).toThrow(/label must be/);
  });

  it('checks repository patterns as the access patterns are; empty means none', () => {
    expect(checkRepos([])).toEqual([]);
    expect(checkRepos(['acme/*', 'acme/api.git', 'acme/*', 'group/sub/**'])).toEqual(['acme/*', 'acme/api', 'group/sub/**']);
    expect(() => checkRepos(['acme/../x'])).toThrow(/^repos: "acme\/..\/x" is not a pattern/);
    expect(() => checkRepos(['acme repo'])).toThrow(/^repos: /);
    expect(() => checkRepos('acme/*')).toThrow(/repos must list/);
    expect(() => checkRepos(Array.from({ length: 101 }, (_, i) => `o/r${i}`))).toThrow(/at most 100/);
  });

  it('knows the three hosts only', () => {
    expect(checkKind('gitlab')).toBe('gitlab');
    expect(() => checkKind('bitbucket')).toThrow(/github, gitlab, gitea/);
  });

  it('makes random ids and secrets, and the URL from the public URL and the id alone', () => {
    const id = newHookId();
    expect(id).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(newHookId()).not.toBe(id);
    expect(newWebhookSecret()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(webhookUrl('https://agents.example.com/', id)).toBe(`https://agents.example.com/v1/codehost/webhooks/${id}`);
  });

  it('links a session to its origin only through an http(s) URL from the payload', () => {
    expect(originHref('https://github.com/acme/api/issues/12')).toBe('https://github.com/acme/api/issues/12');
    expect(originHref('http://git.local/acme/api/-/issues/3')).toBe('http://git.local/acme/api/-/issues/3');
    for (const bad of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,x', '//evil.example/x', 'not a url', '', null, undefined]) expect(originHref(bad)).toBeNull();
  });
});
