import { describe, expect, it } from 'vitest';
import {
  agentRefPrefix,
  canReach,
  checkAccessRules,
  checkPush,
  checkPushOptionRules,
  defaultRefOf,
  describeUpdates,
  normaliseBaseUrl,
  parseGitRequest,
  parseReceivePackCommands,
  pkt,
  pushOptionAllowed,
  refusedPushOptions,
  refusePushResponse,
  repoMatches,
  sandboxGitConfig,
  validRefName,
} from '../../src/core/connectors/git-fns.js';

const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const q = (s = '') => new URLSearchParams(s);

describe('git gateway paths', () => {
  it('reads smart HTTP requests and nothing else', () => {
    expect(parseGitRequest('org/repo.git/info/refs', 'GET', q('service=git-upload-pack'))).toEqual({ repo: 'org/repo', upstreamPath: 'org/repo.git', service: 'git-upload-pack', kind: 'refs' });
    expect(parseGitRequest('org/repo/git-receive-pack', 'POST', q())).toEqual({ repo: 'org/repo', upstreamPath: 'org/repo', service: 'git-receive-pack', kind: 'rpc' });
    expect(parseGitRequest('group/sub/repo/git-upload-pack', 'POST', q())).toMatchObject({ repo: 'group/sub/repo' });
    for (const [path, method, query] of [
      ['org/repo/info/refs', 'GET', ''], // dumb protocol
      ['org/repo/info/refs', 'GET', 'service=git-upload-archive'],
      ['org/repo/info/refs', 'POST', 'service=git-upload-pack'],
      ['org/repo/git-upload-pack', 'GET', ''],
      ['org/repo/HEAD', 'GET', ''],
      ['org/repo/objects/info/packs', 'GET', ''],
      ['../other/repo/git-upload-pack', 'POST', ''],
      ['org/../repo/git-upload-pack', 'POST', ''],
      ['org/./repo/git-upload-pack', 'POST', ''],
      ['org//repo/git-upload-pack', 'POST', ''],
      ['repo/git-upload-pack', 'POST', ''],
      ['org/re%2fpo/git-upload-pack', 'POST', ''],
      ['org/.git/git-upload-pack', 'POST', ''],
      ['api/v3/user', 'GET', ''],
    ] as const) {
      expect(parseGitRequest(path, method, q(query)), path).toHaveProperty('error');
    }
  });
});

describe('access rules', () => {
  it('matches patterns per segment, ignoring case', () => {
    expect(repoMatches('org/*', 'org/repo')).toBe(true);
    expect(repoMatches('org/*', 'Org/Repo')).toBe(true);
    expect(repoMatches('org/*', 'org/sub/repo')).toBe(false);
    expect(repoMatches('org/**', 'org/sub/repo')).toBe(true);
    expect(repoMatches('org/api-*', 'org/api-server')).toBe(true);
    expect(repoMatches('org/repo', 'org/repo2')).toBe(false);
    expect(repoMatches('org/r.po', 'org/repo')).toBe(false);
    expect(repoMatches('*/*', 'other/repo')).toBe(true);
  });
  it('grants by role, team or everyone', () => {
    const rules = checkAccessRules([
      { who: 'role:member', repos: ['org/*'] },
      { who: 'team:Backend', repos: ['private/api.git'] },
      { who: '*', repos: ['public/docs'] },
    ]);
    expect(canReach(rules, { roles: ['member'], teams: [] }, 'org/x')).toBe(true);
    expect(canReach(rules, { roles: ['viewer'], teams: [] }, 'org/x')).toBe(false);
    expect(canReach(rules, { roles: ['viewer'], teams: ['backend'] }, 'private/api')).toBe(true);
    expect(canReach(rules, { roles: [], teams: [] }, 'public/docs')).toBe(true);
    expect(canReach(rules, { roles: ['member'], teams: [] }, 'private/api')).toBe(false);
    expect(canReach([], { roles: ['owner'], teams: [] }, 'org/x')).toBe(false);
  });
  it('refuses malformed rules, naming the field', () => {
    expect(() => checkAccessRules({})).toThrow(/access must be a list/);
    expect(() => checkAccessRules([{ who: 'admin', repos: ['x/y'] }])).toThrow(/access\[0\]\.who/);
    expect(() => checkAccessRules([{ who: '*', repos: [] }])).toThrow(/access\[0\]\.repos/);
    expect(() => checkAccessRules([{ who: '*', repos: ['../x'] }])).toThrow(/access\[0\]\.repos/);
  });
});

