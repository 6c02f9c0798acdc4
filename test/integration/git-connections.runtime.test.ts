import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { runtimeRoot } from '../../src/core/runtime/host/managed-config.js';
import { workspaceDir } from '../../src/lib/data-paths.js';
import { ACCESS_COOKIE } from '../../src/http/cookies.js';
import { createGitServer } from '../fixtures/git-server.js';
import { startGitHostApi } from '../fixtures/git-host-api.js';
import { api } from '../helpers/app.js';
import { regularFilesUnder } from '../helpers/files.js';
import { DB_MODE } from '../helpers/test-env.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * Per-user git connections and GitHub App credentials end to end. A stand-in git host (an
 * OAuth authorization server with PKCE and rotating refresh tokens, its user API, GitHub's installation
 * token endpoint) in front of a real git server that takes the tokens it issued and names their accounts
 * as git's REMOTE_USER. A person connects their account (their browser's round trip over HTTP, the
 * callback reached with the dashboard's cookie); their agent's push then reaches the host as them, and
 * someone else's as the service credential; a GitHub App's installation token is minted on the control
 * plane. No token of any kind is anywhere the agent can look.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts --project runtime test/integration/git-connections.runtime.test.ts
 */
describe.runIf(DB_MODE === 'postgres')('git connections: agents act as their users at the git host', { timeout: 180_000 }, () => {
  const SERVICE = `ghp_service${Math.random().toString(36).slice(2)}`;
  const CLIENT_SECRET = `oauth-secret-${Math.random().toString(36).slice(2)}`;
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const PRIVATE_KEY = keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  let host: Awaited<ReturnType<typeof startGitHostApi>>;
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let root: string;
  let server: http.Server;
  let baseUrl: string;
  /** Every request the git server answered: whose credential it carried. */
  const seen: Array<{ method: string; path: string; identity: string | null; authorization: string }> = [];
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
  const bare = () => join(root, 'org', 'private.git');
  const ownerCtx = () => systemCtx(silentLogger, { tenantId: acme.tenantId });
  const bash = (command: string) => [{ toolCall: { name: 'bash', arguments: { command, description: 'git' } } }, { text: 'done' }];
  /** Who pushed each ref, as git's reflog on the server says (REMOTE_USER of the receive-pack). */
  const pusherOf = (ref: string) => git(['--git-dir', bare(), 'reflog', 'show', '--format=%gn', ref]).split('\n')[0];

  beforeAll(async () => {
    host = await startGitHostApi({ clientId: 'Iv1.agentws', clientSecret: CLIENT_SECRET, app: { appId: '4242', installationId: '77', publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString() } });
    root = mkdtempSync(join(tmpdir(), 'agentws-gitc-'));
    git(['init', '-q', '--bare', '-b', 'main', bare()]);
    git(['--git-dir', bare(), 'config', 'core.logAllRefUpdates', 'always']);
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    git(['push', '-q', bare(), 'main'], seed);
    server = createGitServer({
      root,
      authorization: (header) => {
        const [user, token] = Buffer.from(/^Basic (.+)$/.exec(header ?? '')?.[1] ?? '', 'base64').toString().split(':');
        if (user === 'x-access-token' && token === SERVICE) return 'service';
        return token ? host.identityOf(token) : null;
      },
      onRequest: (q) => seen.push({ method: q.method, path: q.path, identity: q.identity, authorization: q.req.headers.authorization ?? '' }),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    r = await startRuntimeApp();
    acme = await seedPeople(r.t, 'acme-gitc');
    await r.t.opened.core.gitHosts.add(ownerCtx(), {
      name: 'corp',
      baseUrl,
      token: SERVICE,
      oauth: { clientId: 'Iv1.agentws', clientSecret: CLIENT_SECRET, ...host.oauth },
      userConnections: 'optional',
      access: [{ who: '*', repos: ['org/*'] }],
    });
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
  });

  afterAll(async () => {
    await r?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await host?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** A person's browser: starts connecting, "allows" at the host as `account`, comes back with `cookieToken`'s cookie. */
  async function connect(token: string, account: string, cookieToken: string | null = token) {
    const started = await api(r.t, 'POST', '/v1/me/connections/git/corp', { token });
    expect(started.status, started.text).toBe(200);
    expect(started.json.authorizeUrl).toContain(host.oauth.authorizeUrl);
    expect(new URL(started.json.authorizeUrl).searchParams.get('code_challenge_method')).toBe('S256');
    host.state.signedInAs = account;
    const consent = await fetch(started.json.authorizeUrl, { redirect: 'manual' });
    expect(consent.status).toBe(302);
    const callback = new URL(consent.headers.get('location')!);
    expect(callback.origin + callback.pathname).toBe(`${r.t.url}/v1/connections/git/callback`);
    const back = await fetch(callback, { redirect: 'manual', headers: cookieToken ? { cookie: `${ACCESS_COOKIE}=${cookieToken}` } : {} });
    expect(back.status).toBe(302);
    return back.headers.get('location')!;
  }

  it('connects a person through the host\'s OAuth flow; only the person who started it can finish it', async () => {
    // Someone else's cookie on mia's authorization (a link she was sent): refused, nothing connected.
    expect(decodeURIComponent(await connect(acme.tokens.member, 'mia-at-corp', acme.tokens.owner))).toMatch(/#\/connections\?error=.*started by someone else/);
    // Without any sign-in: refused.
    expect(await connect(acme.tokens.member, 'mia-at-corp', null)).toMatch(/#\/connections\?error=/);
    expect((await api(r.t, 'GET', '/v1/me/connections', { token: acme.tokens.member })).json.git).toEqual([expect.objectContaining({ host: 'corp', connected: false, userConnections: 'optional' })]);

    // Mia's own round trip; the first tokens live two minutes, so her agent's first request refreshes them.
    host.state.expiresIn = 120;
    expect(await connect(acme.tokens.member, 'mia-at-corp')).toBe('/#/connections?connected=corp');
    host.state.expiresIn = 3600;
    const mine = await api(r.t, 'GET', '/v1/me/connections', { token: acme.tokens.member });
    expect(mine.json.git).toEqual([expect.objectContaining({ host: 'corp', connected: true, account: 'mia-at-corp' })]);
    expect(mine.text).not.toMatch(/gh[or]_/);
    const listed = await api(r.t, 'GET', '/v1/admin/connectors/git/corp/connections', { token: acme.tokens.owner });
    expect(listed.json.connections).toEqual([expect.objectContaining({ handle: 'mia', account: 'mia-at-corp' })]);
    expect((await api(r.t, 'GET', '/v1/admin/connectors/git/corp/connections', { token: acme.tokens.member })).status).toBe(403);
    // The authorization code was redeemed once, with PKCE's verifier (the stand-in checks it).
    expect(host.state.grants).toEqual([{ grant: 'authorization_code', account: 'mia-at-corp' }]);
  });

  it("pushes as the connected person; someone without a connection pushes as the service; no token in the sandbox", async () => {
    const script = (branch: string) =>
      [
        'cd /workspace && rm -rf private',
        `timeout 20 git clone ${baseUrl}/org/private.git 2>&1; echo "CLONE=$?"`,
        `cd private && git checkout -q -b ${branch} && echo x > f.txt && git add f.txt && git commit -q -m x`,
        `timeout 20 git push origin ${branch} 2>&1; echo "PUSH=$?"`,
        "cd /workspace && printf '%s\\n' '(env; git config --list --show-origin; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline) > seen.txt 2>&1' > dump.sh && sh dump.sh",
      ].join('\n');
    const mia = await agentTurn(r, acme.tokens.member, bash(script('agent/mia/feature')), { title: 'as mia' });
    expect(mia.output, JSON.stringify(seen.map((s) => [s.method, s.path, s.identity]))).toContain('CLONE=0');
    expect(mia.output).toContain('PUSH=0');
    expect(pusherOf('refs/heads/agent/mia/feature')).toBe('mia-at-corp');
    // Her two-minute token was refreshed once, before her first request, and the new one used throughout.
    expect(host.state.grants.map((g) => g.grant)).toEqual(['authorization_code', 'refresh_token']);
    expect(seen.filter((s) => s.identity !== null).every((s) => s.identity === 'mia-at-corp')).toBe(true);

    const before = seen.length;
    const owner = await agentTurn(r, acme.tokens.owner, bash(script('agent/owner/feature')), { title: 'as owner' });
    expect(owner.output).toContain('PUSH=0');
    expect(pusherOf('refs/heads/agent/owner/feature')).toBe('service');
    expect(seen.slice(before).every((s) => s.identity === 'service')).toBe(true);

    const audit = (await r.t.opened.db.query<{ action: string; user_id: string; details: any }>(`select action, user_id, details from audit_log where tenant_id = $1 and action in ('git.push', 'connector.git.connect') order by ts`, [acme.tenantId])).rows;
    expect(audit.map((a) => [a.action, a.user_id, a.details.as ?? a.details.account])).toEqual([
      ['connector.git.connect', acme.ids.mia, 'mia-at-corp'],
      ['git.push', acme.ids.mia, 'user:mia-at-corp'],
      ['git.push', acme.ids.owner, 'service'],
    ]);

    // Every token the host issued or took (mia's access and refresh tokens, the service token, the OAuth
    // client's secret): nowhere in the sandbox's files, what it could read of its processes, the transcripts, the audit log.
    const secrets = [SERVICE, CLIENT_SECRET, ...seen.map((s) => s.authorization.slice('Basic '.length)).filter(Boolean), ...seen.map((s) => Buffer.from(s.authorization.slice(6), 'base64').toString().split(':')[1]).filter(Boolean)];
    expect(secrets.length).toBeGreaterThan(4);
    const owners = [acme.ids.mia, acme.ids.owner].map((userId) => ({ tenantId: acme.tenantId, userId }));
    const files = owners.flatMap((o) => [...regularFilesUnder(workspaceDir(r.t.env.dataDir, o)), ...regularFilesUnder(runtimeRoot(r.t.env.dataDir, o.userId))]);
    expect(files.filter((f) => f.endsWith('seen.txt'))).toHaveLength(2);
    for (const f of files) {
      const text = readFileSync(f, 'latin1');
      for (const s of secrets) expect(text.includes(s), f).toBe(false);
    }
    const everything = JSON.stringify([mia.messages, owner.messages, (await r.t.opened.db.query(`select * from audit_log where tenant_id = $1`, [acme.tenantId])).rows]);
    for (const s of secrets) expect(everything.includes(s)).toBe(false);
  });

  it("an optional connection whose refresh fails: the agent's clone goes as the service, and the person is told on their session's stream and in the audit", async () => {
    // Her token is due (as if its hour were up) and the host now refuses her refresh token.
    await r.t.opened.db.query(`update git_connections set expires_at = now() where tenant_id = $1 and user_id = $2`, [acme.tenantId, acme.ids.mia]);
    host.state.failRefresh = true;
    try {
      const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: acme.tokens.member, body: { title: 'fallback' } })).json.sessionId as string;
      const stream = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${acme.tokens.member}` });
      const before = seen.length;
      const turn = await agentTurn(r, acme.tokens.member, bash(`cd /workspace && rm -rf fb && timeout 20 git clone ${baseUrl}/org/private.git fb 2>&1; echo "CLONE=$?"`), { sessionId });
      expect(turn.output).toContain('CLONE=0');
      expect(seen.slice(before).filter((s) => s.identity !== null).every((s) => s.identity === 'service')).toBe(true);
      const told = stream.events.find((e) => e.data.type === 'git.credential_fallback');
      await stream.close();
      expect(told?.data.properties).toMatchObject({ sessionID: sessionId, host: 'corp', as: 'service', message: expect.stringMatching(/could not be refreshed \(the host refused \(invalid_grant.*organisation's service account.*Connect your account again/) });
      const audit = async () => (await r.t.opened.db.query<{ action: string; session_id: string | null; details: any }>(`select action, session_id, details from audit_log where tenant_id = $1 and user_id = $2 and action in ('git.credential_fallback', 'git.fetch') order by ts`, [acme.tenantId, acme.ids.mia])).rows;
      await expect.poll(async () => (await audit()).filter((a) => a.details.fallback || a.action === 'git.credential_fallback').map((a) => [a.action, a.session_id, a.details.as])).toEqual([
        ['git.credential_fallback', sessionId, 'service'],
        ['git.fetch', sessionId, 'service'],
      ]);
    } finally {
      host.state.failRefresh = false;
    }
  });

  it('with connections required, refuses an agent whose person has none; disconnecting takes effect at once', async () => {
    await r.t.opened.core.gitHosts.update(ownerCtx(), 'corp', { userConnections: 'required' });
    const refused = await agentTurn(r, acme.tokens.owner, bash(`cd /workspace && rm -rf c && timeout 20 git clone ${baseUrl}/org/private.git c 2>&1; echo "CLONE=$?"`), { title: 'required' });
    expect(refused.output).toMatch(/CLONE=[1-9]/);
    expect(refused.output).toContain('connect your account');

    expect((await api(r.t, 'DELETE', '/v1/me/connections/git/corp', { token: acme.tokens.member })).status).toBe(204);
    expect((await api(r.t, 'GET', '/v1/me/connections', { token: acme.tokens.member })).json.git[0].connected).toBe(false);
    const after = seen.length;
    const gone = await agentTurn(r, acme.tokens.member, bash(`cd /workspace && rm -rf c && timeout 20 git clone ${baseUrl}/org/private.git c 2>&1; echo "CLONE=$?"`), { title: 'disconnected' });
    expect(gone.output).toMatch(/CLONE=[1-9]/);
    expect(seen.length).toBe(after);
    const actions = (await r.t.opened.db.query<{ action: string }>(`select action from audit_log where tenant_id = $1 and action in ('connector.git.disconnect', 'git.denied')`, [acme.tenantId])).rows.map((a) => a.action);
    expect(actions).toContain('connector.git.disconnect');
    expect(actions.filter((a) => a === 'git.denied').length).toBeGreaterThanOrEqual(2);
  });

  it('mints GitHub App installation tokens on the control plane, once per hour, signed with the sealed key', async () => {
    // The same git server by another name: each host's URL is its own in the sandbox's git config.
    const appBaseUrl = baseUrl.replace('127.0.0.1', 'localhost');
    const added = await api(r.t, 'POST', '/v1/admin/connectors/git', {
      token: acme.tokens.owner,
      body: { name: 'ghapp', baseUrl: appBaseUrl, githubApp: { appId: '4242', installationId: '77', privateKey: PRIVATE_KEY, apiUrl: host.apiUrl }, access: [{ who: '*', repos: ['org/*'] }] },
    });
    expect(added.status, added.text).toBe(201);
    expect(added.json).toMatchObject({ credentialKind: 'github_app', credential: 'sealed', githubApp: { appId: '4242', installationId: '77', apiUrl: host.apiUrl } });
    expect(added.text).not.toContain('PRIVATE KEY');
    const notAKey = await api(r.t, 'POST', '/v1/admin/connectors/git', { token: acme.tokens.owner, body: { name: 'bad', baseUrl, githubApp: { appId: '1', installationId: '2', privateKey: 'nope' } } });
    expect(notAKey.status).toBe(400);
    expect(notAKey.text).toContain('githubApp.privateKey');

    // Idle runtimes took the new host's git config when it was added; this waits for that to be done.
    await r.t.opened.core.runtime.refreshIdle(acme.tenantId);
    const before = seen.length;
    const turn = await agentTurn(r, acme.tokens.owner, bash(`cd /workspace && rm -rf a b && for d in a b; do timeout 20 git clone ${appBaseUrl}/org/private.git $d 2>&1; echo "CLONE_$d=$?"; done`), { title: 'app' });
    expect(turn.output, JSON.stringify(seen.slice(before))).toContain('CLONE_a=0');
    expect(turn.output).toContain('CLONE_b=0');
    expect(seen.slice(before).length).toBeGreaterThan(0);
    expect(seen.slice(before).every((s) => s.identity === 'app[bot]')).toBe(true);
    // One installation token for both clones (GitHub's last an hour; minting one per request would hit its rate limit).
    expect(host.state.appTokens).toBe(1);
    const files = [...regularFilesUnder(workspaceDir(r.t.env.dataDir, { tenantId: acme.tenantId, userId: acme.ids.owner }))];
    const minted = Buffer.from(seen[seen.length - 1]!.authorization.slice(6), 'base64').toString().split(':')[1]!;
    for (const f of files) expect(readFileSync(f, 'latin1').includes(minted), f).toBe(false);
  });
});
