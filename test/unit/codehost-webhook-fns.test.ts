import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CodeHostKind } from '../../src/core/codehost/codehost-contract.js';
import {
  deliveryIdOf,
  eventOf,
  headerOf,
  mentionedText,
  parseDelivery,
  rateLimited,
  RATE_PER_PERSON_REPO_HOUR,
  RATE_PER_REPO_HOUR,
  refusalText,
  repoAllowed,
  storable,
  testDeliveryHeaders,
  usableEmail,
  verifyDelivery,
} from '../../src/core/codehost/codehost-webhook-fns.js';
import { deliveryFor, giteaDelivery, githubDelivery, githubPing, gitlabDelivery, resigned, type BuiltDelivery } from '../fixtures/code-host-deliveries.js';

const SECRET = 'whsec-0123456789abcdef0123456789abcdef';
const KINDS: CodeHostKind[] = ['github', 'gitlab', 'gitea'];
const CFG = { mention: '@agent', label: 'agent' };
const raw = (d: Pick<BuiltDelivery, 'body'>) => Buffer.from(d.body);
const parse = (d: BuiltDelivery, cfg = CFG) => parseDelivery(d.kind, eventOf(d.kind, d.headers), raw(d), cfg, deliveryIdOf(d.kind, d.headers, raw(d)));
const lower = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

