import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiBaseOf,
  authHeaders,
  branchRequest,
  commentRequest,
  findPullRequestRequest,
  getIssueRequest,
  getPullRequestRequest,
  hostMessage,
  openPullRequestRequest,
  parseBranchHead,
  parseComment,
  parseIssue,
  parsePullRequest,
  parsePullRequestHead,
  parsePullRequestList,
  reactRequest,
  tokenOfAuthorization,
} from '../../src/core/codehost/codehost-api-fns.js';
import { createCodeHostApi } from '../../src/core/codehost/codehost-api.js';
import type { CodeHostKind } from '../../src/core/codehost/codehost-contract.js';
import { startCodeHostApi, type CodeHostApiServer } from '../fixtures/code-host-api.js';

const gh = { repo: 'acme/web', projectId: null };
const gl = { repo: 'group/sub/web', projectId: 42 };
const SHA = 'a'.repeat(40);

describe('code host REST shapes', () => {
  it('finds each API base and header as the hosts document them', () => {
    expect(apiBaseOf('github', 'https://github.com')).toBe('https://api.github.com');
    expect(apiBaseOf('github', 'https://ghe.example.com/')).toBe('https://ghe.example.com/api/v3');
    expect(apiBaseOf('github', 'https://github.com', 'https://api.example/')).toBe('https://api.example');
    expect(apiBaseOf('gitlab', 'https://gitlab.example.com/')).toBe('https://gitlab.example.com/api/v4');
    expect(apiBaseOf('gitea', 'https://gitea.example.com')).toBe('https://gitea.example.com/api/v1');
    expect(authHeaders('github', 't')).toMatchObject({ authorization: 'Bearer t', accept: 'application/vnd.github+json' });
    expect(authHeaders('gitlab', 't').authorization).toBe('Bearer t');
    expect(authHeaders('gitea', 't').authorization).toBe('token t');
  });

  it('takes the token out of the git gateway authorization (Basic user:token), and nothing else', () => {
    expect(tokenOfAuthorization(`Basic ${Buffer.from('x-access-token:ghs_abc').toString('base64')}`)).toBe('ghs_abc');
    expect(tokenOfAuthorization(`Basic ${Buffer.from('oauth2:tok:en').toString('base64')}`)).toBe('tok:en');
    expect(tokenOfAuthorization('Bearer xyz')).toBe('xyz');
    expect(tokenOfAuthorization(`Basic ${Buffer.from('nocolon').toString('base64')}`)).toBeNull();
    expect(tokenOfAuthorization('Digest abc')).toBeNull();
  });

  it('builds GitHub requests', () => {
    expect(getIssueRequest('github', gh, 7)).toEqual({ method: 'GET', path: '/repos/acme/web/issues/7' });
    expect(commentRequest('github', gh, { type: 'pull_request', number: 3 }, 'hi')).toEqual({ method: 'POST', path: '/repos/acme/web/issues/3/comments', body: { body: 'hi' } });
    expect(reactRequest('github', gh, { type: 'issue', number: 7 }, '99', 'eyes')).toEqual({ method: 'POST', path: '/repos/acme/web/issues/comments/99/reactions', body: { content: 'eyes' } });
    expect(reactRequest('github', gh, { type: 'pull_request', number: 7 }, '99', 'eyes', { review: true }).path).toBe('/repos/acme/web/pulls/comments/99/reactions');
    expect(reactRequest('github', gh, { type: 'issue', number: 7 }, null, 'rocket')).toEqual({ method: 'POST', path: '/repos/acme/web/issues/7/reactions', body: { content: 'rocket' } });
    expect(openPullRequestRequest('github', gh, { head: 'agent/mia/7', base: 'main', title: 'T', body: 'B', draft: true })).toEqual({
      method: 'POST', path: '/repos/acme/web/pulls', body: { title: 'T', head: 'agent/mia/7', base: 'main', body: 'B', draft: true },
    });
    expect(findPullRequestRequest('github', gh, 'agent/mia/7').path).toBe('/repos/acme/web/pulls?head=acme%3Aagent%2Fmia%2F7&state=open');
    expect(branchRequest('github', gh, 'agent/mia/7').path).toBe('/repos/acme/web/branches/agent/mia/7');
  });

  it('builds GitLab requests: projects by id (else the encoded path), iids, notes, award emoji, drafts by title', () => {
    expect(getIssueRequest('gitlab', gl, 7).path).toBe('/projects/42/issues/7');
    expect(getIssueRequest('gitlab', { repo: 'group/sub/web', projectId: null }, 7).path).toBe('/projects/group%2Fsub%2Fweb/issues/7');
    expect(commentRequest('gitlab', gl, { type: 'pull_request', number: 3 }, 'hi')).toEqual({ method: 'POST', path: '/projects/42/merge_requests/3/notes', body: { body: 'hi' } });
    expect(reactRequest('gitlab', gl, { type: 'issue', number: 7 }, '5', 'eyes')).toEqual({ method: 'POST', path: '/projects/42/issues/7/notes/5/award_emoji', body: { name: 'eyes' } });
    expect(reactRequest('gitlab', gl, { type: 'pull_request', number: 7 }, null, 'eyes').path).toBe('/projects/42/merge_requests/7/award_emoji');
    expect(openPullRequestRequest('gitlab', gl, { head: 'agent/mia/7', base: 'main', title: 'T', body: 'B', draft: true })).toEqual({
      method: 'POST', path: '/projects/42/merge_requests', body: { source_branch: 'agent/mia/7', target_branch: 'main', title: 'Draft: T', description: 'B' },
    });
    expect(openPullRequestRequest('gitlab', gl, { head: 'h', base: 'main', title: 'Draft: T', body: '', draft: true }).body!.title).toBe('Draft: T');
    expect(findPullRequestRequest('gitlab', gl, 'agent/mia/7').path).toBe('/projects/42/merge_requests?source_branch=agent%2Fmia%2F7&state=opened');
    expect(branchRequest('gitlab', gl, 'agent/mia/7').path).toBe('/projects/42/repository/branches/agent%2Fmia%2F7');
  });

  it('builds Gitea requests', () => {
    expect(commentRequest('gitea', gh, { type: 'issue', number: 3 }, 'hi').path).toBe('/repos/acme/web/issues/3/comments');
    expect(reactRequest('gitea', gh, { type: 'issue', number: 3 }, '8', 'eyes')).toEqual({ method: 'POST', path: '/repos/acme/web/issues/comments/8/reactions', body: { content: 'eyes' } });
    expect(openPullRequestRequest('gitea', gh, { head: 'h', base: 'main', title: 'T', body: 'B', draft: false })).toEqual({ method: 'POST', path: '/repos/acme/web/pulls', body: { head: 'h', base: 'main', title: 'T', body: 'B' } });
    expect(findPullRequestRequest('gitea', gh, 'h').path).toBe('/repos/acme/web/pulls?state=open&limit=50');
  });

  it('refuses hostile names in paths instead of building them', () => {
    expect(() => getIssueRequest('github', { repo: '../../x', projectId: null }, 1)).toThrow();
    expect(() => getIssueRequest('github', { repo: 'a/b/c', projectId: null }, 1)).toThrow();
    expect(() => reactRequest('github', gh, { type: 'issue', number: 1 }, '1/../../x', 'eyes')).toThrow();
    expect(() => getIssueRequest('github', gh, -1)).toThrow();
    expect(getIssueRequest('github', { repo: 'a b/c?d', projectId: null }, 1).path).toBe('/repos/a%20b/c%3Fd/issues/1');
    expect(() => branchRequest('gitea', gh, 'x/../y')).toThrow();
    expect(branchRequest('gitea', gh, 'x/y?z#w').path).toBe('/repos/acme/web/branches/x/y%3Fz%23w');
  });

  it('reads each host\'s answers', () => {
    expect(parseIssue('github', { title: 'T', body: null, html_url: 'u', state: 'open' })).toEqual({ title: 'T', body: '', url: 'u', state: 'open' });
    expect(parseIssue('gitlab', { title: 'T', description: 'D', web_url: 'w', state: 'opened' })).toEqual({ title: 'T', body: 'D', url: 'w', state: 'opened' });
    expect(() => parseIssue('gitea', { message: 'nope' })).toThrow(/title/);
    expect(parseComment('github', { id: 12, html_url: 'c' }, 'https://h', gh, { type: 'issue', number: 1 })).toEqual({ id: '12', url: 'c' });
    expect(parseComment('gitlab', { id: 12 }, 'https://h/', gl, { type: 'pull_request', number: 3 })).toEqual({ id: '12', url: 'https://h/group/sub/web/-/merge_requests/3#note_12' });
    expect(parsePullRequest('gitlab', { iid: 4, id: 999, web_url: 'w' })).toEqual({ number: 4, url: 'w' });
    expect(parsePullRequest('github', { number: 5, html_url: 'h' })).toEqual({ number: 5, url: 'h' });
    expect(parsePullRequestList('gitea', [{ number: 1, html_url: 'a', head: { ref: 'x', repo: { full_name: 'fork/web' } } }, { number: 2, html_url: 'b', head: { ref: 'x', repo: { full_name: 'acme/web' } } }], gh, 'x')).toEqual({ number: 2, url: 'b' });
    expect(parsePullRequestList('github', [], gh, 'x')).toBeNull();
    expect(parsePullRequestList('gitlab', [{ iid: 3, web_url: 'w', source_branch: 'x', source_project_id: 42 }], gl, 'x')).toEqual({ number: 3, url: 'w' });
    expect(parsePullRequestList('gitlab', [{ iid: 3, web_url: 'w', source_branch: 'x', source_project_id: 43 }], gl, 'x')).toBeNull();
    // A pull request's head, and whether it is a fork's (another repository, or none left).
    expect(getPullRequestRequest('github', gh, 7)).toEqual({ method: 'GET', path: '/repos/acme/web/pulls/7' });
    expect(getPullRequestRequest('gitlab', gl, 7)).toEqual({ method: 'GET', path: '/projects/42/merge_requests/7' });
    expect(getPullRequestRequest('gitea', gh, 7)).toEqual({ method: 'GET', path: '/repos/acme/web/pulls/7' });
    expect(parsePullRequestHead('github', { head: { ref: 'feature/x', sha: SHA, repo: { full_name: 'Acme/Web' } } }, gh)).toEqual({ head: { ref: 'feature/x', sha: SHA }, fromFork: false });
    expect(parsePullRequestHead('gitea', { head: { ref: 'x', sha: SHA, repo: { full_name: 'mallory/web' } } }, gh).fromFork).toBe(true);
    expect(parsePullRequestHead('github', { head: { ref: 'x', sha: SHA, repo: null } }, gh).fromFork).toBe(true);
    expect(parsePullRequestHead('gitlab', { source_branch: 'x', sha: SHA, source_project_id: 42, target_project_id: 42 }, gl)).toEqual({ head: { ref: 'x', sha: SHA }, fromFork: false });
    expect(parsePullRequestHead('gitlab', { source_branch: 'x', sha: SHA, source_project_id: 77, target_project_id: 42 }, gl).fromFork).toBe(true);
    expect(() => parsePullRequestHead('github', { head: { ref: 'x', sha: 'nope' } }, gh)).toThrow(/head/);
    expect(parseBranchHead('github', { commit: { sha: SHA } })).toBe(SHA);
    expect(parseBranchHead('gitlab', { commit: { id: SHA } })).toBe(SHA);
    expect(() => parseBranchHead('gitea', { commit: { id: 'not a sha' } })).toThrow();
    expect(hostMessage(422, '{"message":"Validation Failed","errors":[]}')).toBe('HTTP 422: Validation Failed');
    expect(hostMessage(409, '{"message":["Another open merge request"]}')).toBe('HTTP 409: ["Another open merge request"]');
    expect(hostMessage(502, `<html>${'x'.repeat(1000)}</html>`).length).toBeLessThanOrEqual(310);
  });
});