describe('pushes', () => {
  const commands = (lines: string[], caps = 'report-status side-band-64k agent=git/2.39') => {
    const parts = lines.map((l, i) => pkt(i === 0 ? `${l}\0${caps}\n` : `${l}\n`));
    return Buffer.concat([...parts, Buffer.from('0000'), Buffer.from('PACK....')]);
  };
  it('reads the ref updates before the pack', () => {
    const buf = commands([`${Z} ${A} refs/heads/agent/mia/fix`, `${A} ${B} refs/heads/main`]);
    const p = parseReceivePackCommands(buf);
    expect(p.state).toBe('done');
    if (p.state !== 'done') return;
    expect(p.commands.map((c) => c.ref)).toEqual(['refs/heads/agent/mia/fix', 'refs/heads/main']);
    expect(p.capabilities).toContain('report-status');
    expect(buf.subarray(p.length).toString()).toBe('PACK....');
    // From a shallow clone: its shallow commits come first.
    const shallow = Buffer.concat([pkt(`shallow ${B}\n`), buf]);
    expect(parseReceivePackCommands(shallow)).toMatchObject({ state: 'done', commands: [{ ref: 'refs/heads/agent/mia/fix' }, { ref: 'refs/heads/main' }], capabilities: expect.arrayContaining(['report-status']) });
    // Arriving in pieces: more until the flush.
    expect(parseReceivePackCommands(buf.subarray(0, 30)).state).toBe('more');
    expect(parseReceivePackCommands(buf.subarray(0, 3)).state).toBe('more');
  });
  it('refuses what is not a plain list of ref updates', () => {
    expect(parseReceivePackCommands(Buffer.from('zzzz'))).toMatchObject({ state: 'error' });
    // git's probe before a large push: a lone flush, nothing to update.
    expect(parseReceivePackCommands(Buffer.from('0000'))).toMatchObject({ state: 'done', commands: [] });
    expect(parseReceivePackCommands(Buffer.concat([pkt('push-cert\0report-status\n'), Buffer.from('0000')]))).toMatchObject({ state: 'error', error: /signed pushes/ });
    expect(parseReceivePackCommands(Buffer.concat([pkt(`${Z} ${A} refs/heads/a b\n`), Buffer.from('0000')]))).toMatchObject({ state: 'error' });
    // Endless commands without a flush: refused once past the limit, never buffered without end.
    const many = Buffer.concat(Array.from({ length: 3000 }, () => pkt(`${Z} ${A} refs/heads/agent/mia/x\n`)));
    expect(parseReceivePackCommands(many)).toMatchObject({ state: 'error', error: /too many/ });
  });
  it('reads push options after the commands when the client asked for them, as git reads the capabilities', () => {
    const F = Buffer.from('0000');
    const withOptions = (first: string, ...rest: Buffer[]) => Buffer.concat([pkt(first), F, ...rest, F, Buffer.from('PACK....')]);
    const p = parseReceivePackCommands(withOptions(`${Z} ${A} refs/heads/agent/mia/x\0report-status push-options\n`, pkt('ci.skip'), pkt('merge_request.title=a b\n')));
    expect(p).toMatchObject({ state: 'done', options: ['ci.skip', 'merge_request.title=a b'] });
    if (p.state === 'done') expect(withOptions(`${Z} ${A} refs/heads/agent/mia/x\0report-status push-options\n`, pkt('ci.skip'), pkt('merge_request.title=a b\n')).subarray(p.length).toString()).toBe('PACK....');
    // Not asked: no options section (what follows the flush is the pack), options null.
    expect(parseReceivePackCommands(Buffer.concat([pkt(`${Z} ${A} refs/heads/x\0report-status\n`), F, Buffer.from('PACK')]))).toMatchObject({ state: 'done', options: null });
    // Asked with a value, after a tab, or on a later command line: git's receive-pack takes each as asked.
    for (const lines of [
      [`${Z} ${A} refs/heads/x\0report-status push-options=1\n`],
      [`${Z} ${A} refs/heads/x\0report-status\tpush-options\n`],
      [`${Z} ${A} refs/heads/x\0report-status\n`, `${Z} ${A} refs/heads/y\0push-options\n`],
    ]) {
      const r = parseReceivePackCommands(Buffer.concat([...lines.map((l) => pkt(l)), F, pkt('ci.skip'), F]));
      expect(r, JSON.stringify(lines)).toMatchObject({ state: 'done', options: ['ci.skip'] });
      if (r.state === 'done') expect(r.commands.map((c) => c.ref)).toEqual(lines.length === 2 ? ['refs/heads/x', 'refs/heads/y'] : ['refs/heads/x']);
    }
    // Still arriving: more until the options' flush.
    expect(parseReceivePackCommands(Buffer.concat([pkt(`${Z} ${A} refs/heads/x\0push-options\n`), F, pkt('ci.skip')])).state).toBe('more');
    // Bounded: control characters, too many, too long.
    expect(parseReceivePackCommands(withOptions(`${Z} ${A} refs/heads/x\0push-options\n`, pkt('a\u0000b')))).toMatchObject({ state: 'error', error: /push option/ });
    expect(parseReceivePackCommands(withOptions(`${Z} ${A} refs/heads/x\0push-options\n`, ...Array.from({ length: 101 }, () => pkt('ci.skip'))))).toMatchObject({ state: 'error', error: /at most 100/ });
    expect(parseReceivePackCommands(withOptions(`${Z} ${A} refs/heads/x\0push-options\n`, pkt('x'.repeat(5000))))).toMatchObject({ state: 'error' });
  });
  it('lets through only the push options an admin listed', () => {
    const allowed = checkPushOptionRules(['merge_request.create', 'merge_request.label=agent', 'ci.*']);
    expect(pushOptionAllowed('merge_request.create', allowed)).toBe(true);
    expect(pushOptionAllowed('merge_request.create=1', allowed)).toBe(true);
    expect(pushOptionAllowed('merge_request.label=agent', allowed)).toBe(true);
    expect(pushOptionAllowed('merge_request.label=deploy', allowed)).toBe(false);
    expect(pushOptionAllowed('merge_request.merge_when_pipeline_succeeds', allowed)).toBe(false);
    expect(pushOptionAllowed('ci.variable=A=1', allowed)).toBe(true);
    expect(pushOptionAllowed('MERGE_REQUEST.CREATE', allowed)).toBe(false);
    expect(refusedPushOptions(['ci.skip', 'x', 'merge_request.create'], [])).toEqual(['ci.skip', 'x', 'merge_request.create']);
    expect(refusedPushOptions(['ci.skip', 'x'], allowed)).toEqual(['x']);
    expect(() => checkPushOptionRules('ci.skip')).toThrow(/pushOptions must be a list/);
    for (const bad of ['*', '', 'a b', 'ci.*=x', '=x', 'a\nb']) expect(() => checkPushOptionRules([bad]), bad).toThrow(/pushOptions\[0\]/);
    expect(() => checkPushOptionRules(Array.from({ length: 51 }, (_, i) => `o${i}`))).toThrow(/at most 50/);
  });
  it('keeps agents to their prefix and off protected refs', () => {
    const rules = { protectedRefs: ['refs/heads/main', 'refs/heads/master', 'refs/heads/release/*'], defaultRef: 'refs/heads/trunk', branchPrefix: 'agent/{handle}/', handle: 'mia' };
    expect(agentRefPrefix(rules)).toBe('refs/heads/agent/mia/');
    const check = (ref: string) => checkPush([{ oldId: Z, newId: A, ref }], rules);
    expect(check('refs/heads/agent/mia/fix-1')).toEqual([]);
    expect(check('refs/heads/main')[0].reason).toMatch(/protected/);
    expect(check('refs/heads/trunk')[0].reason).toMatch(/protected/);
    expect(check('refs/heads/release/1.0')[0].reason).toMatch(/protected/);
    expect(check('refs/heads/agent/vic/fix')[0].reason).toMatch(/agent\/mia\//);
    expect(check('refs/heads/agent/mia/')[0].reason).toBeTruthy();
    expect(check('refs/tags/v1')[0].reason).toMatch(/agent\/mia\//);
    expect(check('refs/heads/agent/mia/../../main')[0].reason).toMatch(/valid/);
    expect(check('HEAD')[0].reason).toMatch(/valid/);
  });
  it('validates ref names', () => {
    for (const ok of ['refs/heads/a', 'refs/heads/agent/mia/fix-1.2']) expect(validRefName(ok), ok).toBe(true);
    for (const bad of ['heads/a', 'refs/heads/a..b', 'refs/heads/a.lock', 'refs/heads/.a', 'refs/heads/a/', 'refs/heads/a b', 'refs/heads/a~1', 'refs/heads/a@{1}', 'refs/heads//a']) expect(validRefName(bad), bad).toBe(false);
  });
  it('describes updates for the audit log', () => {
    expect(describeUpdates([{ oldId: Z, newId: A, ref: 'r1' }, { oldId: A, newId: B, ref: 'r2' }, { oldId: A, newId: Z, ref: 'r3' }]).map((u) => u.op)).toEqual(['create', 'update', 'delete']);
  });
  it('answers a refusal in receive-pack form, in side-band when asked', () => {
    const cmds = [{ oldId: A, newId: B, ref: 'refs/heads/main' }];
    const plain = refusePushResponse(cmds, [{ ref: 'refs/heads/main', reason: 'protected ref' }], ['report-status'], 'no');
    expect(plain.toString()).toBe('000eunpack ok\n0025ng refs/heads/main protected ref\n0000');
    const banded = refusePushResponse(cmds, [{ ref: 'refs/heads/main', reason: 'protected ref' }], ['report-status', 'side-band-64k'], 'refs/heads/main: protected ref');
    const text = banded.toString('latin1');
    expect(text).toContain('\x02agentws: refs/heads/main: protected ref\n');
    expect(text).toContain('\x01000eunpack ok\n');
    expect(text.endsWith('0000')).toBe(true);
  });
  it('finds the default branch in an advertisement', () => {
    const adv = Buffer.concat([pkt('# service=git-upload-pack\n'), Buffer.from('0000'), pkt(`${A} HEAD\0multi_ack symref=HEAD:refs/heads/trunk agent=git/2\n`)]);
    expect(defaultRefOf(adv)).toBe('refs/heads/trunk');
    expect(defaultRefOf(Buffer.from('0000'))).toBeNull();
  });
});

describe('configuration', () => {
  it('checks base URLs', () => {
    expect(normaliseBaseUrl('https://github.com/')).toBe('https://github.com');
    expect(normaliseBaseUrl('https://git.example.com/gitlab')).toBe('https://git.example.com/gitlab');
    expect(() => normaliseBaseUrl('ssh://github.com')).toThrow(/http/);
    expect(() => normaliseBaseUrl('https://user:tok@github.com')).toThrow(/credentials/);
    expect(() => normaliseBaseUrl('https://github.com/?x=1')).toThrow(/query/);
    expect(() => normaliseBaseUrl('nope')).toThrow(/not a URL/);
  });
  it('writes a git config that maps hosts to the gateway and holds no host credential', () => {
    const text = sandboxGitConfig([{ name: 'github', baseUrl: 'https://github.com' }], 'llm.agentws.internal', 'runtime-cred');
    expect(text).toContain('[url "http://llm.agentws.internal/git/github/"]\n\tinsteadOf = "https://github.com/"');
    expect(text).toContain('[http "http://llm.agentws.internal/git/"]\n\textraHeader = "Authorization: Bearer runtime-cred"');
    expect(sandboxGitConfig([], 'llm.agentws.internal', 'x')).toBe('');
  });
});
