import { randomBytes } from 'node:crypto';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import { cloneScript, finishScript, outputTail, readMarks } from './codehost-run-fns.js';

/**
 * git for a code-host run, run only inside the person's sandbox (runtime-client.ts runCommand: opencode's
 * pty, as the agent's own bash tool runs). The service never runs git on the workspace itself: the clone
 * is the agent's (its .git/config, hooks and attributes are the agent's code), so on the service's host
 * it would run the agent's code with the service's rights. In the sandbox it runs with the agent's rights
 * and no more, and reaches the host only through the git gateway (the sandbox's git config rewrites the
 * host's URL to it, with the runtime's own credential): the host's token never enters the sandbox.
 *
 * The output comes back from the sandbox, so it is read as the agent's: only markers carrying a nonce
 * made here count, and what was pushed is checked against the host's API afterwards (codehost-runs).
 */
const SCRIPT_TIMEOUT_MS = 180_000;
const ENV = { GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', GIT_OPTIONAL_LOCKS: '0' };

export interface SandboxGitResult {
  ok: boolean;
  /** clone: the commit checked out; finish: the commit pushed (null: nothing new). */
  sha: string | null;
  /** git's words (the tail of the output) when it failed. */
  detail: string;
}

/** How often a command's wait counts as use of the runtime: a runtime unused for a while is frozen (runtime-host.ts), and a long clone must not be frozen under it. */
const KEEP_AWAKE_MS = 2000;

async function run(client: RuntimeClient, script: string, nonce: string, title: string, keepAwake?: () => void) {
  const marker = `__AGENTWS_EXIT_${nonce}`;
  const awake = keepAwake ? setInterval(keepAwake, KEEP_AWAKE_MS) : null;
  const r = await client.runCommand(script, { marker, timeoutMs: SCRIPT_TIMEOUT_MS, env: ENV, title }).finally(() => awake && clearInterval(awake));
  return { ...r, marks: readMarks(r.output, nonce), tail: outputTail(r.output.replaceAll(marker, ''), nonce) };
}

/** The repository cloned (or, from an earlier turn, brought up to date) in `dir` of the workspace, on `branch`. */
export async function cloneInSandbox(client: RuntimeClient, o: { dir: string; url: string; startFrom: string; branch: string }, keepAwake?: () => void): Promise<SandboxGitResult> {
  const nonce = randomBytes(12).toString('hex');
  const r = await run(client, cloneScript({ ...o, nonce }), nonce, 'agentws: clone', keepAwake);
  if (r.exitCode === 0 && r.marks.head) return { ok: true, sha: r.marks.head, detail: '' };
  return { ok: false, sha: null, detail: r.exitCode === null ? `git did not finish within ${SCRIPT_TIMEOUT_MS / 1000} s` : r.tail || `git exited with ${r.exitCode}` };
}

/** What the turn changed, committed and pushed to `branch`; sha null when there was nothing new since `since`. */
export async function finishInSandbox(client: RuntimeClient, o: { dir: string; url: string; branch: string; since: string; message: string; name: string; email: string }, keepAwake?: () => void): Promise<SandboxGitResult> {
  const nonce = randomBytes(12).toString('hex');
  const r = await run(client, finishScript({ ...o, nonce }), nonce, 'agentws: push', keepAwake);
  if (r.exitCode === 0 && r.marks.none) return { ok: true, sha: null, detail: '' };
  if (r.exitCode === 0 && r.marks.pushed) return { ok: true, sha: r.marks.pushed, detail: '' };
  return { ok: false, sha: null, detail: r.exitCode === null ? `git did not finish within ${SCRIPT_TIMEOUT_MS / 1000} s` : r.tail || `git exited with ${r.exitCode}` };
}
