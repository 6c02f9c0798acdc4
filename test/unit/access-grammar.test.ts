import { describe, expect, it } from 'vitest';
import { parseAccess as parseGitFlags, describeAccess } from '../../src/cli/git-host-input.js';
import { parseAllow } from '../../src/cli/mcp-input.js';
import { ValidationError } from '../../src/kernel/errors.js';
import {
  AccessSyntaxError,
  formatGitAccessRule,
  formatMcpAccess,
  formatMcpAccessSpec,
  parseGitAccessRule,
  parseMcpAccess,
  parseMcpAccessSpec,
} from '../../src/lib/access-grammar.js';

describe('git access rules: one grammar (who=patterns)', () => {
  it('reads who up to the last "=" and the patterns after it, trimmed, empty ones dropped', () => {
    expect(parseGitAccessRule('role:member=org/*,org/api')).toEqual({ who: 'role:member', repos: ['org/*', 'org/api'] });
    expect(parseGitAccessRule(' team:ops = infra/** , ,x ')).toEqual({ who: 'team:ops', repos: ['infra/**', 'x'] });
    expect(parseGitAccessRule('*=')).toEqual({ who: '*', repos: [] });
  });

  it('refuses a rule without "=" or without who, quoting it', () => {
    for (const text of ['role:member', '=org/*', '']) {
      expect(() => parseGitAccessRule(text)).toThrow(AccessSyntaxError);
    }
    expect(() => parseGitAccessRule('team:ops')).toThrow('"team:ops" must be <who>=<pattern>[,<pattern>...], e.g. role:member=org/*');
  });

  it('writes what it reads back', () => {
    for (const rule of [{ who: 'role:member', repos: ['org/*', 'org/api'] }, { who: '*', repos: [] }]) {
      expect(parseGitAccessRule(formatGitAccessRule(rule))).toEqual(rule);
    }
    expect(formatGitAccessRule({ who: 'team:ops', repos: ['infra/**'] })).toBe('team:ops=infra/**');
  });

  it('the CLI reads its --access flags with it, and names the flag when it refuses', () => {
    expect(parseGitFlags(['role:member=org/*', '*=pub/*'])).toEqual([{ who: 'role:member', repos: ['org/*'] }, { who: '*', repos: ['pub/*'] }]);
    expect(() => parseGitFlags(['role:member'])).toThrow(ValidationError);
    expect(() => parseGitFlags(['role:member'])).toThrow('--access "role:member" must be <who>=<pattern>[,<pattern>...], e.g. role:member=org/*');
    expect(describeAccess([{ who: 'role:member', repos: ['org/*'] }, { who: '*', repos: ['pub/*'] }])).toBe('role:member=org/* *=pub/*');
  });
});

describe('MCP access: one grammar (role, or role=names)', () => {
  it('a bare role (or role=*) is every one, role=a,b those, role= none; the role ends at the first "="', () => {
    expect(parseMcpAccessSpec('member')).toEqual({ role: 'member', list: '*' });
    expect(parseMcpAccessSpec('member=*')).toEqual({ role: 'member', list: '*' });
    expect(parseMcpAccessSpec('member= search , get_issue')).toEqual({ role: 'member', list: ['search', 'get_issue'] });
    expect(parseMcpAccessSpec('admin=')).toEqual({ role: 'admin', list: [] });
    // A resource URI keeps its own colons and "=".
    expect(parseMcpAccessSpec('member=docs://handbook/*,tickets://T-1?x=1')).toEqual({ role: 'member', list: ['docs://handbook/*', 'tickets://T-1?x=1'] });
  });

  it('refuses a spec naming no role, and a role named twice in one kind, saying which kind', () => {
    expect(() => parseMcpAccessSpec('=search')).toThrow('"=search": name a role');
    try {
      parseMcpAccess({ tools: ['member'], resources: ['member=a://x', 'member=b://y'] });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(AccessSyntaxError);
      expect((err as AccessSyntaxError).kind).toBe('resources');
      expect((err as Error).message).toBe('names the role member twice: give its whole list once');
    }
    // The same role in two kinds is one entry.
    expect(() => parseMcpAccess({ tools: ['member'], prompts: ['member'] })).not.toThrow();
  });

  it('merges the kinds into one entry per role, none of a kind a role is not named in', () => {
    expect(parseMcpAccess({ tools: ['member=search', 'admin'], resources: ['member=docs://x/*'], prompts: ['viewer'] })).toEqual([
      { role: 'member', tools: ['search'], resources: ['docs://x/*'], prompts: [] },
      { role: 'admin', tools: '*', resources: [], prompts: [] },
      { role: 'viewer', tools: [], resources: [], prompts: '*' },
    ]);
  });

  it('writes what it reads back: every role for tools, only the roles given some for resources and prompts', () => {
    const access = [
      { role: 'member', tools: '*' as const, resources: ['docs://handbook/*', 'tickets://T-1'], prompts: ['triage'] },
      { role: 'admin', tools: [], resources: [], prompts: '*' as const },
    ];
    expect(formatMcpAccess(access, 'tools')).toEqual(['member', 'admin=']);
    expect(formatMcpAccess(access, 'resources')).toEqual(['member=docs://handbook/*,tickets://T-1']);
    expect(formatMcpAccess(access, 'prompts')).toEqual(['member=triage', 'admin']);
    expect(parseMcpAccess({ tools: formatMcpAccess(access, 'tools'), resources: formatMcpAccess(access, 'resources'), prompts: formatMcpAccess(access, 'prompts') })).toEqual(access);
    expect(formatMcpAccessSpec({ role: 'member', list: ['a', 'b'] })).toBe('member=a,b');
  });

  it('the CLI reads its --allow flags with it, naming the flag and an example when it refuses', () => {
    expect(parseAllow(['member=search'], ['member=docs://x/*'])).toEqual([{ role: 'member', tools: ['search'], resources: ['docs://x/*'], prompts: [] }]);
    expect(() => parseAllow(['member=a', 'member=b'])).toThrow('--allow names the role member twice: give its whole list once, e.g. --allow member=search,get_issue');
    expect(() => parseAllow([], [], ['=triage'])).toThrow('--allow-prompts "=triage": name a role, e.g. --allow-prompts member=triage');
    expect(() => parseAllow(['=x'])).toThrow(ValidationError);
  });
});