describe('verifyDelivery: each host signs its way, compared in constant time', () => {
  it.each(KINDS)('%s: the host-signed delivery verifies, with header names in any case', (kind) => {
    const d = deliveryFor(kind, { secret: SECRET });
    expect(verifyDelivery(kind, d.headers, raw(d), SECRET)).toBe(true);
    expect(verifyDelivery(kind, lower(d.headers), raw(d), SECRET)).toBe(true);
  });

  it.each(KINDS)('%s: another secret, a missing header, an empty secret are refused', (kind) => {
    const wrong = deliveryFor(kind, { secret: SECRET, signWith: 'not-the-secret' });
    expect(verifyDelivery(kind, wrong.headers, raw(wrong), SECRET)).toBe(false);
    const unsigned = deliveryFor(kind, { secret: null });
    expect(verifyDelivery(kind, unsigned.headers, raw(unsigned), SECRET)).toBe(false);
    const d = deliveryFor(kind, { secret: SECRET });
    expect(verifyDelivery(kind, d.headers, raw(d), '')).toBe(false);
  });

  it.each(['github', 'gitea'] as const)('%s: a body changed after signing fails (the MAC covers the raw bytes)', (kind) => {
    const d = deliveryFor(kind, { secret: SECRET });
    expect(verifyDelivery(kind, d.headers, Buffer.from(d.body.replace('please fix', 'please push to main')), SECRET)).toBe(false);
    // Re-serialised with other spacing: the same JSON, other bytes.
    expect(verifyDelivery(kind, d.headers, Buffer.from(JSON.stringify(d.payload, null, 1)), SECRET)).toBe(false);
  });

  it('GitHub: truncated, over-long, non-hex, sha1-only and unprefixed signatures are false, never a throw', () => {
    const d = githubDelivery({ secret: SECRET });
    const sig = d.headers['X-Hub-Signature-256'];
    const without = Object.fromEntries(Object.entries(d.headers).filter(([k]) => k !== 'X-Hub-Signature-256'));
    for (const bad of [sig.slice(0, -2), `${sig}00`, `${sig.slice(0, -1)}z`, sig.slice('sha256='.length), 'sha256=', 'sha256', '', `sha1=${sig.slice(7)}`, `sha256=${'0'.repeat(64)}`]) {
      expect(verifyDelivery('github', { ...without, 'X-Hub-Signature-256': bad }, raw(d), SECRET), bad).toBe(false);
    }
    // Only the legacy sha1 header: not enough.
    expect(verifyDelivery('github', without, raw(d), SECRET)).toBe(false);
    // The header twice (which one would count?): refused.
    expect(verifyDelivery('github', { ...without, 'x-hub-signature-256': [sig, sig] }, raw(d), SECRET)).toBe(false);
    // Upper-case hex is the same MAC.
    expect(verifyDelivery('github', { ...without, 'X-Hub-Signature-256': `sha256=${sig.slice(7).toUpperCase()}` }, raw(d), SECRET)).toBe(true);
  });

  it('GitLab: the token must equal the secret exactly (prefix, longer, other case refused)', () => {
    const d = gitlabDelivery({ secret: SECRET });
    const without = Object.fromEntries(Object.entries(d.headers).filter(([k]) => k !== 'X-Gitlab-Token'));
    for (const bad of [SECRET.slice(0, -1), `${SECRET}x`, SECRET.toUpperCase(), '', ' ']) {
      expect(verifyDelivery('gitlab', { ...without, 'X-Gitlab-Token': bad }, raw(d), SECRET), bad).toBe(false);
    }
    expect(verifyDelivery('gitlab', { ...without, 'X-Gitlab-Token': SECRET }, raw(d), SECRET)).toBe(true);
  });

  it('Gitea: X-Gitea-Signature decides when present; its X-Hub-Signature-256 counts only when it is the one present', () => {
    const d = giteaDelivery({ secret: SECRET });
    const rest = Object.fromEntries(Object.entries(d.headers).filter(([k]) => !/signature/i.test(k)));
    const gitea = d.headers['X-Gitea-Signature'];
    const hub = d.headers['X-Hub-Signature-256'];
    expect(gitea).toBe(createHmac('sha256', SECRET).update(d.body).digest('hex'));
    expect(verifyDelivery('gitea', { ...rest, 'X-Gitea-Signature': gitea }, raw(d), SECRET)).toBe(true);
    expect(verifyDelivery('gitea', { ...rest, 'X-Hub-Signature-256': hub }, raw(d), SECRET)).toBe(true);
    // A wrong Gitea signature is not rescued by a right hub one.
    expect(verifyDelivery('gitea', { ...rest, 'X-Gitea-Signature': '0'.repeat(64), 'X-Hub-Signature-256': hub }, raw(d), SECRET)).toBe(false);
    expect(verifyDelivery('gitea', { ...rest, 'X-Gitea-Signature': gitea.slice(0, 40) }, raw(d), SECRET)).toBe(false);
    expect(verifyDelivery('gitea', { ...rest, 'X-Gitea-Signature': `sha256=${gitea}` }, raw(d), SECRET)).toBe(false);
  });

  it('a GitHub-signed delivery is not a GitLab one (the host kind decides the rule)', () => {
    const d = githubDelivery({ secret: SECRET });
    expect(verifyDelivery('gitlab', d.headers, raw(d), SECRET)).toBe(false);
    const l = gitlabDelivery({ secret: SECRET });
    expect(verifyDelivery('github', l.headers, raw(l), SECRET)).toBe(false);
  });

  it.each(KINDS)("%s: the service's own test delivery verifies as the host's would", (kind) => {
    const body = Buffer.from('{"zen":"test"}');
    const h = testDeliveryHeaders(kind, SECRET, body, 'test-1');
    expect(verifyDelivery(kind, h, body, SECRET)).toBe(true);
    expect(verifyDelivery(kind, h, body, `${SECRET}x`)).toBe(false);
    expect(eventOf(kind, h)).toBe('ping');
    expect(deliveryIdOf(kind, h, body)).toBe('test-1');
    expect(parseDelivery(kind, 'ping', body, CFG)).toEqual({ ignored: kind === 'github' ? 'ping' : 'event:ping' });
  });
});

