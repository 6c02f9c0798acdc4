import { UpstreamError } from '../../kernel/errors.js';
import type { CodeHostApi, CodeHostKind, RepoRef } from './codehost-contract.js';
import {
  authHeaders,
  branchRequest,
  commentRequest,
  findPullRequestRequest,
  getPullRequestRequest,
  parsePullRequestHead,
  getIssueRequest,
  hostMessage,
  openPullRequestRequest,
  parseBranchHead,
  parseComment,
  parseIssue,
  parsePullRequest,
  parsePullRequestList,
  reactRequest,
  type HostRequest,
} from './codehost-api-fns.js';

/** A host call gives up after this (a job retries it; the person waits on the "working on it" answer). */
const CODE_HOST_CALL_TIMEOUT_MS = 10_000;

/**
 * The host's REST API for one credential (codehost-api-fns.ts builds and reads each call). The base URL is
 * the admin's (the git host's address, as the git gateway uses it), so it is not put through the webhook
 * URL guard: an organisation's GitLab is often on a private address. Redirects are refused (as the
 * gateway refuses them): a token is sent only where the admin pointed. The token is never logged nor put
 * in an error.
 */
export function createCodeHostApi(kind: CodeHostKind, apiBase: string, token: string, o: { webBase: string; fetch?: typeof fetch }): CodeHostApi {
  const doFetch = o.fetch ?? fetch;
  const base = apiBase.replace(/\/+$/, '');

  async function call(req: HostRequest, okNotFound = false): Promise<{ status: number; json: unknown }> {
    let res: Response;
    try {
      res = await doFetch(`${base}${req.path}`, {
        method: req.method,
        headers: { ...authHeaders(kind, token), 'user-agent': 'agentws-code-host', ...(req.body ? { 'content-type': 'application/json' } : {}) },
        body: req.body ? JSON.stringify(req.body) : undefined,
        redirect: 'error',
        signal: AbortSignal.timeout(CODE_HOST_CALL_TIMEOUT_MS),
      });
    } catch (err) {
      const why = (err as Error).name === 'TimeoutError' ? `no answer within ${CODE_HOST_CALL_TIMEOUT_MS / 1000} s` : (err as Error).message;
      throw new UpstreamError(`the code host could not be reached (${req.method} ${req.path.split('?')[0]}): ${why}`, { code: 'code_host_unreachable' });
    }
    const text = await res.text();
    if (okNotFound && res.status === 404) return { status: 404, json: null };
    if (res.status < 200 || res.status >= 300) {
      throw new UpstreamError(`the code host refused ${req.method} ${req.path.split('?')[0]} (${hostMessage(res.status, text)})`, { code: 'code_host_error', details: { status: res.status } });
    }
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      throw new UpstreamError(`the code host answered ${req.method} ${req.path.split('?')[0]} with something other than JSON`, { code: 'code_host_error' });
    }
    return { status: res.status, json };
  }

  return {
    async getIssue(ref: RepoRef, number: number) {
      return parseIssue(kind, (await call(getIssueRequest(kind, ref, number))).json);
    },
    async comment(ref, target, body) {
      return parseComment(kind, (await call(commentRequest(kind, ref, target, body))).json, o.webBase, ref, target);
    },
    async react(ref, target, commentId, reaction) {
      // GitHub: a comment on a pull request is a conversation comment (an issue comment) or a review
      // comment; the delivery's id does not say which, so the second is tried when the first is unknown.
      if (kind === 'github' && commentId && target.type === 'pull_request') {
        const first = await call(reactRequest(kind, ref, target, commentId, reaction), true);
        if (first.status !== 404) return;
        await call(reactRequest(kind, ref, target, commentId, reaction, { review: true }));
        return;
      }
      await call(reactRequest(kind, ref, target, commentId, reaction));
    },
    async openPullRequest(ref, pr) {
      return parsePullRequest(kind, (await call(openPullRequestRequest(kind, ref, pr))).json);
    },
    async findPullRequest(ref, head) {
      return parsePullRequestList(kind, (await call(findPullRequestRequest(kind, ref, head))).json, ref, head);
    },
    async pullRequestHead(ref, number) {
      return parsePullRequestHead(kind, (await call(getPullRequestRequest(kind, ref, number))).json, ref);
    },
    async branchHead(ref, branch) {
      const r = await call(branchRequest(kind, ref, branch), true);
      return r.status === 404 ? null : parseBranchHead(kind, r.json);
    },
  };
}
