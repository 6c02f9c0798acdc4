import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { regularFilesUnder } from '../helpers/files.js';
import { createGitServer } from '../fixtures/git-server.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { runtimeRoot } from '../../src/core/runtime/host/managed-config.js';
import { workspaceDir } from '../../src/lib/data-paths.js';
import { api } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * The git gateway end to end: a private repository on a real git server (git's own
 * `git http-backend` behind a small HTTP server on loopback that requires the service credential); a
 * scripted agent turn in a real sandbox clones it with the plain URL, commits, pushes a branch under its
 * prefix (it lands, audited); its push to the default branch is refused in git's own words; a user
 * whose roles reach no repository is refused; and the credential is nowhere the agent can look.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project runtime test/integration/git-gateway.runtime.test.ts
 */
// Once with the runtime on the control plane's host, once on a runner host (its gateway-host requests
// relayed to the control plane, its git config written by the runner).
for (const onRunner of [false, true])
describe.runIf(DB_MODE === 'postgres')(`git gateway: private repositories without the credential in the sandbox${onRunner ? ' (runner host)' : ''}`, { timeout: 180_000 }, () => {
  const TOKEN = `ghs_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const BASIC = Buffer.from(`x-access-token:${TOKEN}`).toString('base64');
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let root: string;
  let server: ReturnType<typeof createGitServer>;
  let baseUrl: string;
  const seen: Array<{ path: string; authorized: boolean }> = [];
  const bare = () => join(root, 'org', 'private.git');
  /** Where the runtimes' files are: the runner host's data dir when they run there. */
  const dataDir = () => (onRunner ? r.runner!.dataDir : r.t.env.dataDir);
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'agentws-git-'));
    git(['init', '-q', '--bare', '-b', 'main', bare()]);
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    git(['push', '-q', bare(), 'main'], seed);

    // git http-backend as CGI: the smart HTTP server GitHub, GitLab and Gitea speak too.
    // Advertising push options as GitLab does, and recording what receive-pack got with each push.
    server = createGitServer({ root, authorization: `Basic ${BASIC}`, pushOptions: true, onRequest: (q) => seen.push({ path: q.path, authorized: q.authorized }) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    r = await startRuntimeApp({ runner: onRunner });
    acme = await seedPeople(r.t, 'acme-git');
    // Before the runtimes start: their first configuration carries the git config.
    await r.t.opened.core.gitHosts.add(systemCtx(silentLogger, { tenantId: acme.tenantId }), { name: 'corp', baseUrl, token: TOKEN, access: [{ who: 'role:member', repos: ['org/*'] }] });
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
  });

  afterAll(async () => {
    await r?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const bash = (command: string) => [{ toolCall: { name: 'bash', arguments: { command, description: 'git' } } }, { text: 'done' }];

  it('clones, commits and pushes under the agent prefix; the default branch is refused; the credential stays out', async () => {
    const mainBefore = git(['--git-dir', bare(), 'rev-parse', 'refs/heads/main']);
    const script = [
      'cd /workspace',
      `timeout 20 git clone ${baseUrl}/org/private.git 2>&1; echo "CLONE=$?"`,
      'cd private && git checkout -q -b agent/mia/fix && echo fixed > fix.txt && git add fix.txt && git commit -q -m fix',
      'timeout 20 git push origin agent/mia/fix 2>&1; echo "PUSH_PREFIX=$?"',
      'timeout 20 git push origin HEAD:main 2>&1; echo "PUSH_MAIN=$?"',
      // A push option is an instruction to the host (GitLab skips the pipeline): none is allowed here.
      'timeout 20 git push -o ci.skip origin HEAD:agent/mia/skip 2>&1; echo "PUSH_OPTION=$?"',
      // What the agent can see, for the host to search: its environment, every process's, its git config
      // (from a script: opencode's own rules would ask about paths outside the workspace on the command line).
      "cd /workspace && printf '%s\\n' '(env; git config --list --show-origin; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline) > seen.txt 2>&1' > dump.sh && sh dump.sh; echo DUMPED",
    ].join('\n');
    const started = Date.now();
    const turn = await agentTurn(r, acme.tokens.member, bash(script), { title: 'git' });
    expect(turn.output, JSON.stringify(seen)).toContain('CLONE=0');
    expect(turn.output).toContain('PUSH_PREFIX=0');
    expect(turn.output).toMatch(/PUSH_MAIN=[1-9]/);
    expect(turn.output).toMatch(/\[remote rejected\] HEAD -> main \(protected ref/);
    expect(turn.output).toContain('remote: agentws:');
    expect(turn.output).toMatch(/PUSH_OPTION=[1-9]/);
    expect(turn.output).toMatch(/\[remote rejected\] HEAD -> agent\/mia\/skip \(push option "ci\.skip" not allowed/);
    // On the server: the branch landed, main did not move; every request carried the service credential.
    const fix = git(['--git-dir', bare(), 'rev-parse', 'refs/heads/agent/mia/fix']);
    expect(git(['--git-dir', bare(), 'show', `${fix}:fix.txt`])).toBe('fixed');
    expect(git(['--git-dir', bare(), 'rev-parse', 'refs/heads/main'])).toBe(mainBefore);
    // git's receive-pack took in one push (the branch), without options: the refused option never reached it.
    expect(server.pushes()).toEqual([{ options: [] }]);
    expect(() => git(['--git-dir', bare(), 'rev-parse', '--verify', '-q', 'refs/heads/agent/mia/skip'])).toThrow();
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s.authorized)).toBe(true);

    const audit = (await r.t.opened.db.query<{ action: string; target: string; user_id: string; session_id: string | null; details: any }>(`select action, target, user_id, session_id, details from audit_log where tenant_id = $1 and action like 'git.%' order by ts`, [acme.tenantId])).rows;
    const push = audit.find((a) => a.action === 'git.push');
    expect(push).toMatchObject({ target: 'git:corp/org/private', user_id: acme.ids.mia });
    expect(push!.details.refs).toEqual([expect.objectContaining({ ref: 'refs/heads/agent/mia/fix', op: 'create' })]);
    expect(audit.find((a) => a.action === 'git.push_refused')?.details.refused).toEqual([expect.objectContaining({ ref: 'refs/heads/main' })]);
    expect(audit.filter((a) => a.action === 'git.fetch')).toHaveLength(1);

    // Nowhere the agent could look: its files (workspace, home, tmp, /etc/opencode incl. the git config,
    // what it dumped of its environment and /proc), the transcript, the audit log.
    const owner = { tenantId: acme.tenantId, userId: acme.ids.mia };
    const files = [...regularFilesUnder(workspaceDir(dataDir(), owner)), ...regularFilesUnder(runtimeRoot(dataDir(), owner.userId))];
    expect(files.some((f) => f.endsWith('seen.txt'))).toBe(true);
    expect(files.some((f) => f.endsWith('gitconfig'))).toBe(true);
    for (const f of files) {
      const text = readFileSync(f, 'latin1');
      expect(text.includes(TOKEN) || text.includes(BASIC), f).toBe(false);
    }
    const seenText = readFileSync(join(workspaceDir(dataDir(), owner), 'seen.txt'), 'utf8');
    expect(seenText).toContain('url.http://llm.agentws.internal/git/corp/.insteadof');
    const everything = JSON.stringify([turn.messages, audit]);
    expect(everything.includes(TOKEN) || everything.includes(BASIC)).toBe(false);
    const allAudit = JSON.stringify((await r.t.opened.db.query(`select * from audit_log where tenant_id = $1`, [acme.tenantId])).rows);
    expect(allAudit.includes(TOKEN) || allAudit.includes(BASIC)).toBe(false);
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('refuses a user whose roles reach no repository', async () => {
    const before = seen.length;
    const turn = await agentTurn(r, acme.tokens.owner, bash(`cd /workspace && git clone ${baseUrl}/org/private.git owner-copy 2>&1; echo "CLONE=$?"`), { title: 'no access' });
    expect(turn.output).toMatch(/CLONE=[1-9]/);
    expect(turn.output).toContain('403');
    // The gateway said no: the git server never heard of it.
    expect(seen.length).toBe(before);
    const denied = async () => (await r.t.opened.db.query<{ user_id: string }>(`select user_id from audit_log where tenant_id = $1 and action = 'git.denied'`, [acme.tenantId])).rows.map((d) => d.user_id);
    await expect.poll(denied, { timeout: 10_000 }).toContain(acme.ids.owner);
  });

  it('is managed by admins over the API, and never shows the token', async () => {
    const list = await api(r.t, 'GET', '/v1/admin/connectors/git', { token: acme.tokens.owner });
    expect(list.status).toBe(200);
    expect(list.json.gitHosts).toEqual([expect.objectContaining({ name: 'corp', credential: 'sealed', access: [{ who: 'role:member', repos: ['org/*'] }], branchPrefix: 'agent/{handle}/' })]);
    expect(list.text).not.toContain(TOKEN);
    expect((await api(r.t, 'GET', '/v1/admin/connectors/git', { token: acme.tokens.member })).status).toBe(403);
    const bad = await api(r.t, 'POST', '/v1/admin/connectors/git', { token: acme.tokens.owner, body: { name: 'other', baseUrl: 'ftp://x', token: 't' } });
    expect(bad.status).toBe(400);
    expect(bad.json.message ?? bad.text).toMatch(/baseUrl/);
    const prefix = await api(r.t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { branchPrefix: 'agents/' } });
    expect(prefix.status).toBe(400);
    expect(prefix.text).toMatch(/branchPrefix/);
    const added = await api(r.t, 'POST', '/v1/admin/connectors/git', { token: acme.tokens.owner, body: { name: 'other', baseUrl: 'https://git.example.com/', token: 'secret-2', access: [{ who: 'team:ops', repos: ['infra/**'] }] } });
    expect(added.status, added.text).toBe(201);
    expect(added.json.baseUrl).toBe('https://git.example.com');
    expect((await api(r.t, 'POST', '/v1/admin/connectors/git', { token: acme.tokens.owner, body: { name: 'other', baseUrl: 'https://x.example', token: 't' } })).status).toBe(409);
    expect((await api(r.t, 'DELETE', '/v1/admin/connectors/git/other', { token: acme.tokens.owner })).status).toBe(204);
    const audit = (await r.t.opened.db.query<{ action: string; details: any }>(`select action, details from audit_log where tenant_id = $1 and action like 'connector.git.%'`, [acme.tenantId])).rows;
    expect(audit.map((a) => a.action).sort()).toEqual(['connector.git.add', 'connector.git.add', 'connector.git.remove']);
    expect(JSON.stringify(audit)).not.toContain('secret-2');
  });
});