describe('deliveryIdOf and eventOf', () => {
  it('takes each host\'s delivery header; GitLab prefers Idempotency-Key (the same across retries)', () => {
    expect(deliveryIdOf('github', githubDelivery({ secret: SECRET, deliveryId: 'gh-1' }).headers, Buffer.from('{}'))).toBe('gh-1');
    expect(deliveryIdOf('gitea', giteaDelivery({ secret: SECRET, deliveryId: 'gt-1' }).headers, Buffer.from('{}'))).toBe('gt-1');
    const l = gitlabDelivery({ secret: SECRET, deliveryId: 'gl-1' });
    expect(deliveryIdOf('gitlab', { ...l.headers, 'Idempotency-Key': 'idem-1' }, raw(l))).toBe('idem-1');
    expect(deliveryIdOf('gitlab', gitlabDelivery({ secret: SECRET, deliveryId: 'gl-2', idempotencyKey: false }).headers, raw(l))).toBe('gl-2');
  });

  it('without a usable id, the body\'s hash: the same body is the same delivery, another body another', () => {
    const a = deliveryIdOf('github', {}, Buffer.from('{"a":1}'));
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(deliveryIdOf('github', { 'x-github-delivery': '' }, Buffer.from('{"a":1}'))).toBe(a);
    expect(deliveryIdOf('github', { 'x-github-delivery': 'x'.repeat(201) }, Buffer.from('{"a":1}'))).toBe(a);
    expect(deliveryIdOf('github', { 'x-github-delivery': 'bad id\u0000' }, Buffer.from('{"a":1}'))).toBe(a);
    expect(deliveryIdOf('github', {}, Buffer.from('{"a":2}'))).not.toBe(a);
    expect(deliveryIdOf('github', { 'x-github-delivery': 'x'.repeat(200) }, Buffer.from('{}'))).toBe('x'.repeat(200));
  });

  it('reads the event header of the kind; absent or unusable is "unknown"', () => {
    expect(eventOf('github', { 'X-GitHub-Event': 'issue_comment' })).toBe('issue_comment');
    expect(eventOf('gitlab', { 'x-gitlab-event': 'Note Hook' })).toBe('Note Hook');
    expect(eventOf('gitea', { 'X-Gitea-Event': 'issues', 'X-GitHub-Event': 'push' })).toBe('issues');
    expect(eventOf('github', {})).toBe('unknown');
    expect(eventOf('github', { 'x-github-event': 'a'.repeat(101) })).toBe('unknown');
    expect(eventOf('github', { 'x-github-event': 'a\nb' })).toBe('unknown');
    expect(headerOf({ 'X-A': ['1', '2'] }, 'x-a')).toBeUndefined();
    expect(headerOf({ 'X-A': ['1'] }, 'x-a')).toBe('1');
  });
});

describe('parseDelivery: documented payloads of each host give the trigger the fixture describes', () => {
  const cases: Array<[CodeHostKind, 'comment' | 'label' | 'review_comment', 'issue' | 'pull_request']> = [];
  for (const kind of KINDS) for (const via of ['comment', 'label'] as const) for (const target of ['issue', 'pull_request'] as const) cases.push([kind, via, target]);
  cases.push(['github', 'review_comment', 'pull_request']);

  it.each(cases)('%s %s on %s', (kind, via, target) => {
    const d = deliveryFor(kind, { secret: SECRET, via, target, number: 42, comment: '@agent  make the list wrap\n\nand add a test', actor: { login: 'Octo-Dev', id: 777 } });
    const r = parse(d);
    expect(r).toEqual({ trigger: d.trigger });
    if (!('trigger' in r)) return;
    expect(r.trigger.kind).toBe(kind);
    expect(r.trigger.deliveryId).toBe(d.deliveryId);
    expect(r.trigger.target.type).toBe(target);
    expect(r.trigger.target.number).toBe(42);
    expect(r.trigger.actor).toEqual({ login: 'Octo-Dev', id: '777', email: null });
    if (via === 'label') expect(r.trigger.comment).toBeNull();
    else expect(r.trigger.comment?.body).toBe('make the list wrap\n\nand add a test');
    if (kind === 'gitlab') expect(r.trigger.projectId).toBe(4242);
    else expect(r.trigger.projectId).toBeNull();
  });

  it('GitLab groups are kept in the repository path; merge requests carry their head', () => {
    const d = gitlabDelivery({ secret: SECRET, target: 'pull_request', repo: 'acme/tools/deep/widgets', head: { ref: 'fix/wrap', sha: 'c'.repeat(40) } });
    const r = parse(d);
    expect('trigger' in r && r.trigger.repo).toBe('acme/tools/deep/widgets');
    expect('trigger' in r && r.trigger.head).toEqual({ ref: 'fix/wrap', sha: 'c'.repeat(40) });
    expect('trigger' in r && r.trigger.target.url).toBe('https://gitlab.example.com/acme/tools/deep/widgets/-/merge_requests/7');
  });

  it('a pull request from a fork is marked (GitHub review comment and label, GitLab, Gitea label)', () => {
    for (const d of [
      githubDelivery({ secret: SECRET, via: 'review_comment', fork: true }),
      githubDelivery({ secret: SECRET, via: 'label', target: 'pull_request', fork: true }),
      gitlabDelivery({ secret: SECRET, target: 'pull_request', fork: true }),
      gitlabDelivery({ secret: SECRET, via: 'label', target: 'pull_request', fork: true }),
      giteaDelivery({ secret: SECRET, via: 'label', target: 'pull_request', fork: true }),
    ]) {
      const r = parse(d);
      expect('trigger' in r && r.trigger.fromFork, `${d.kind} ${d.event}`).toBe(true);
    }
    // A GitHub fork PR whose head repository was deleted (null) is a fork's too.
    const gone = githubDelivery({ secret: SECRET, via: 'label', target: 'pull_request' });
    gone.payload.pull_request.head.repo = null;
    const r = parse(resigned(gone, SECRET));
    expect('trigger' in r && r.trigger.fromFork).toBe(true);
  });

  it('emails: GitLab [REDACTED] and Gitea noreply placeholders are none; a real one is taken', () => {
    const redacted = parse(gitlabDelivery({ secret: SECRET }));
    expect('trigger' in redacted && redacted.trigger.actor.email).toBeNull();
    const gl = parse(gitlabDelivery({ secret: SECRET, actor: { login: 'mia', email: 'mia@corp.example' } }));
    expect('trigger' in gl && gl.trigger.actor.email).toBe('mia@corp.example');
    const placeholder = parse(giteaDelivery({ secret: SECRET }));
    expect('trigger' in placeholder && placeholder.trigger.actor.email).toBeNull();
    const gt = parse(giteaDelivery({ secret: SECRET, actor: { login: 'mia', email: 'Mia@Corp.example' } }));
    expect('trigger' in gt && gt.trigger.actor.email).toBe('Mia@Corp.example');
    expect(usableEmail('[REDACTED]')).toBeNull();
    expect(usableEmail('a@users.noreply.github.com')).toBeNull();
    expect(usableEmail('a b@c.d')).toBeNull();
    expect(usableEmail(42)).toBeNull();
    expect(usableEmail('a@b.c')).toBe('a@b.c');
  });
});

