import type { CodeHostKind, RepoRef } from './codehost-contract.js';

/**
 * The REST calls a code-host run makes to GitHub, GitLab and Gitea, as each documents them: the request (method,
 * path under the API base, JSON body) and the reading of the answer. Pure, so every shape is unit-tested
 * (test/unit/codehost-api-fns.test.ts) and the fake host (test/fixtures/code-host-api.ts) is written from
 * the same documentation, not from this file.
 *
 * - GitHub REST (docs.github.com/rest): issues, issue comments, reactions, pulls, branches.
 * - GitLab REST v4 (docs.gitlab.com/api): projects by numeric id or URL-encoded path, issues and merge
 *   requests by `iid`, notes, award emoji, repository branches.
 * - Gitea API v1 (its swagger): the GitHub-like paths, reactions on issues and issue comments.
 */

export interface HostRequest {
  method: 'GET' | 'POST';
  /** Path and query under the API base (starts with `/`). */
  path: string;
  body?: Record<string, unknown>;
}

type Target = { type: 'issue' | 'pull_request'; number: number };

/** The API base of a host: GitHub's own (api.github.com, or `<origin>/api/v3` for Enterprise Server), GitLab `/api/v4`, Gitea `/api/v1`. */
export function apiBaseOf(kind: CodeHostKind, baseUrl: string, githubAppApiUrl?: string | null): string {
  const base = baseUrl.replace(/\/+$/, '');
  if (kind === 'gitlab') return `${base}/api/v4`;
  if (kind === 'gitea') return `${base}/api/v1`;
  if (githubAppApiUrl) return githubAppApiUrl.replace(/\/+$/, '');
  const u = new URL(base);
  return u.hostname === 'github.com' || u.hostname === 'www.github.com' ? 'https://api.github.com' : `${u.origin}/api/v3`;
}

/**
 * The token inside the git gateway's `Authorization` (git-credentials.ts forAgent gives git's Basic
 * `user:token`; the REST APIs want the token alone, each in its own header). Null when it is not one.
 */
