import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGitServer } from '../fixtures/git-server.js';
import type { AuditInput } from '../../src/core/audit/audit.service.js';
import { createGitGateway } from '../../src/core/connectors/git-gateway.js';
import type { GitAgentView } from '../../src/core/connectors/git-hosts.service.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { NO_WEBHOOK } from '../../src/core/connectors/git-hosts.repo.js';

/**
 * The git gateway alone, with the host's git (no sandbox, no database): git's own http-backend behind a
 * server that wants the service credential, the gateway in front, `git` pointed at the gateway. The host
 * lookup takes a while, as the database's does: a push's body has ended before the gateway reads it.
 * The whole path (sandbox, git config, proxy) is test/integration/git-gateway.runtime.test.ts.
 */
describe('git gateway', () => {
  const AUTH = `Basic ${Buffer.from('x-access-token:host-secret').toString('base64')}`;
  let root: string;
  let upstream: http.Server;
  let gateway: http.Server;
  let gw: string;
  const seen: string[] = [];
  const audits: AuditInput[] = [];
  let serviceAuth = AUTH;
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@a', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@a', GIT_TERMINAL_PROMPT: '0' };
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env }).trim();
  /** git through the gateway with the runtime's credential; resolves with its output and exit code. */
  const run = (args: string[], cwd: string, credential = 'runtime-cred') =>
    new Promise<{ out: string; code: number }>((resolve) => {
      const p = spawn('git', ['-c', `http.extraHeader=Authorization: Bearer ${credential}`, ...args], { cwd, env, timeout: 20_000 });
      let out = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (out += d));
      p.on('close', (code) => resolve({ out, code: code ?? -1 }));
    });

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'agentws-gitgw-'));
    git(['init', '-q', '--bare', '-b', 'main', join(root, 'org', 'repo.git')]);
    git(['init', '-q', '-b', 'main', join(root, 'seed')]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], join(root, 'seed'));
    git(['push', '-q', join(root, 'org', 'repo.git'), 'main'], join(root, 'seed'));
    upstream = createGitServer({ root, authorization: AUTH, onRequest: (q) => seen.push(`${q.method} ${q.path}`) });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const handler = createGitGateway({
      hosts: {
        forAgent: async (_owner, name) => {
          await new Promise((r) => setTimeout(r, 30));
          if (name !== 'corp') return null;
          const view: GitAgentView = {
            host: { id: 'h', tenantId: 't', name: 'corp', baseUrl, username: '', credentialKind: 'token', app: null, oauth: null, oauthSecretSealed: null, userConnections: 'off', secretSealed: 'x', access: [{ who: 'role:member', repos: ['org/*'] }], protectedRefs: ['refs/heads/main'], protectDefault: true, branchPrefix: 'agent/{handle}/', pushOptions: [], ...NO_WEBHOOK, createdAt: new Date(), updatedAt: new Date() },
            authorization: serviceAuth,
            as: { kind: 'service' },
            user: { handle: 'mia', roles: [_owner.userId === 'nobody' ? 'viewer' : 'member'], teams: [] },
          };
          return view;
        },
      },
      record: async (_tenantId, entry) => void audits.push(entry),
      log: silentLogger,
    });
    gateway = http.createServer((req, res) => {
      const userId = req.headers['x-test-user'] === 'nobody' ? 'nobody' : 'u1';
      handler.handle({ tenantId: 't', userId, credential: 'runtime-cred' }, req, res, new URL(req.url ?? '/', 'http://llm.agentws.internal'));
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    gw = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/git/corp`;
    mkdirSync(join(root, 'work'));
  });

  afterAll(async () => {
    await new Promise((r) => gateway?.close(r));
    await new Promise((r) => upstream?.close(r));
    rmSync(root, { recursive: true, force: true });
  });

  it('clones, pushes under the prefix, refuses the default branch in git\'s words', async () => {
    const work = join(root, 'work');
    expect((await run(['clone', `${gw}/org/repo.git`, 'r'], work)).code).toBe(0);
    const repo = join(work, 'r');
    git(['checkout', '-q', '-b', 'agent/mia/fix'], repo);
    git(['commit', '-q', '--allow-empty', '-m', 'fix'], repo);
    const ok = await run(['push', 'origin', 'agent/mia/fix'], repo);
    expect(ok.code, ok.out).toBe(0);
    expect(git(['--git-dir', join(root, 'org', 'repo.git'), 'rev-parse', 'agent/mia/fix'])).toBe(git(['rev-parse', 'HEAD'], repo));
    const main = await run(['push', 'origin', 'HEAD:main', 'HEAD:refs/heads/agent/vic/x'], repo);
    expect(main.code).not.toBe(0);
    expect(main.out).toContain('! [remote rejected] HEAD -> main (protected ref: agents may not push to it)');
    expect(main.out).toContain('(agents push only to branches under agent/mia/)');
    expect(main.out).toContain('remote: agentws:');
    expect(audits.map((a) => a.action)).toEqual(['git.fetch', 'git.push', 'git.push_refused']);
    expect(audits[1].details).toMatchObject({ repository: 'org/repo', refs: [{ ref: 'refs/heads/agent/mia/fix', op: 'create' }], status: 200 });
  });

  it('refuses without the runtime credential, without access, for other paths and hosts; the host never hears of it', async () => {
    const before = seen.length;
    const get = (path: string, headers: Record<string, string> = {}) => fetch(`${gw.replace('/git/corp', '')}${path}`, { headers: { authorization: 'Bearer runtime-cred', ...headers } });
    expect((await get('/git/corp/org/repo.git/info/refs?service=git-upload-pack', { authorization: 'Bearer other' })).status).toBe(403);
    const denied = await get('/git/corp/org/repo.git/info/refs?service=git-upload-pack', { 'x-test-user': 'nobody' });
    expect(denied.status).toBe(403);
    expect(await denied.text()).toMatch(/no access to org\/repo/);
    expect((await get('/git/corp/other/repo.git/info/refs?service=git-upload-pack')).status).toBe(403);
    expect((await get('/git/corp/org/repo.git/HEAD')).status).toBe(400);
    expect((await get('/git/corp/org/repo.git/info/refs')).status).toBe(400);
    expect((await get('/git/corp/org/%2e%2e/x/info/refs?service=git-upload-pack')).status).not.toBe(200);
    expect((await get('/git/elsewhere/org/repo.git/info/refs?service=git-upload-pack')).status).toBe(404);
    expect(seen.length).toBe(before);
    expect(audits.filter((a) => a.action === 'git.denied').length).toBeGreaterThan(0);
  });

  it('reports a host refusing the service credential as the operator\'s problem, not as a 401', async () => {
    serviceAuth = 'Basic d3Jvbmc6d3Jvbmc=';
    try {
      const res = await fetch(`${gw}/org/repo.git/info/refs?service=git-upload-pack`, { headers: { authorization: 'Bearer runtime-cred' } });
      expect(res.status).toBe(502);
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(await res.text()).toMatch(/refused the service credential/);
    } finally {
      serviceAuth = AUTH;
    }
  });
});