describe('parseDelivery: what is not a request is ignored, never thrown', () => {
  it('mention variants: case-insensitive, at the start, followed by space or nothing', () => {
    expect(mentionedText('@agent fix it', '@agent')).toBe('fix it');
    expect(mentionedText('  @AGENT\tfix it  ', '@agent')).toBe('fix it');
    expect(mentionedText('@agent', '@agent')).toBe('');
    expect(mentionedText('@agent\n\nplease', '@agent')).toBe('please');
    expect(mentionedText('@agents fix it', '@agent')).toBeNull();
    expect(mentionedText('@agent-x fix it', '@agent')).toBeNull();
    expect(mentionedText('@agent, fix it', '@agent')).toBeNull();
    expect(mentionedText('please @agent fix it', '@agent')).toBeNull();
    expect(mentionedText('> @agent fix it', '@agent')).toBeNull();
    expect(mentionedText('@age', '@agent')).toBeNull();
    expect(mentionedText('@bot fix', '@bot')).toBe('fix');
    expect(mentionedText('anything', '')).toBeNull();
    for (const kind of KINDS) {
      expect(parse(deliveryFor(kind, { secret: SECRET, comment: 'thanks @agent, looks good' }))).toEqual({ ignored: 'no_mention' });
      expect(parse(deliveryFor(kind, { secret: SECRET, comment: '@Bot do it' }), { mention: '@bot', label: 'agent' })).toMatchObject({ trigger: { comment: { body: 'do it' } } });
    }
  });

  it('another label, or (GitLab) the label already there, is ignored; label names compare case-insensitively', () => {
    for (const kind of KINDS) {
      expect(parse(deliveryFor(kind, { secret: SECRET, via: 'label', label: 'bug-triage' }))).toEqual({ ignored: 'other_label' });
      expect(parse(deliveryFor(kind, { secret: SECRET, via: 'label', label: 'Agent' }))).toHaveProperty('trigger');
    }
    expect(parse(gitlabDelivery({ secret: SECRET, via: 'label', previousLabels: ['agent'] }))).toEqual({ ignored: 'other_label' });
    const noChange = gitlabDelivery({ secret: SECRET, via: 'label' });
    delete noChange.payload.changes.labels;
    expect(parse(resigned(noChange, SECRET))).toEqual({ ignored: 'no_label_change' });
  });

  it('other events and actions: ping, push, edited/deleted comments, unlabeled, GitLab note edits and system notes', () => {
    expect(parse({ ...githubPing(SECRET), trigger: null as never })).toEqual({ ignored: 'ping' });
    expect(parseDelivery('github', 'push', Buffer.from('{"ref":"refs/heads/main"}'), CFG)).toEqual({ ignored: 'event:push' });
    expect(parseDelivery('gitlab', 'Push Hook', Buffer.from('{}'), CFG)).toEqual({ ignored: 'event:Push Hook' });
    expect(parseDelivery('gitea', 'push', Buffer.from('{}'), CFG)).toEqual({ ignored: 'event:push' });
    const edited = githubDelivery({ secret: SECRET });
    edited.payload.action = 'edited';
    expect(parse(resigned(edited, SECRET))).toEqual({ ignored: 'action:edited' });
    const unlabeled = githubDelivery({ secret: SECRET, via: 'label' });
    unlabeled.payload.action = 'unlabeled';
    expect(parse(resigned(unlabeled, SECRET))).toEqual({ ignored: 'action:unlabeled' });
    const giteaCleared = giteaDelivery({ secret: SECRET, via: 'label' });
    giteaCleared.payload.action = 'label_cleared';
    expect(parse(resigned(giteaCleared, SECRET))).toEqual({ ignored: 'action:label_cleared' });
    const noteEdit = gitlabDelivery({ secret: SECRET });
    noteEdit.payload.object_attributes.action = 'update';
    expect(parse(resigned(noteEdit, SECRET))).toEqual({ ignored: 'action:update' });
    const system = gitlabDelivery({ secret: SECRET });
    system.payload.object_attributes.system = true;
    expect(parse(resigned(system, SECRET))).toEqual({ ignored: 'system_note' });
    const commitNote = gitlabDelivery({ secret: SECRET });
    commitNote.payload.object_attributes.noteable_type = 'Commit';
    expect(parse(resigned(commitNote, SECRET))).toEqual({ ignored: 'noteable:Commit' });
    commitNote.payload.object_attributes.noteable_type = 'Snippet\u0000';
    expect(parse(resigned(commitNote, SECRET))).toEqual({ ignored: 'noteable:other' });
    // GitLab's confidential issues name their hooks apart; the same rules apply.
    const confidential = gitlabDelivery({ secret: SECRET });
    expect(parseDelivery('gitlab', 'Confidential Note Hook', raw(confidential), CFG)).toHaveProperty('trigger');
  });

  it('a bot (a GitHub App, the service itself) never triggers', () => {
    expect(parse(githubDelivery({ secret: SECRET, actor: { login: 'agentws[bot]', bot: true } }))).toEqual({ ignored: 'bot' });
    const gl = gitlabDelivery({ secret: SECRET });
    gl.payload.user.bot = true;
    expect(parse(resigned(gl, SECRET))).toEqual({ ignored: 'bot' });
  });

  it('malformed: not JSON, not an object, fields of the wrong type or shape, hostile values', () => {
    for (const kind of KINDS) {
      for (const body of ['', 'not json', '[]', 'null', '"x"', '{"action":', '\u0000\u0001']) {
        expect(parseDelivery(kind, kind === 'gitlab' ? 'Note Hook' : 'issue_comment', Buffer.from(body), CFG), `${kind} ${JSON.stringify(body)}`).toEqual({ ignored: 'malformed' });
      }
    }
    const mutations: Array<[CodeHostKind, (p: any) => void]> = [
      ['github', (p) => (p.repository.full_name = '../../etc/passwd')],
      ['github', (p) => (p.repository.full_name = 'acme')],
      ['github', (p) => (p.repository.full_name = 'acme/widgets.git')],
      ['github', (p) => (p.repository.full_name = { toString: 1 })],
      ['github', (p) => (p.issue.number = -1)],
      ['github', (p) => (p.issue.number = 1.5)],
      ['github', (p) => (p.issue.number = '7')],
      ['github', (p) => (p.issue.number = 2 ** 40)],
      ['github', (p) => (p.issue.html_url = 'javascript:alert(1)')],
      ['github', (p) => (p.comment.html_url = 'data:text/html,x')],
      ['github', (p) => (p.comment.id = 'abc')],
      ['github', (p) => (p.comment.user = { login: '', id: 1 })],
      ['github', (p) => (p.comment.user = { login: 'a\nb', id: 1 })],
      ['github', (p) => (p.comment.body = 12)],
      ['github', (p) => (p.repository = null)],
      ['github', (p) => (p.issue = [])],
      ['github', (p) => (p.repository.default_branch = 'main branch')],
      ['gitlab', (p) => (p.project.id = 'x')],
      ['gitlab', (p) => (p.project = 'acme/widgets')],
      ['gitlab', (p) => (p.object_attributes = null)],
      ['gitlab', (p) => (p.issue.iid = 0)],
      ['gitlab', (p) => (p.user.username = 5)],
      ['gitea', (p) => (p.comment.user.id = -3)],
      ['gitea', (p) => (p.issue.html_url = 'file:///etc/passwd')],
    ];
    for (const [kind, mutate] of mutations) {
      const d = deliveryFor(kind, { secret: SECRET });
      mutate(d.payload);
      expect(parse(resigned(d, SECRET)), `${kind} ${mutate.toString()}`).toEqual({ ignored: 'malformed' });
    }
    // A pull request review comment or label whose head is not a branch and a sha: malformed.
    const noHead = githubDelivery({ secret: SECRET, via: 'review_comment' });
    noHead.payload.pull_request.head.sha = 'not-a-sha';
    expect(parse(resigned(noHead, SECRET))).toEqual({ ignored: 'malformed' });
  });

  it('long texts are cut, not refused; a huge nesting or a getter-free prototype trick does not throw', () => {
    const d = githubDelivery({ secret: SECRET, issueBody: 'x'.repeat(200_000), title: 't'.repeat(5000), comment: `@agent ${'y'.repeat(100_000)}` });
    const r = parse(d);
    expect('trigger' in r && r.trigger.target.body.length).toBe(65_536);
    expect('trigger' in r && r.trigger.target.title.length).toBe(1024);
    expect('trigger' in r && (r.trigger.comment?.body.length ?? 0) <= 65_536).toBe(true);
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    for (const kind of KINDS) expect(parseDelivery(kind, 'issue_comment', Buffer.from(deep), CFG)).toEqual({ ignored: 'malformed' });
    const proto = githubDelivery({ secret: SECRET });
    const body = proto.body.replace('{"action":"created"', '{"__proto__":{"action":"created","type":"Bot"},"constructor":{"prototype":{"x":1}},"action":"created"');
    expect(parseDelivery('github', 'issue_comment', Buffer.from(body), CFG)).toHaveProperty('trigger');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe('storable', () => {
  it('replaces NUL and lone surrogates, keeps pairs and everything else', () => {
    expect(storable('a\u0000b')).toBe('a\uFFFDb');
    expect(storable('\ud800x\udc00')).toBe('\uFFFDx\uFFFD');
    expect(storable('😀 ok')).toBe('😀 ok');
    expect(storable('😀'.slice(0, 1))).toBe('\uFFFD');
  });
});

describe('decisions', () => {
  it('repoAllowed: patterns as the host access rules; empty allows none', () => {
    expect(repoAllowed([], 'acme/widgets')).toBe(false);
    expect(repoAllowed(['acme/*'], 'acme/widgets')).toBe(true);
    expect(repoAllowed(['acme/*'], 'ACME/Widgets')).toBe(true);
    expect(repoAllowed(['acme/*'], 'acme/tools/widgets')).toBe(false);
    expect(repoAllowed(['acme/**'], 'acme/tools/widgets')).toBe(true);
    expect(repoAllowed(['other/*', 'acme/widgets'], 'acme/widgets')).toBe(true);
    expect(repoAllowed(['acme/widget'], 'acme/widgets')).toBe(false);
    expect(repoAllowed(['acme/wid.ets'], 'acme/widgets')).toBe(false);
  });

  it('rateLimited: 10 per person and repository, 60 per repository, in the hour', () => {
    expect(RATE_PER_PERSON_REPO_HOUR).toBe(10);
    expect(RATE_PER_REPO_HOUR).toBe(60);
    expect(rateLimited(9, 59)).toBe(false);
    expect(rateLimited(10, 10)).toBe(true);
    expect(rateLimited(0, 60)).toBe(true);
  });

  it('refusal texts name the reason and the fix, and never start with a mention', () => {
    const t = { login: 'agent', mention: '@agent', label: 'agent' };
    for (const reason of ['unmapped', 'deactivated', 'no_permission', 'rate_limited', 'fork'] as const) {
      const text = refusalText(reason, t);
      expect(text.startsWith('Sorry')).toBe(true);
      expect(mentionedText(text, '@agent')).toBeNull();
    }
    expect(refusalText('unmapped', t)).toMatch(/Connect your account/);
    expect(refusalText('no_permission', t)).toMatch(/agents\.code_host/);
    expect(refusalText('rate_limited', t)).toMatch(/later/);
  });
});