/** The client against the fake host of each kind: the same documented shapes from both sides. */
describe('code host REST client against the loopback host', () => {
  let root: string;
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'agentws-codehost-api-'));
    const bare = join(root, 'acme', 'web.git');
    git(['init', '-q', '--bare', '-b', 'main', bare]);
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    git(['push', '-q', bare, 'main', 'main:refs/heads/agent/mia/1'], seed);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  for (const kind of ['github', 'gitlab', 'gitea'] as CodeHostKind[]) {
    it(`${kind}: reads, comments, reacts, opens and finds a pull request, reads a branch; a bad token is the host's 401`, async () => {
      let host: CodeHostApiServer | null = null;
      try {
        host = await startCodeHostApi({ kind, root, tokens: { 'tok-1': 'mia' } });
        const ref = { repo: 'acme/web', projectId: kind === 'gitlab' ? host.projectId('acme/web') : null };
        const api = createCodeHostApi(kind, apiBaseOf(kind, host.url), 'tok-1', { webBase: host.url });
        const n = host.addIssue('acme/web', { title: 'Fix it', body: 'Please' });
        const asked = host.addComment('acme/web', n, '@agent fix');
        expect(await api.getIssue(ref, n)).toMatchObject({ title: 'Fix it', body: 'Please' });
        await api.react(ref, { type: 'issue', number: n }, String(asked), 'eyes');
        expect(host.reactions).toEqual([expect.objectContaining({ on: 'comment', id: asked, content: 'eyes', account: 'mia' })]);
        const c = await api.comment(ref, { type: 'issue', number: n }, 'Working on it');
        expect(host.comments.find((x) => String(x.id) === c.id)).toMatchObject({ body: 'Working on it', author: 'mia' });
        expect(c.url).toContain(`${n}`);
        expect(await api.findPullRequest(ref, 'agent/mia/1')).toBeNull();
        const pr = await api.openPullRequest(ref, { head: 'agent/mia/1', base: 'main', title: 'Fix it', body: 'Closes', draft: false });
        expect(pr.number).toBeGreaterThan(n);
        expect(await api.findPullRequest(ref, 'agent/mia/1')).toEqual(pr);
        await expect(api.openPullRequest(ref, { head: 'agent/mia/1', base: 'main', title: 'again', body: '', draft: false })).rejects.toThrow(/refused POST .*HTTP (409|422)/);
        expect(await api.branchHead(ref, 'agent/mia/1')).toBe(git(['--git-dir', join(root, 'acme', 'web.git'), 'rev-parse', 'refs/heads/agent/mia/1']));
        expect(await api.branchHead(ref, 'agent/mia/none')).toBeNull();
        // A review comment on a GitHub pull request: its reaction is found under pulls/comments.
        if (kind === 'github') {
          const review = host.addComment('acme/web', pr.number, '@agent more', { review: true });
          await api.react(ref, { type: 'pull_request', number: pr.number }, String(review), 'eyes');
          expect(host.reactions.at(-1)).toMatchObject({ id: review, on: 'comment' });
        }
        const bad = createCodeHostApi(kind, apiBaseOf(kind, host.url), 'tok-wrong', { webBase: host.url });
        const refused = await bad.getIssue(ref, n).catch((e: Error) => e);
        expect(refused).toBeInstanceOf(Error);
        expect((refused as Error).message).toMatch(/HTTP 401/);
        expect((refused as Error).message).not.toContain('tok-wrong');
        expect(host.calls.filter((x) => x.account === null)).toHaveLength(1);
      } finally {
        await host?.close();
      }
    });
  }
});
