import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGitConnectionsRepo } from '../../src/core/connectors/git-connections.repo.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

const TOKEN = 'ghp_stdin-token-0123456789SECRET';
const ROTATED = 'ghp_rotated-token-XYZ987';

/** `aws connector git add|list|update|remove` run in-process (the built CLI): the token piped in, stored sealed, never printed. */
describe(`connector git commands (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  const run = (args: string[], input?: string) => runCommand([...args, '--tenant', 'acme'], { env: t.env, input });
  const sealed = async () => (await t.opened.db.query<{ s: string }>(`select secret_sealed as s from git_hosts where name = 'github'`)).rows[0]?.s;
  const open = (s: string) => createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]).open(s);

  let tenant: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    t = await startTestApp();
    tenant = await seedTenant(t, 'acme', [{ handle: 'alice', roles: ['member'] }]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('adds, lists, updates and removes a git host; the token only ever goes in', async () => {
    const add = await run(['connector', 'git', 'add', 'github', '--base-url', 'https://github.com/', '--token-stdin', '--access', 'role:member=acme/*,acme-infra/**', '--json'], TOKEN);
    expect(add.code, add.stderr).toBe(0);
    const added = JSON.parse(add.stdout).gitHost;
    expect(added).toMatchObject({ name: 'github', baseUrl: 'https://github.com', access: [{ who: 'role:member', repos: ['acme/*', 'acme-infra/**'] }], protectedRefs: ['refs/heads/main', 'refs/heads/master'], protectDefault: true, branchPrefix: 'agent/{handle}/' });
    expect(open(await sealed())).toBe(TOKEN);

    const list = await run(['connector', 'git', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('github');
    expect(list.stdout).toContain('role:member=acme/*,acme-infra/**');

    const bad = await run(['connector', 'git', 'update', 'github', '--branch-prefix', 'agents/']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/branchPrefix must contain \{handle\}/);

    const upd = await run(['connector', 'git', 'update', 'github', '--token-stdin', '--protect', 'refs/heads/release/*', '--json'], ROTATED);
    expect(upd.code, upd.stderr).toBe(0);
    expect(JSON.parse(upd.stdout)).toMatchObject({ changed: expect.arrayContaining(['token (rotated)', 'protectedRefs']), gitHost: { protectedRefs: ['refs/heads/release/*'] } });
    expect(open(await sealed())).toBe(ROTATED);

    // Push options: none by default; --push-option replaces the list, --no-push-options empties it.
    expect(JSON.parse(upd.stdout).gitHost.pushOptions).toEqual([]);
    const opts = await run(['connector', 'git', 'update', 'github', '--push-option', 'merge_request.create', '--push-option', 'merge_request.*', '--json']);
    expect(opts.code, opts.stderr).toBe(0);
    expect(JSON.parse(opts.stdout)).toMatchObject({ changed: ['pushOptions'], gitHost: { pushOptions: ['merge_request.create', 'merge_request.*'] } });
    expect((await run(['connector', 'git', 'list'])).stdout).toContain('merge_request.create merge_request.*');
    const badOpt = await run(['connector', 'git', 'update', 'github', '--push-option', '*']);
    expect(badOpt.code).toBe(1);
    expect(badOpt.stderr).toMatch(/pushOptions\[0\]/);
    const none = await run(['connector', 'git', 'update', 'github', '--no-push-options', '--json']);
    expect(JSON.parse(none.stdout).gitHost.pushOptions).toEqual([]);

    for (const r of [add, list, upd]) expect(`${r.stdout}${r.stderr}`).not.toMatch(/SECRET|XYZ987/);
    const audit = JSON.stringify((await t.opened.db.query(`select details from audit_log where action like 'connector.git.%'`)).rows);
    expect(audit).not.toMatch(/SECRET|XYZ987/);

    const rm = await run(['connector', 'git', 'remove', 'github', '--yes']);
    expect(rm.code).toBe(0);
    expect(await sealed()).toBeUndefined();
    expect((await run(['connector', 'git', 'remove', 'github', '--yes'])).code).toBe(1);
  });

  it('sets a GitHub App and an OAuth client from files, prints the callback URL, lists and ends people\'s connections', async () => {
    const file = (name: string, text: string) => {
      const path = join(t.env.dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };
    const secretFile = file('client-secret.txt', 'client-SECRET-abc\n');
    const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    const pemFile = file('app.pem', pem);
    const host = async () =>
      (await t.opened.db.query<{ kind: string; app: unknown; oauth: { clientId: string; authorizeUrl: string; scopes: string } | null; secret: string | null; oauthSecret: string | null; mode: string }>(
        `select credential_kind as kind, app, oauth, secret_sealed as secret, oauth_secret_sealed as "oauthSecret", user_connections as mode from git_hosts where name = 'forge'`,
      )).rows[0]!;

    // No shared credential: people's own accounts only, through a Gitea's OAuth client.
    const add = await run(['connector', 'git', 'add', 'forge', '--base-url', 'https://git.example.com', '--credential', 'none', '--user-connections', 'required', '--oauth-preset', 'gitea', '--oauth-client-id', 'cid-1', '--oauth-client-secret-file', secretFile, '--access', 'role:member=acme/*']);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stderr).toContain(`${t.url}/v1/connections/git/callback`);
    let row = await host();
    expect(row).toMatchObject({ kind: 'none', secret: null, mode: 'required', oauth: { clientId: 'cid-1', authorizeUrl: 'https://git.example.com/login/oauth/authorize', scopes: 'read:user write:repository' } });
    // The file's trailing newline is no part of the secret.
    expect(open(row.oauthSecret!)).toBe('client-SECRET-abc');

    // A GitHub App as the service credential; the scopes alone change, the client's id and secret stay.
    const upd = await run(['connector', 'git', 'update', 'forge', '--credential', 'github-app', '--github-app-id', '123', '--github-installation-id', '456', '--github-private-key-file', pemFile, '--user-connections', 'optional', '--oauth-scopes', 'read:user', '--json']);
    expect(upd.code, upd.stderr).toBe(0);
    const updated = JSON.parse(upd.stdout);
    expect(updated).toMatchObject({ callbackUrl: `${t.url}/v1/connections/git/callback`, gitHost: { credentialKind: 'github_app', credential: 'sealed', githubApp: { appId: '123', installationId: '456' }, userConnections: 'optional', oauth: { clientId: 'cid-1', clientSecret: 'sealed', scopes: 'read:user' } } });
    row = await host();
    expect(open(row.secret!)).toBe(pem);
    expect(open(row.oauthSecret!)).toBe('client-SECRET-abc');
    expect(row.oauth!.authorizeUrl).toBe('https://git.example.com/login/oauth/authorize');
    for (const r of [add, upd]) expect(`${r.stdout}${r.stderr}`).not.toMatch(/SECRET|PRIVATE KEY/);

    const missing = await run(['connector', 'git', 'update', 'forge', '--github-private-key-file', join(t.env.dir, 'nope.pem')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/--github-private-key-file: cannot read .*nope\.pem \(ENOENT\)/);

    // Alice connected her own account (as the OAuth callback would store it).
    const hostId = (await t.opened.db.query<{ id: string }>(`select id from git_hosts where name = 'forge'`)).rows[0]!.id;
    const box = createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]);
    const expiresAt = new Date(Date.now() + 3600_000);
    await createGitConnectionsRepo().upsert(t.opened.db, { tenantId: tenant.tenantId, hostId, userId: tenant.ids.alice, account: 'alice-at-forge', accessSealed: box.seal('gto_access'), refreshSealed: box.seal('gto_refresh'), expiresAt, scopes: 'read:user' });

    const list = await run(['connector', 'git', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/forge .*github_app .*optional \(1 connected\)/);

    const conns = await run(['connector', 'git', 'connections', 'forge', '--json']);
    expect(conns.code, conns.stderr).toBe(0);
    expect(JSON.parse(conns.stdout).connections).toEqual([{ userId: tenant.ids.alice, handle: 'alice', email: 'alice@acme.example', account: 'alice-at-forge', connectedAt: expect.any(String), expiresAt: expiresAt.toISOString() }]);
    const table = await run(['connector', 'git', 'connections', 'forge']);
    expect(table.stdout).toMatch(/alice .*alice@acme\.example .*alice-at-forge/);
    expect(`${conns.stdout}${table.stdout}`).not.toContain('gto_');

    const off = await run(['connector', 'git', 'disconnect', 'forge', '--user', 'alice@acme.example', '--yes']);
    expect(off.code, off.stderr).toBe(0);
    expect((await t.opened.db.query(`select 1 from git_connections where host_id = $1`, [hostId])).rowCount).toBe(0);
    expect((await t.opened.db.query(`select details from audit_log where action = 'connector.git.disconnect'`)).rows).toEqual([{ details: expect.objectContaining({ userId: tenant.ids.alice }) }]);
    const again = await run(['connector', 'git', 'disconnect', 'forge', '--user', 'alice', '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no connection to forge/);
    expect((await run(['connector', 'git', 'connections', 'forge'])).stderr).toMatch(/Nobody has connected/);

    // The client cannot go while people may still connect; with connections off it can.
    const refused = await run(['connector', 'git', 'update', 'forge', '--no-oauth']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/OAuth client/);
    const removed = await run(['connector', 'git', 'update', 'forge', '--no-oauth', '--user-connections', 'off', '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).not.toHaveProperty('callbackUrl');
    row = await host();
    expect(row).toMatchObject({ oauth: null, oauthSecret: null, mode: 'off' });
  });

  /** `aws connector git webhook`: the secret printed once and stored sealed, settings checked, the deliveries listed. */
  it("turns a host's webhook on, prints the secret once, rotates it, sets what triggers a run", async () => {
    const add = await run(['connector', 'git', 'add', 'hooks', '--base-url', 'https://github.com', '--token-stdin', '--access', 'role:member=acme/*'], TOKEN);
    expect(add.code, add.stderr).toBe(0);
    const hook = async () => (await t.opened.db.query(`select kind, webhook_id as id, webhook_secret_sealed as sealed, webhook_enabled as enabled, mention, trigger_label as label, webhook_repos as repos from git_hosts where name = 'hooks'`)).rows[0]!;

    const none = await run(['connector', 'git', 'webhook', 'hooks']);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stderr).toMatch(/takes no webhook yet/);
    const noKind = await run(['connector', 'git', 'webhook', 'hooks', '--enable']);
    expect(noKind.code).toBe(1);
    expect(noKind.stderr).toMatch(/kind is needed/);

    const on = await run(['connector', 'git', 'webhook', 'hooks', '--enable', '--kind', 'github', '--repo', 'acme/*', '--repo', 'acme-infra/**', '--json']);
    expect(on.code, on.stderr).toBe(0);
    const made = JSON.parse(on.stdout);
    let row = await hook();
    expect(made).toMatchObject({ webhook: { host: 'hooks', kind: 'github', enabled: true, secretSet: true, repos: ['acme/*', 'acme-infra/**'], webhookUrl: `${t.url}/v1/codehost/webhooks/${row.id}` }, changed: ['secret (generated, on)', 'repos'] });
    expect(open(row.sealed)).toBe(made.secret);

    // Shown once: reading the webhook again never prints it; a rotation prints the new one on stdout alone.
    const show = await run(['connector', 'git', 'webhook', 'hooks', '--json']);
    expect(JSON.parse(show.stdout)).not.toHaveProperty('secret');
    expect(show.stdout).not.toContain(made.secret);
    const rotated = await run(['connector', 'git', 'webhook', 'hooks', '--rotate']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const secret = rotated.stdout.trim();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(secret).not.toBe(made.secret);
    expect(rotated.stderr).toMatch(/events Issue comments, Issues, Pull request review comments/);
    row = await hook();
    expect(open(row.sealed)).toBe(secret);
    expect(`${rotated.stderr}`).not.toContain(secret);

    const bad = await run(['connector', 'git', 'webhook', 'hooks', '--mention', 'agent']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/mention must be "@"/);
    const set = await run(['connector', 'git', 'webhook', 'hooks', '--mention', '@acme-bot', '--label', 'ai-fix', '--disable', '--json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ changed: ['mention', 'label', 'enabled'], webhook: { enabled: false, mention: '@acme-bot', label: 'ai-fix' } });
    expect(await hook()).toMatchObject({ enabled: false, mention: '@acme-bot', label: 'ai-fix', repos: ['acme/*', 'acme-infra/**'] });
    // Off: no test delivery (the intake would answer 404); on again, one goes through the intake and is listed.
    const offTest = await run(['connector', 'git', 'webhook', 'hooks', '--test']);
    expect(offTest.code).toBe(1);
    expect(offTest.stderr).toMatch(/the webhook is off/);
    const tested = await run(['connector', 'git', 'webhook', 'hooks', '--enable', '--test', '--deliveries', '--json']);
    expect(tested.code, tested.stderr).toBe(0);
    const out = JSON.parse(tested.stdout);
    expect(out).toMatchObject({ changed: ['enabled'], test: { outcome: 'test' }, webhook: { enabled: true } });
    expect(out.deliveries).toEqual([expect.objectContaining({ deliveryId: out.test.deliveryId, event: 'ping', outcome: 'test' })]);
    expect((await run(['connector', 'git', 'webhook', 'hooks', '--deliveries'])).stdout).toMatch(/ping +test/);
    const audit = JSON.stringify((await t.opened.db.query(`select action, details from audit_log where action like 'codehost.%' order by ts`)).rows);
    expect(audit).not.toContain(secret);
    expect(audit).not.toContain(made.secret);
  });
});
