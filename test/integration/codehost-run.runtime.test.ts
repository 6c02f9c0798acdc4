import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB, type CodeHostKind, type CodeHostReplyJob, type CodeHostRunJob, type CodeHostTrigger } from '../../src/core/codehost/codehost-contract.js';
import { cloneDirFor } from '../../src/core/codehost/codehost-run-fns.js';
import { systemCtx } from '../../src/kernel/context.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startCodeHostApi, type CodeHostApiServer } from '../fixtures/code-host-api.js';
import { githubDelivery } from '../fixtures/code-host-deliveries.js';
import type { FakeStep } from '../fixtures/fake-llm.js';
import { api } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';
import { applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * A code-host run and its result end to end, without the webhook intake (its job payload is the seam): a
 * CodeHostRunJob queued as the intake queues it → the person's session, the host told at once (reaction and
 * "working on it" with the session's link), the repository cloned in their real sandbox through the git
 * gateway, a scripted agent's edit, and at the turn's end the commit and push run in the sandbox, the pull
 * request opened on the loopback host (its REST in the host's documented shape, git http-backend on the
 * same port), the summary with the files and the cost. Then a follow-up on that pull request (a new commit
 * on the same branch, no second pull request), a turn with no changes, and a person over their cost limit.
 * One app, one person, one runtime for all three host kinds (GitHub, GitLab, Gitea).
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project runtime test/integration/codehost-run.runtime.test.ts
 */
describe.runIf(DB_MODE === 'postgres')('code hosts: an issue becomes the agent\'s pull request', { timeout: 300_000 }, () => {
  const TOKEN = `svc_${randomUUID().replace(/-/g, '')}`;
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let root: string;
  const hosts = {} as Record<CodeHostKind, { fake: CodeHostApiServer; id: string; name: string; repo: string }>;
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
  const bare = (repo: string) => join(root, `${repo}.git`);
  const db = () => r.t.opened.db;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'agentws-codehost-'));
    r = await startRuntimeApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' } });
    acme = await seedPeople(r.t, 'acme-codehost');
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    for (const kind of ['github', 'gitlab', 'gitea'] as CodeHostKind[]) {
      const repo = `${kind}-org/web`;
      git(['init', '-q', '--bare', '-b', 'main', bare(repo)]);
      git(['push', '-q', bare(repo), 'main'], seed);
      const fake = await startCodeHostApi({ kind, root, tokens: { [TOKEN]: 'svc-bot' } });
      const name = `corp-${kind}`;
      // Before the runtime starts: its first configuration carries the hosts' git config.
      await r.t.opened.core.gitHosts.add(systemCtx(silentLogger, { tenantId: acme.tenantId }), { name, baseUrl: fake.url, token: TOKEN, access: [{ who: 'role:member', repos: [`${kind}-org/*`] }] });
      const { rows } = await db().query<{ id: string }>(`update git_hosts set kind = $3 where tenant_id = $1 and name = $2 returning id`, [acme.tenantId, name, kind]);
      hosts[kind] = { fake, id: rows[0].id, name, repo };
    }
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
  });

  afterAll(async () => {
    await r?.close();
    for (const h of Object.values(hosts)) await h.fake.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const trigger = (kind: CodeHostKind, o: { type?: 'issue' | 'pull_request'; number: number; title: string; body: string; commentId: number | null; commentBody?: string; head?: string }): CodeHostTrigger => {
    const h = hosts[kind];
    const isPr = o.type === 'pull_request';
    const url = `${h.fake.url}/${h.repo}/${isPr ? 'pull' : 'issues'}/${o.number}`;
    return {
      kind, deliveryId: randomUUID(), repo: h.repo, projectId: kind === 'gitlab' ? h.fake.projectId(h.repo) : null,
      target: { type: o.type ?? 'issue', number: o.number, title: o.title, body: o.body, url },
      via: o.commentId === null ? 'label' : 'comment',
      comment: o.commentId === null ? null : { id: String(o.commentId), body: o.commentBody ?? 'please', url: `${url}#c${o.commentId}` },
      actor: { login: 'octo', id: '17', email: null }, defaultBranch: 'main',
      head: o.head ? { ref: o.head, sha: git(['--git-dir', bare(h.repo), 'rev-parse', `refs/heads/${o.head}`]) } : null, fromFork: false,
    };
  };
  /** Queued as the intake queues it (its own transaction, a singleton key per delivery row). */
  const queueRun = async (kind: CodeHostKind, t: CodeHostTrigger, userId = acme.ids.mia) => {
    const job: CodeHostRunJob = { tenantId: acme.tenantId, hostId: hosts[kind].id, deliveryRowId: randomUUID(), person: { userId, handle: 'mia', mappedBy: 'connection' }, trigger: t };
    await r.t.opened.core.queue.send(CODE_HOST_RUN_JOB, job, { singletonKey: `codehost:${job.deliveryRowId}`, retryLimit: 5 });
    return job;
  };
  // Usage stays well under the scripted model's context (32k): more makes opencode compact the session.
  const edit = (dir: string, file: string, text: string): FakeStep[] => [
    { toolCall: { name: 'bash', arguments: { command: `cd /workspace/${dir} && printf '%s\\n' '${text}' > ${file} && echo EDITED`, description: 'edit' } }, usage: { prompt: 5_000, completion: 1_000 } },
    { text: `Wrote ${file}.`, usage: { prompt: 1_000, completion: 100 } },
  ];
  const commentsOn = (kind: CodeHostKind, number: number) => hosts[kind].fake.comments.filter((c) => c.number === number && c.author === 'svc-bot').map((c) => c.body);
  const waitComment = async (kind: CodeHostKind, number: number, re: RegExp) => {
    await expect.poll(() => commentsOn(kind, number).some((b) => re.test(b)), { timeout: 120_000, interval: 200 }).toBe(true);
    return commentsOn(kind, number).find((b) => re.test(b))!;
  };

  for (const kind of ['github', 'gitlab', 'gitea'] as CodeHostKind[]) {
    it(`${kind}: a comment → session, reaction and link at once, the agent's commit in a pull request, the summary with files and cost; a follow-up → a new commit on the same branch`, async () => {
      const h = hosts[kind];
      const mainBefore = git(['--git-dir', bare(h.repo), 'rev-parse', 'refs/heads/main']);
      const number = h.fake.addIssue(h.repo, { title: 'Footer says Copyrite', body: 'Please fix the footer typo.' });
      const asked = h.fake.addComment(h.repo, number, '@agent fix it', { author: 'octo' });
      const dir = cloneDirFor(h.name, h.repo, number);
      r.llm.script(edit(dir, 'fix.txt', 'fixed'));
      const sent = Date.now();
      const first = await queueRun(kind, trigger(kind, { number, title: 'Footer says Copyrite', body: 'Please fix the footer typo.', commentId: asked, commentBody: 'fix it' }));

      const working = await waitComment(kind, number, /^Working on it: /);
      console.info(`[codehost-run] ${kind}: "working on it" ${Date.now() - sent} ms after the job was queued`);
      expect(h.fake.reactions).toContainEqual(expect.objectContaining({ on: 'comment', id: asked, content: 'eyes', account: 'svc-bot' }));
      const sessionId = /\/sessions\/([0-9a-f-]{36})$/.exec(working)![1];

      const summary = await waitComment(kind, number, /^Opened (pull|merge) request/);
      const branch = `agent/mia/${number}`;
      expect(h.fake.pulls).toEqual([expect.objectContaining({ head: branch, base: 'main', title: 'Footer says Copyrite', author: 'svc-bot', state: 'open' })]);
      const pr = h.fake.pulls[0];
      expect(pr.body).toContain(`Closes #${number}`);
      const head = git(['--git-dir', bare(h.repo), 'rev-parse', `refs/heads/${branch}`]);
      expect(git(['--git-dir', bare(h.repo), 'show', `${head}:fix.txt`])).toBe('fixed');
      expect(git(['--git-dir', bare(h.repo), 'log', '-1', '--format=%an <%ae>', head])).toBe('mia <mia@acme-codehost.example>');
      expect(git(['--git-dir', bare(h.repo), 'rev-parse', 'refs/heads/main'])).toBe(mainBefore);
      expect(summary).toContain(pr.number.toString());
      expect(summary).toContain('`fix.txt` (added, +1 −0)');
      expect(summary).toContain("The agent's summary:\n```text\nWrote fix.txt.\n```");
      expect(summary).toMatch(/Cost of this turn: \$\d+\.\d{4}\./);
      const cost = Number(/Cost of this turn: \$([0-9]+\.[0-9]{4})/.exec(summary)![1]);
      expect(cost).toBeGreaterThan(0);
      const recorded = Number((await db().query(`select sum(cost_usd) as c from usage_records where session_id = $1`, [sessionId])).rows[0].c);
      expect(Math.abs(cost - recorded)).toBeLessThan(0.0001);
      expect(summary).toContain(`/sessions/${sessionId}`);

      const run = (await db().query(`select * from code_host_runs where tenant_id = $1 and host_id = $2`, [acme.tenantId, h.id])).rows;
      expect(run).toEqual([expect.objectContaining({ session_id: sessionId, branch, base: 'main', pr_number: pr.number, head_sha: head, status: 'opened', user_id: acme.ids.mia })]);
      const session = (await db().query(`select channel, origin_url, origin_label, owner_id from agent_sessions where id = $1`, [sessionId])).rows[0];
      expect(session).toEqual({ channel: 'codehost', origin_url: `${h.fake.url}/${h.repo}/issues/${number}`, origin_label: `${h.repo}#${number}`, owner_id: acme.ids.mia });
      const audit = (await db().query(`select action, actor, details from audit_log where tenant_id = $1 and action = 'codehost.pull_request' and target like $2`, [acme.tenantId, `codehost:${h.name}/%`])).rows;
      expect(audit).toEqual([expect.objectContaining({ actor: `user:${acme.ids.mia}`, details: expect.objectContaining({ number: pr.number, branch, base: 'main', sha: head, as: 'service', opened: true }) })]);
      // Every REST call carried the credential; the token went nowhere in the open.
      expect(h.fake.calls.every((c) => c.account === 'svc-bot')).toBe(true);
      expect(commentsOn(kind, number).join('\n')).not.toContain(TOKEN);
      // The same job again (pg-boss retries it, another serve takes it): nothing is told twice, no second turn.
      if (kind === 'github') {
        const told = h.fake.comments.length;
        const turns = (await db().query(`select count(*)::int as n from agent_turns where session_id = $1`, [sessionId])).rows[0].n;
        await r.t.opened.core.jobHandlers[CODE_HOST_RUN_JOB](systemCtx(silentLogger, { tenantId: acme.tenantId }), first, { id: 'retry', retryCount: 1 } as never);
        expect(h.fake.comments.length).toBe(told);
        expect((await db().query(`select count(*)::int as n from agent_turns where session_id = $1`, [sessionId])).rows[0].n).toBe(turns);
      }

      // A follow-up comment on the pull request: the same session, a new commit on the same branch, no second pull request.
      const again = h.fake.addComment(h.repo, pr.number, '@agent also add a note', { author: 'octo' });
      r.llm.script(edit(dir, 'note.txt', 'noted'));
      await queueRun(kind, trigger(kind, { type: 'pull_request', number: pr.number, title: pr.title, body: pr.body, commentId: again, commentBody: 'also add a note', head: branch }));
      // Once there is a pull request, the conversation is there: its answers go to it.
      const updated = await waitComment(kind, pr.number, /^Pushed new changes to (pull|merge) request/);
      expect(updated).toContain('`note.txt` (added, +1 −0)');
      expect(updated).not.toContain('fix.txt');
      expect(h.fake.pulls).toHaveLength(1);
      const head2 = git(['--git-dir', bare(h.repo), 'rev-parse', `refs/heads/${branch}`]);
      expect(git(['--git-dir', bare(h.repo), 'rev-parse', `${head2}^`])).toBe(head);
      expect(git(['--git-dir', bare(h.repo), 'show', `${head2}:note.txt`])).toBe('noted');
      expect((await db().query(`select count(*)::int as n from agent_sessions where tenant_id = $1 and origin_label = $2`, [acme.tenantId, `${h.repo}#${number}`])).rows[0].n).toBe(1);
      expect((await db().query(`select session_id, head_sha from code_host_runs where tenant_id = $1 and host_id = $2`, [acme.tenantId, h.id])).rows).toEqual([{ session_id: sessionId, head_sha: head2 }]);
    });
  }

  it('the whole way: an admin turns the webhook on, a signed GitHub comment reaches the public webhook, and the person\'s pull request follows', async () => {
    const h = hosts.github;
    // As the admin does it: a secret (shown once) and the repositories the webhook serves.
    const made = await api(r.t, 'POST', `/v1/admin/connectors/git/${h.name}/webhook/secret`, { token: acme.tokens.owner, body: { kind: 'github' } });
    expect(made.status, made.text).toBe(201);
    const { webhookUrl, secret } = made.json as { webhookUrl: string; secret: string };
    const set = await api(r.t, 'PUT', `/v1/admin/connectors/git/${h.name}/webhook`, { token: acme.tokens.owner, body: { repos: ['github-org/*'], enabled: true } });
    expect(set.status, set.text).toBe(200);
    // The commenter is known by their connection to this host.
    const box = createSecretBox([r.t.env.config().secrets.encryptionKey]);
    await db().query(`insert into git_connections (tenant_id, host_id, user_id, account, access_sealed, scopes) values ($1, $2, $3, 'octo-hook', $4, 'repo')`, [acme.tenantId, h.id, acme.ids.mia, box.seal('unused')]);
    const number = h.fake.addIssue(h.repo, { title: 'Header typo', body: 'The header says Welcom.' });
    const asked = h.fake.addComment(h.repo, number, '@agent fix the header', { author: 'octo-hook' });
    r.llm.script(edit(cloneDirFor(h.name, h.repo, number), 'header.txt', 'Welcome'));
    const d = githubDelivery({ secret, repo: h.repo, number, title: 'Header typo', issueBody: 'The header says Welcom.', comment: '@agent fix the header', actor: { login: 'octo-hook', id: 5 }, commentId: asked, webBase: h.fake.url, defaultBranch: 'main' });
    const sent = Date.now();
    const res = await fetch(webhookUrl, { method: 'POST', headers: d.headers, body: d.body });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ outcome: 'queued' });
    await waitComment('github', number, /^Working on it: /);
    console.info(`[codehost-run] github: "working on it" ${Date.now() - sent} ms after the delivery`);
    await waitComment('github', number, /^Opened pull request/);
    expect(h.fake.pulls.filter((p) => p.head === `agent/mia/${number}`)).toEqual([expect.objectContaining({ base: 'main', state: 'open' })]);
    // The host sends it again (its retry): recorded once, nothing runs twice.
    const again = await fetch(webhookUrl, { method: 'POST', headers: d.headers, body: d.body });
    expect(again.status).toBe(200);
    expect((await db().query(`select count(*)::int as n from code_host_runs where tenant_id = $1 and host_id = $2 and target_number = $3`, [acme.tenantId, h.id, number])).rows[0].n).toBe(1);
  });

  it('a second comment while the agent still works on the first waits for that turn\'s end, then pushes on the same branch', async () => {
    const h = hosts.github;
    const number = h.fake.addIssue(h.repo, { title: 'Two asks', body: 'One after the other.' });
    const dir = cloneDirFor(h.name, h.repo, number);
    let release!: () => void;
    const held = new Promise<void>((res) => (release = res));
    // The first turn's model call is held: the turn is working when the second comment comes.
    const [firstStep, ...rest] = edit(dir, 'one.txt', 'one');
    r.llm.script([{ ...firstStep, until: held }, ...rest, ...edit(dir, 'two.txt', 'two')]);
    const c1 = h.fake.addComment(h.repo, number, '@agent first', { author: 'octo' });
    await queueRun('github', trigger('github', { number, title: 'Two asks', body: 'One after the other.', commentId: c1, commentBody: 'first' }));
    const working = await waitComment('github', number, /^Working on it: /);
    const sessionId = /\/sessions\/([0-9a-f-]{36})/.exec(working)![1];
    const turns = async () => (await db().query(`select count(*)::int as n from agent_turns where session_id = $1`, [sessionId])).rows[0].n;
    await expect.poll(turns).toBe(1);
    const c2 = h.fake.addComment(h.repo, number, '@agent second', { author: 'octo' });
    await queueRun('github', trigger('github', { number, title: 'Two asks', body: 'One after the other.', commentId: c2, commentBody: 'second' }));
    // Told at once (its reaction), but nothing of it runs while the first turn works.
    await expect.poll(() => h.fake.reactions.some((x) => x.on === 'comment' && x.id === c2)).toBe(true);
    await new Promise((res) => setTimeout(res, 1500));
    expect(await turns()).toBe(1);
    release();
    await waitComment('github', number, /^Opened pull request/);
    const pr = h.fake.pulls.find((p) => p.head === `agent/mia/${number}`)!;
    await waitComment('github', pr.number, /^Pushed new changes to pull request/);
    const branch = `agent/mia/${number}`;
    const head = git(['--git-dir', bare(h.repo), 'rev-parse', `refs/heads/${branch}`]);
    expect(git(['--git-dir', bare(h.repo), 'show', `${head}:one.txt`])).toBe('one');
    expect(git(['--git-dir', bare(h.repo), 'show', `${head}:two.txt`])).toBe('two');
    // Two commits, one per turn: the first pushed before the second began.
    expect(git(['--git-dir', bare(h.repo), 'ls-tree', '--name-only', `${head}^`]).split('\n')).toEqual(expect.arrayContaining(['one.txt']));
    expect(git(['--git-dir', bare(h.repo), 'ls-tree', '--name-only', `${head}^`]).split('\n')).not.toContain('two.txt');
  });

  it('a comment on someone\'s pull request conversation (no head in the delivery): worked on from its head, the pull request against it; a fork\'s is refused', async () => {
    const h = hosts.github;
    // Someone's pull request from a branch of this repository.
    const seed = join(root, 'feature-seed');
    git(['clone', '-q', bare(h.repo), seed]);
    git(['checkout', '-q', '-b', 'feature/login'], seed);
    git(['commit', '-q', '--allow-empty', '-m', 'login form'], seed);
    git(['push', '-q', 'origin', 'feature/login'], seed);
    const theirs = h.fake.addPull(h.repo, { head: 'feature/login', base: 'main', title: 'Login form', author: 'octo' });
    const asked = h.fake.addComment(h.repo, theirs, '@agent add a note', { author: 'octo' });
    const dir = cloneDirFor(h.name, h.repo, theirs);
    r.llm.script(edit(dir, 'login-note.txt', 'noted'));
    // As GitHub's issue_comment on a pull request: the target is the pull request, its head not given.
    await queueRun('github', trigger('github', { type: 'pull_request', number: theirs, title: 'Login form', body: '', commentId: asked, commentBody: 'add a note' }));
    await waitComment('github', theirs, /^Opened pull request/);
    const ours = h.fake.pulls.find((p) => p.head === `agent/mia/pr-${theirs}`);
    expect(ours).toMatchObject({ base: 'feature/login', author: 'svc-bot' });
    const head = git(['--git-dir', bare(h.repo), 'rev-parse', `refs/heads/agent/mia/pr-${theirs}`]);
    expect(git(['--git-dir', bare(h.repo), 'log', '-1', '--format=%s', `${head}^`])).toBe('login form');

    // A pull request from a fork: told why, nothing runs.
    const turnsBefore = (await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n;
    const forked = h.fake.addPull(h.repo, { head: 'patch-1', base: 'main', title: 'From a fork', author: 'mallory', fork: true });
    const c = h.fake.addComment(h.repo, forked, '@agent merge this', { author: 'octo' });
    await queueRun('github', trigger('github', { type: 'pull_request', number: forked, title: 'From a fork', body: '', commentId: c, commentBody: 'merge this' }));
    await waitComment('github', forked, /from a fork/);
    expect((await db().query(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'codehost.refused' and details->>'reason' = 'fork'`, [acme.tenantId])).rows[0].n).toBe(1);
    expect((await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n).toBe(turnsBefore);
    expect(h.fake.pulls.filter((p) => p.base === 'patch-1')).toEqual([]);
  });

  it('a turn without changes is answered, no pull request; a failed turn says why; a person over their cost limit is answered and no turn runs', async () => {
    const h = hosts.github;
    const pullsBefore = h.fake.pulls.length;
    const number = h.fake.addIssue(h.repo, { title: 'Is the footer right?', body: 'Just check.' });
    r.llm.script([
      { toolCall: { name: 'bash', arguments: { command: 'echo looked', description: 'look' } } },
      { text: 'All good, nothing to change.' },
    ]);
    await queueRun('github', trigger('github', { number, title: 'Is the footer right?', body: 'Just check.', commentId: null }));
    const answer = await waitComment('github', number, /without changing any file/);
    expect(answer).toMatch(/Cost of the turn: \$/);
    expect(h.fake.pulls).toHaveLength(pullsBefore);
    // A label (no comment): the reaction is on the issue itself.
    expect(h.fake.reactions).toContainEqual(expect.objectContaining({ on: 'issue', id: number, content: 'eyes' }));
    expect((await db().query(`select status, pr_number from code_host_runs where tenant_id = $1 and target_number = $2 and host_id = $3`, [acme.tenantId, number, h.id])).rows).toEqual([{ status: 'no_changes', pr_number: null }]);

    // Someone else asks on the same issue: the run (its session, its branch) stays its first person's; they
    // are told so, and nothing of theirs runs in it.
    const turnsOfMia = (await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n;
    const other = h.fake.addComment(h.repo, number, '@agent try again', { author: 'octo-owner' });
    await queueRun('github', trigger('github', { number, title: 'Is the footer right?', body: 'Just check.', commentId: other, commentBody: 'try again' }), acme.ids.owner);
    await waitComment('github', number, /another person's agent works on this already/);
    expect((await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n).toBe(turnsOfMia);
    expect((await db().query(`select user_id from code_host_runs where tenant_id = $1 and target_number = $2 and host_id = $3`, [acme.tenantId, number, h.id])).rows).toEqual([{ user_id: acme.ids.mia }]);

    // The model refuses the turn: nothing changed because the turn failed, and the answer says so.
    const broken = h.fake.addIssue(h.repo, { title: 'Broken', body: 'Try.' });
    r.llm.script([{ error: { status: 400, message: 'the scripted provider refuses this request' } }]);
    await queueRun('github', trigger('github', { number: broken, title: 'Broken', body: 'Try.', commentId: null }));
    const failed = await waitComment('github', broken, /could not be completed/);
    expect(failed).toContain('the scripted provider refuses this request');
    expect((await db().query(`select status from code_host_runs where tenant_id = $1 and target_number = $2 and host_id = $3`, [acme.tenantId, broken, h.id])).rows).toEqual([{ status: 'failed' }]);

    // The member role now allows no spending this month.
    const role = (await db().query<{ id: string }>(`select id from roles where tenant_id = $1 and name = 'member'`, [acme.tenantId])).rows[0].id;
    const patched = await api(r.t, 'PATCH', `/v1/admin/roles/${role}`, { token: acme.tokens.owner, body: { permissions: { cost: { monthly_limit_usd: 0 } } } });
    expect(patched.status, patched.text).toBe(200);
    const turnsBefore = (await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n;
    const limited = h.fake.addIssue(h.repo, { title: 'Another', body: 'More work.' });
    const asked = h.fake.addComment(h.repo, limited, '@agent go');
    await queueRun('github', trigger('github', { number: limited, title: 'Another', body: 'More work.', commentId: asked }));
    const refused = await waitComment('github', limited, /cost limit/);
    expect(refused).toMatch(/\$0\.\d\d of \$0 spent this month/);
    expect(commentsOn('github', limited)).toEqual([refused]);
    expect((await db().query(`select count(*)::int as n from agent_turns where tenant_id = $1`, [acme.tenantId])).rows[0].n).toBe(turnsBefore);
    expect((await db().query(`select session_id from code_host_runs where tenant_id = $1 and target_number = $2 and host_id = $3`, [acme.tenantId, limited, h.id])).rows).toEqual([{ session_id: null }]);
    const audit = (await db().query(`select details from audit_log where tenant_id = $1 and action = 'codehost.refused' and details->>'reason' <> 'fork'`, [acme.tenantId])).rows;
    expect(audit).toEqual([{ details: expect.objectContaining({ reason: 'cost_limit' }) }]);

    // The intake's refusals (codehost-reply): posted once per key, however often the job runs.
    const unmapped = h.fake.addIssue(h.repo, { title: 'x', body: 'y' });
    const reply: CodeHostReplyJob = { tenantId: acme.tenantId, hostId: h.id, repo: h.repo, projectId: null, target: { type: 'issue', number: unmapped }, text: 'Sorry, @octo is not a person of this workspace.', key: `refused:${randomUUID()}` };
    await r.t.opened.core.queue.send(CODE_HOST_REPLY_JOB, reply, { singletonKey: reply.key });
    await waitComment('github', unmapped, /^Sorry, @octo/);
    await r.t.opened.core.jobHandlers[CODE_HOST_REPLY_JOB](systemCtx(silentLogger, { tenantId: acme.tenantId }), reply, { id: 'again', retryCount: 1 } as never);
    expect(commentsOn('github', unmapped)).toHaveLength(1);
  });
});