export function tokenOfAuthorization(authorization: string): string | null {
  const m = /^(Basic|Bearer|token)\s+(\S+)$/i.exec(authorization.trim());
  if (!m) return null;
  if (m[1].toLowerCase() !== 'basic') return m[2];
  const decoded = Buffer.from(m[2], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const token = colon >= 0 ? decoded.slice(colon + 1) : '';
  return token || null;
}

/** The headers each host documents for a token: GitHub `Bearer` + its media type, GitLab `Bearer` (OAuth and personal tokens alike), Gitea `token`. */
export function authHeaders(kind: CodeHostKind, token: string): Record<string, string> {
  if (kind === 'github') return { authorization: `Bearer ${token}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' };
  if (kind === 'gitlab') return { authorization: `Bearer ${token}`, accept: 'application/json' };
  return { authorization: `token ${token}`, accept: 'application/json' };
}

const seg = (s: string) => encodeURIComponent(s);
/** `owner/name` (GitHub, Gitea): each part encoded, the slash kept. */
function repoPath(repo: string): string {
  const parts = repo.split('/');
  if (parts.length !== 2 || parts.some((p) => !p)) throw new Error(`not an owner/name repository: ${JSON.stringify(repo)}`);
  return `/repos/${parts.map(seg).join('/')}`;
}
/** GitLab: the numeric project id, else the URL-encoded full path (both documented as `:id`). */
function project(ref: RepoRef): string {
  return `/projects/${ref.projectId !== null && ref.projectId !== undefined ? String(ref.projectId) : seg(ref.repo)}`;
}
/** A branch in a path: GitLab wants it encoded whole; GitHub and Gitea take its slashes as they are. */
function branchPath(kind: CodeHostKind, branch: string): string {
  // A `.` or `..` segment would be resolved away by the URL parser (git refuses such names anyway).
  if (!branch || branch.split('/').some((p) => p === '' || p === '.' || p === '..')) throw new Error(`not a branch name: ${JSON.stringify(branch.slice(0, 100))}`);
  return kind === 'gitlab' ? seg(branch) : branch.split('/').map(seg).join('/');
}
const glNoteable = (t: Target) => (t.type === 'pull_request' ? 'merge_requests' : 'issues');
const num = (n: number) => {
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`not an issue number: ${n}`);
  return String(n);
};

export function getIssueRequest(kind: CodeHostKind, ref: RepoRef, number: number): HostRequest {
  if (kind === 'gitlab') return { method: 'GET', path: `${project(ref)}/issues/${num(number)}` };
  return { method: 'GET', path: `${repoPath(ref.repo)}/issues/${num(number)}` };
}

export function commentRequest(kind: CodeHostKind, ref: RepoRef, target: Target, body: string): HostRequest {
  if (kind === 'gitlab') return { method: 'POST', path: `${project(ref)}/${glNoteable(target)}/${num(target.number)}/notes`, body: { body } };
  // GitHub and Gitea: a pull request's conversation is its issue's comments.
  return { method: 'POST', path: `${repoPath(ref.repo)}/issues/${num(target.number)}/comments`, body: { body } };
}

/**
 * A reaction: on the comment, else on the issue/pull request itself. GitHub has two kinds of comment on a
 * pull request (conversation: issue comments; review: pull comments); `review` picks the second.
 */
export function reactRequest(kind: CodeHostKind, ref: RepoRef, target: Target, commentId: string | null, reaction: 'eyes' | 'rocket', o: { review?: boolean } = {}): HostRequest {
  if (commentId !== null && !/^[0-9]{1,20}$/.test(commentId)) throw new Error(`not a comment id: ${JSON.stringify(commentId)}`);
  if (kind === 'gitlab') {
    const on = `${project(ref)}/${glNoteable(target)}/${num(target.number)}`;
    return { method: 'POST', path: commentId ? `${on}/notes/${commentId}/award_emoji` : `${on}/award_emoji`, body: { name: reaction } };
  }
  const r = repoPath(ref.repo);
  if (!commentId) return { method: 'POST', path: `${r}/issues/${num(target.number)}/reactions`, body: { content: reaction } };
  if (kind === 'github' && o.review) return { method: 'POST', path: `${r}/pulls/comments/${commentId}/reactions`, body: { content: reaction } };
  return { method: 'POST', path: `${r}/issues/comments/${commentId}/reactions`, body: { content: reaction } };
}

export function openPullRequestRequest(kind: CodeHostKind, ref: RepoRef, pr: { head: string; base: string; title: string; body: string; draft: boolean }): HostRequest {
  if (kind === 'gitlab') {
    // GitLab marks a draft by its title's prefix.
    const title = pr.draft && !/^(draft:|\[draft\])/i.test(pr.title) ? `Draft: ${pr.title}` : pr.title;
    return { method: 'POST', path: `${project(ref)}/merge_requests`, body: { source_branch: pr.head, target_branch: pr.base, title, description: pr.body } };
  }
  if (kind === 'gitea') return { method: 'POST', path: `${repoPath(ref.repo)}/pulls`, body: { head: pr.head, base: pr.base, title: pr.title, body: pr.body } };
  return { method: 'POST', path: `${repoPath(ref.repo)}/pulls`, body: { title: pr.title, head: pr.head, base: pr.base, body: pr.body, draft: pr.draft } };
}

/** The open pull requests of a head branch (GitHub filters by `owner:branch`, GitLab by source branch, Gitea lists open ones: filtered by parsePullRequestList). */
export function findPullRequestRequest(kind: CodeHostKind, ref: RepoRef, head: string): HostRequest {
  if (kind === 'gitlab') return { method: 'GET', path: `${project(ref)}/merge_requests?source_branch=${seg(head)}&state=opened` };
  if (kind === 'gitea') return { method: 'GET', path: `${repoPath(ref.repo)}/pulls?state=open&limit=50` };
  const owner = ref.repo.split('/')[0];
  return { method: 'GET', path: `${repoPath(ref.repo)}/pulls?head=${seg(`${owner}:${head}`)}&state=open` };
}

/** One pull request (GitHub, Gitea `/pulls/:n`; GitLab the merge request by `iid`). */
export function getPullRequestRequest(kind: CodeHostKind, ref: RepoRef, number: number): HostRequest {
  if (kind === 'gitlab') return { method: 'GET', path: `${project(ref)}/merge_requests/${num(number)}` };
  return { method: 'GET', path: `${repoPath(ref.repo)}/pulls/${num(number)}` };
}

export function branchRequest(kind: CodeHostKind, ref: RepoRef, branch: string): HostRequest {
  if (kind === 'gitlab') return { method: 'GET', path: `${project(ref)}/repository/branches/${branchPath(kind, branch)}` };
  return { method: 'GET', path: `${repoPath(ref.repo)}/branches/${branchPath(kind, branch)}` };
}

// ---------------------------------------------------------------- answers

const obj = (j: unknown): Record<string, any> => (j && typeof j === 'object' && !Array.isArray(j) ? (j as Record<string, any>) : {});
const str = (v: unknown) => (typeof v === 'string' ? v : '');
const bad = (what: string) => new Error(`the host's answer has no ${what}`);

export function parseIssue(kind: CodeHostKind, json: unknown): { title: string; body: string; url: string; state: string } {
  const j = obj(json);
  if (typeof j.title !== 'string') throw bad('title');
  // GitLab calls the body `description` and the page `web_url`.
  return kind === 'gitlab'
    ? { title: j.title, body: str(j.description), url: str(j.web_url), state: str(j.state) }
    : { title: j.title, body: str(j.body), url: str(j.html_url), state: str(j.state) };
}

/** A created comment: GitLab's note has no page address of its own; it is the noteable's with `#note_<id>`. */
export function parseComment(kind: CodeHostKind, json: unknown, webBase: string, ref: RepoRef, target: Target): { id: string; url: string } {
  const j = obj(json);
  if (typeof j.id !== 'number' && typeof j.id !== 'string') throw bad('comment id');
  const id = String(j.id);
  if (kind === 'gitlab') return { id, url: `${webBase.replace(/\/+$/, '')}/${ref.repo}/-/${target.type === 'pull_request' ? 'merge_requests' : 'issues'}/${target.number}#note_${id}` };
  return { id, url: str(j.html_url) };
}

export function parsePullRequest(kind: CodeHostKind, json: unknown): { number: number; url: string } {
  const j = obj(json);
  const n = kind === 'gitlab' ? j.iid : j.number;
  if (typeof n !== 'number') throw bad(kind === 'gitlab' ? 'merge request iid' : 'pull request number');
  return { number: n, url: str(kind === 'gitlab' ? j.web_url : j.html_url) };
}

/** The first open pull request of `head` in the list (Gitea answers every open one: its head is compared here, same repository only). */
export function parsePullRequestList(kind: CodeHostKind, json: unknown, ref: RepoRef, head: string): { number: number; url: string } | null {
  if (!Array.isArray(json)) throw bad('list');
  for (const item of json) {
    const j = obj(item);
    if (kind === 'gitlab') {
      if (j.source_branch === head && (ref.projectId === null || j.source_project_id === undefined || j.source_project_id === ref.projectId)) return parsePullRequest(kind, j);
    } else if (kind === 'gitea') {
      const h = obj(j.head);
      const sameRepo = !h.repo || str(obj(h.repo).full_name).toLowerCase() === ref.repo.toLowerCase();
      if (h.ref === head && sameRepo) return parsePullRequest(kind, j);
    } else {
      const h = obj(j.head);
      if (h.ref === head) return parsePullRequest(kind, j);
    }
  }
  return null;
}

/**
 * A pull request's head and whether it is a fork's: GitHub and Gitea `head.ref`, `head.sha` and
 * `head.repo.full_name` (another repository, or none left: a fork); GitLab `source_branch`, `sha` and
 * `source_project_id` against `target_project_id`.
 */
export function parsePullRequestHead(kind: CodeHostKind, json: unknown, ref: RepoRef): { head: { ref: string; sha: string }; fromFork: boolean } {
  const j = obj(json);
  const sha40 = (v: unknown) => (typeof v === 'string' && /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(v) ? v : null);
  if (kind === 'gitlab') {
    const sha = sha40(j.sha);
    if (typeof j.source_branch !== 'string' || !j.source_branch || !sha) throw bad('merge request source branch');
    const fromFork = j.source_project_id === undefined || j.target_project_id === undefined || j.source_project_id !== j.target_project_id;
    return { head: { ref: j.source_branch, sha }, fromFork };
  }
  const h = obj(j.head);
  const sha = sha40(h.sha);
  if (typeof h.ref !== 'string' || !h.ref || !sha) throw bad('pull request head');
  const headRepo = str(obj(h.repo).full_name);
  return { head: { ref: h.ref, sha }, fromFork: !headRepo || headRepo.toLowerCase() !== ref.repo.toLowerCase() };
}

/** A branch's head commit: GitHub `commit.sha`, GitLab and Gitea `commit.id`. */
export function parseBranchHead(kind: CodeHostKind, json: unknown): string {
  const c = obj(obj(json).commit);
  const sha = kind === 'github' ? c.sha : c.id;
  if (typeof sha !== 'string' || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(sha)) throw bad('branch commit');
  return sha;
}

/** The host's own words about a failure (GitHub/Gitea `message`, GitLab `message` or `error`), trimmed; never more than 300 characters. */
export function hostMessage(status: number, text: string): string {
  let said = '';
  try {
    const j = obj(JSON.parse(text));
    const m = j.message ?? j.error;
    said = typeof m === 'string' ? m : m ? JSON.stringify(m) : '';
  } catch {
    said = text;
  }
  said = said.replace(/\s+/g, ' ').trim().slice(0, 300);
  return `HTTP ${status}${said ? `: ${said}` : ''}`;
}
