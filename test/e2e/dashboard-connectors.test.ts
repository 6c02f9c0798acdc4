import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createGitConnectionsRepo } from '../../src/core/connectors/git-connections.repo.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB } from '../../src/core/codehost/codehost-contract.js';
import { ensureQueues } from '../../src/jobs/boss.js';
import { githubDelivery } from '../fixtures/code-host-deliveries.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';

/**
 * Admin → Git hosts and Admin → MCP servers in a real headless Chromium, one app and one
 * browser for both: each connector registered with its token, a refusal shown at its field, the access
 * edited, disabled and removed, as a person would; the token never comes back to the page. The API tokens
 * screen shares the app and the browser (its own tenant and context): a file of its own cost a
 * CI run an app and a Chromium start for one test. So do a git host's webhook panel and the sessions
 * list's mark of a session a code host started.
 */
describe('the dashboard connector tabs and API tokens screen in Chromium', () => {
  let browser: Browser;
  let t: TestApp;
  const contexts: BrowserContext[] = [];
  const GIT_TOKEN = `ghp-${Math.random().toString(36).slice(2)}`;
  const MCP_TOKEN = `tok-${Math.random().toString(36).slice(2)}`;

  /** A page signed in as the owner of a new tenant (its access cookie, as after a sign-in); dialogs accepted. */
  async function ownerPage(slug: string): Promise<Page> {
    const tenant = await seedTenant(t, slug);
    return pageAs(tenant.tenantId, tenant.ids.owner, ['owner']);
  }
  async function pageAs(tenantId: string, userId: string, roles: string[]): Promise<Page> {
    const token = await signToken(t, { sub: userId, tid: tenantId, roles });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    await context.addCookies([{ name: 'agentws_access', value: token, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
    const page = await context.newPage();
    page.on('dialog', (d) => void d.accept());
    return page;
  }

  beforeAll(async () => {
    browser = await launchChromium();
    t = await startTestApp();
  }, 120_000);
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => {});
    await browser?.close().catch(() => {});
    await t?.close();
  });

  it('adds, edits and removes a git host; a bad base URL is refused; the token is never shown', async () => {
    const page = await ownerPage('acme-git');
    await page.goto(`${t.url}/#/admin/git`);
    await page.getByRole('link', { name: 'Git hosts' }).waitFor();
    await page.getByText('No git hosts yet').waitFor();

    await page.getByRole('button', { name: 'New git host' }).click();
    const form = page.getByRole('form', { name: 'New git host' });
    await form.locator('input[name=name]').fill('github');
    await form.locator('input[name=baseUrl]').fill('ssh://github.com');
    await form.locator('input[name=token]').fill(GIT_TOKEN);
    await form.locator('textarea[name=access]').fill('role:member=acme/*');
    await form.getByRole('button', { name: 'Add git host' }).click();
    await form.locator('.field-error', { hasText: 'must be an http or https URL' }).waitFor();
    await form.locator('input[name=baseUrl]').fill('https://github.com');
    await form.getByRole('button', { name: 'Add git host' }).click();
    const host = page.getByRole('form', { name: 'Git host github' });
    await host.waitFor();
    expect(await host.locator('input[name=token]').inputValue()).toBe('');
    expect(await host.locator('textarea[name=access]').inputValue()).toBe('role:member=acme/*');

    // A rule without "=" is refused at its field, as the CLI refuses it (one grammar: lib/access-grammar.ts).
    await host.locator('textarea[name=access]').fill('role:member=acme/*\nteam:ops');
    await host.getByRole('button', { name: 'Save' }).click();
    await host.locator('.field-error', { hasText: 'Access: "team:ops" must be <who>=<pattern>[,<pattern>...], e.g. role:member=org/*' }).waitFor();
    await host.locator('textarea[name=access]').fill('role:member=acme/*\nteam:ops=infra/**');
    // Push options agents may send (none by default): one a line; a malformed one refused at its field.
    expect(await host.locator('textarea[name=pushOptions]').inputValue()).toBe('');
    await host.locator('textarea[name=pushOptions]').fill('merge_request.create\n*');
    await host.getByRole('button', { name: 'Save' }).click();
    // Under the list, naming the entry (its second line) in plain words.
    await host.locator('.field-error', { hasText: /^Entry 2: "\*" is not an option key/ }).waitFor();
    await host.locator('textarea[name=pushOptions]').fill('merge_request.create\nmerge_request.*');
    await host.getByRole('button', { name: 'Save' }).click();
    await expect.poll(async () => (await t.opened.db.query(`select access, push_options from git_hosts where name = 'github'`)).rows[0]).toEqual({
      access: [
        { who: 'role:member', repos: ['acme/*'] },
        { who: 'team:ops', repos: ['infra/**'] },
      ],
      push_options: ['merge_request.create', 'merge_request.*'],
    });
    expect(await page.content()).not.toContain(GIT_TOKEN);

    await host.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('No git hosts yet').waitFor();
    const audit = (await t.opened.db.query(`select action from audit_log where target = 'git_host:github' order by ts`)).rows.map((r) => r.action);
    expect(audit).toEqual(['connector.git.add', 'connector.git.update', 'connector.git.remove']);
  });

  it('adds, edits, disables and removes a server; a bad URL is refused; the token is never shown', async () => {
    const page = await ownerPage('acme-mcp');
    await page.goto(`${t.url}/#/admin/mcp`);
    await page.getByRole('link', { name: 'MCP servers' }).waitFor();
    await page.getByText('No MCP servers yet.').waitFor();

    await page.getByRole('button', { name: 'New MCP server' }).click();
    const form = page.getByRole('form', { name: 'New MCP server' });
    await form.locator('input[name=name]').fill('tracker');
    await form.locator('input[name=url]').fill('ftp://mcp.example.com/mcp');
    await form.locator('input[name=secret]').fill(MCP_TOKEN);
    // The CLI's grammar (`--allow member=lookup,search`), refusing what the CLI refuses, at its field.
    await form.locator('textarea[name=access]').fill('member=lookup\nmember=search');
    await form.getByRole('button', { name: 'Add MCP server' }).click();
    await form.locator('#mcp-access-error', { hasText: 'Roles: names the role member twice: give its whole list once, e.g. member=search,get_issue' }).waitFor();
    await form.locator('textarea[name=access]').fill('member=lookup,search\nadmin');
    await form.getByRole('button', { name: 'Add MCP server' }).click();
    await form.locator('#mcp-url-error', { hasText: 'must be an http(s) URL' }).waitFor();
    await form.locator('input[name=url]').fill('https://mcp.example.com/mcp');
    await form.getByRole('button', { name: 'Add MCP server' }).click();
    const row = page.getByRole('row', { name: /tracker/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('member: lookup, search; admin: all tools');

    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit MCP server tracker' });
    expect(await edit.locator('input[name=secret]').inputValue()).toBe('');
    await edit.locator('textarea[name=access]').fill('member');
    // Resources and prompts apart: none unless listed.
    expect(await edit.locator('textarea[name=resources]').inputValue()).toBe('');
    await edit.locator('textarea[name=resources]').fill('member=docs://handbook/*,tickets://T-1');
    await edit.locator('textarea[name=prompts]').fill('member=triage\nadmin');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('member: all tools, resources docs://handbook/*, tickets://T-1, prompts triage').waitFor();
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByRole('button', { name: 'Enable' }).waitFor();
    expect(await page.content()).not.toContain(MCP_TOKEN);
    const stored = (await t.opened.db.query(`select access, enabled, secret_sealed is not null as sealed from mcp_servers where name = 'tracker'`)).rows[0];
    expect(stored).toEqual({
      access: [
        { role: 'member', tools: '*', resources: ['docs://handbook/*', 'tickets://T-1'], prompts: ['triage'] },
        { role: 'admin', tools: [], resources: [], prompts: '*' },
      ],
      enabled: false,
      sealed: true,
    });
    // Edited again, the form shows the grants as stored.
    await row.getByRole('button', { name: 'Edit' }).click();
    const again = page.getByRole('form', { name: 'Edit MCP server tracker' });
    expect(await again.locator('textarea[name=access]').inputValue()).toBe('member\nadmin=');
    expect(await again.locator('textarea[name=resources]').inputValue()).toBe('member=docs://handbook/*,tickets://T-1');
    expect(await again.locator('textarea[name=prompts]').inputValue()).toBe('member=triage\nadmin');
    await again.getByRole('button', { name: 'Cancel' }).click();

    await row.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('No MCP servers yet.').waitFor();
    const audit = (await t.opened.db.query(`select action from audit_log where target = 'mcp:tracker' order by ts`)).rows.map((r) => r.action);
    expect(audit).toEqual(['connector.mcp.add', 'connector.mcp.update', 'connector.mcp.update', 'connector.mcp.remove']);
  });

  it('an admin sets a host\'s OAuth client and sees the callback URL; a member connects from Connections; the admin ends it', async () => {
    const tenant = await seedTenant(t, 'acme-conn', [{ handle: 'mia', roles: ['member'] }]);
    const admin = await pageAs(tenant.tenantId, tenant.ids.owner, ['owner']);
    const member = await pageAs(tenant.tenantId, tenant.ids.mia, ['member']);
    const CLIENT_SECRET = `cs-${Math.random().toString(36).slice(2)}`;
    const callback = `${t.url}/v1/connections/git/callback`;

    await member.goto(`${t.url}/#/sessions`);
    await member.getByRole('link', { name: 'Connections' }).click();
    await member.getByText('No git host takes personal connections yet').waitFor();

    await admin.goto(`${t.url}/#/admin/git`);
    await admin.getByRole('button', { name: 'New git host' }).click();
    const form = admin.getByRole('form', { name: 'New git host' });
    await form.locator('input[name=name]').fill('forge');
    await form.locator('input[name=baseUrl]').fill('https://git.example.com');
    await form.locator('input[name=token]').fill(GIT_TOKEN);
    await form.locator('textarea[name=access]').fill('role:member=acme/*');
    await form.locator('select[name=userConnections]').selectOption('optional');
    await form.locator('select[name=oauthPreset]').selectOption('gitea');
    expect(await form.getByTestId('callback-url').textContent()).toBe(callback);
    await form.locator('input[name=clientId]').fill('forge-client');
    // Without the client's secret, the refusal shows at the OAuth client.
    await form.getByRole('button', { name: 'Add git host' }).click();
    await form.locator('.field-error', { hasText: 'per-user connections need the host\'s OAuth client' }).waitFor();
    await form.locator('input[name=clientSecret]').fill(CLIENT_SECRET);
    await form.getByRole('button', { name: 'Add git host' }).click();
    const host = admin.getByRole('form', { name: 'Git host forge' });
    await host.waitFor();
    expect(await host.locator('select[name=oauthPreset]').inputValue()).toBe('custom');
    expect(await host.locator('input[name=authorizeUrl]').inputValue()).toBe('https://git.example.com/login/oauth/authorize');
    expect(await host.locator('input[name=clientSecret]').inputValue()).toBe('');
    expect(await host.getByTestId('callback-url').textContent()).toBe(callback);
    await host.getByText('0 people have connected their own account.').waitFor();
    await shoot(admin, '40-admin-git-host-oauth');
    const stored = (await t.opened.db.query(`select oauth->>'clientId' as "clientId", user_connections as mode, oauth_secret_sealed as secret from git_hosts where name = 'forge'`)).rows[0];
    expect(stored).toMatchObject({ clientId: 'forge-client', mode: 'optional' });
    const box = createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]);
    expect(box.open(stored.secret)).toBe(CLIENT_SECRET);
    expect(await admin.content()).not.toContain(CLIENT_SECRET);

    // The member's Connect goes to the host's consent page (answered here: no real host).
    await member.reload();
    const item = member.getByTestId('connection').filter({ hasText: 'forge' });
    await item.getByText('Not connected').waitFor();
    await member.route('https://git.example.com/**', (r) => r.fulfill({ status: 200, contentType: 'text/html', body: '<h1>Allow?</h1>' }));
    const consent = member.waitForRequest((r) => r.url().startsWith('https://git.example.com/login/oauth/authorize'));
    await item.getByRole('button', { name: 'Connect' }).click();
    const asked = new URL((await consent).url());
    expect(Object.fromEntries(asked.searchParams)).toMatchObject({ client_id: 'forge-client', redirect_uri: callback, response_type: 'code', code_challenge_method: 'S256', state: expect.any(String) });

    // A callback this browser did not start comes back to Connections with the reason.
    await member.goto(`${callback}?state=not-ours&code=abc`);
    await member.getByText(/Not connected: this connection was not started here/).waitFor();
    expect(new URL(member.url()).hash).toBe('#/connections');

    // Connected (as the callback stores it): the member sees the account, the admin sees the member.
    const hostId = (await t.opened.db.query<{ id: string }>(`select id from git_hosts where tenant_id = $1 and name = 'forge'`, [tenant.tenantId])).rows[0]!.id;
    const connect = () =>
      createGitConnectionsRepo().upsert(t.opened.db, { tenantId: tenant.tenantId, hostId, userId: tenant.ids.mia, account: 'mia-at-forge', accessSealed: box.seal('gto_a'), refreshSealed: null, expiresAt: null, scopes: '' });
    await connect();
    await member.goto(`${t.url}/#/connections?connected=forge`);
    await member.getByText('Connected to forge: your agents now act as you there.').waitFor();
    await item.getByText(/Connected as mia-at-forge · since/).waitFor();
    await shoot(member, '41-connections');
    // Its refresh failed (as the gateway records it): said on the page until it works again.
    await t.opened.db.query(`update git_connections set refresh_failed_at = now(), refresh_error = 'the host refused (invalid_grant)' where host_id = $1`, [hostId]);
    await member.reload();
    await item.getByText("Could not be refreshed (the host refused (invalid_grant)). Until it works again, your agents reach it with your organisation's shared access. Reconnect to fix it.").waitFor();
    await item.getByRole('button', { name: 'Disconnect' }).click();
    await item.getByText('Not connected').waitFor();
    expect((await t.opened.db.query(`select 1 from git_connections where host_id = $1`, [hostId])).rowCount).toBe(0);

    await connect();
    await admin.reload();
    await host.getByText('1 person has connected their own account.').waitFor();
    const people = host.getByRole('list', { name: 'Connections to forge' });
    expect(await people.textContent()).toContain('mia@acme-conn.example as mia-at-forge');
    await people.getByRole('button', { name: 'Disconnect' }).click();
    await host.getByText('0 people have connected their own account.').waitFor();
    expect((await t.opened.db.query(`select 1 from git_connections where host_id = $1`, [hostId])).rowCount).toBe(0);
    const audit = (await t.opened.db.query(`select user_id as actor from audit_log where tenant_id = $1 and action = 'connector.git.disconnect' order by ts`, [tenant.tenantId])).rows;
    expect(audit.map((a) => a.actor)).toEqual([tenant.ids.mia, tenant.ids.owner]);
  });

  /**
   * The "API tokens" screen: a member creates a token with the scopes they hold (admin is not
   * offered), sees and copies the value once, uses it, sees its last use, revokes it.
   */
  it('API tokens: creates a token shown once with a copy button, lists its last use, revokes it', async () => {
    const acme = await seedTenant(t, 'acme', [{ handle: 'mel', roles: ['member'] }]);
    const token = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
    await context.addCookies([{ name: 'agentws_access', value: token, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
    const page = await context.newPage();
    page.on('dialog', (d) => void d.accept());

    await page.goto(`${t.url}/#/sessions`);
    await page.getByRole('link', { name: 'API tokens' }).click();
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    await page.getByText('No tokens yet.').waitFor();
    const form = page.getByRole('form', { name: 'New token' });
    // A member holds read, sessions and memories; admin is not offered.
    expect(await form.locator('input[type=checkbox]').evaluateAll((els) => els.map((e) => (e as unknown as { name: string }).name))).toEqual(['read', 'sessions', 'memories']);
    expect(await form.locator('input[name=days]').getAttribute('max')).toBe('90');

    await form.getByPlaceholder('nightly report').fill('nightly report');
    await form.locator('input[name=sessions]').check();
    await form.locator('input[name=days]').fill('14');
    await form.getByRole('button', { name: 'Create token' }).click();
    const value = (await page.getByTestId('token-value').textContent())!.trim();
    expect(value).toMatch(/^agentws_pat_[A-Za-z0-9_-]{43}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText())).toBe(value);
    const item = page.getByTestId('token').filter({ hasText: 'nightly report' });
    await item.getByText('read, sessions').waitFor();
    await item.getByText('never used').waitFor();
    await shoot(page, 'tokens-created');

    // Used by a script, then shown once only: after "Done" and a reload the value is nowhere on the page.
    expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(200);
    await page.getByRole('button', { name: 'Done' }).click();
    await page.reload();
    await item.getByText(/last used/).waitFor();
    expect(await page.content()).not.toContain(value);

    await item.getByRole('button', { name: 'Revoke' }).click();
    await item.getByText('revoked').waitFor();
    expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(401);
  });

  /**
   * A git host's webhook: turned on in the host's panel, the URL and the secret shown once (gone
   * after a reload, never in the page again), a test delivery through the real intake listed as "test",
   * and a comment delivery signed as GitHub signs it, by someone nobody mapped, listed as refused.
   */
  it("a git host's webhook: URL and secret once, a test delivery, a refused comment in the deliveries", async () => {
    const tenant = await seedTenant(t, 'acme-hooks');
    // The queues the intake sends to (made at start-up for the handlers the core registers; idempotent).
    await ensureQueues(t.opened.boss, [CODE_HOST_RUN_JOB, CODE_HOST_REPLY_JOB]);
    const owner = await signToken(t, { sub: tenant.ids.owner, tid: tenant.tenantId, roles: ['owner'] });
    expect((await api(t, 'POST', '/v1/admin/connectors/git', { token: owner, body: { name: 'github', baseUrl: 'https://github.com', token: GIT_TOKEN, access: [{ who: '*', repos: ['acme/*'] }] } })).status).toBe(201);
    const page = await pageAs(tenant.tenantId, tenant.ids.owner, ['owner']);
    await page.goto(`${t.url}/#/admin/git`);
    const panel = page.getByRole('region', { name: 'Webhook of github' });
    // The kind is guessed from the base URL.
    expect(await panel.locator('select[name=kind]').inputValue()).toBe('github');
    await panel.getByRole('button', { name: 'Turn on webhooks' }).click();
    const secret = (await panel.getByTestId('webhook-secret').textContent())!.trim();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await panel.getByText('it will not be shown again').waitFor();
    const url = (await panel.getByTestId('webhook-url').textContent())!.trim();
    expect(url).toMatch(new RegExp(`^${t.url}/v1/codehost/webhooks/[A-Za-z0-9_-]{24}$`));
    await panel.getByText('Events: Issue comments, Issues, Pull request review comments').waitFor();
    await panel.locator('textarea[name=repos]').fill('acme/*');
    await panel.getByRole('button', { name: 'Save webhook' }).click();
    await expect.poll(async () => (await t.opened.db.query(`select webhook_repos as repos from git_hosts where tenant_id = $1`, [tenant.tenantId])).rows[0].repos).toEqual(['acme/*']);

    await page.reload();
    await panel.getByTestId('webhook-url').waitFor();
    expect(await panel.getByTestId('webhook-secret-box').count()).toBe(0);
    expect(await page.content()).not.toContain(secret);

    await panel.getByRole('button', { name: 'Send a test delivery' }).click();
    await panel.getByText('Test delivery: test').waitFor();
    const outcomes = () => panel.getByTestId('delivery-outcome').allTextContents();
    await expect.poll(outcomes).toEqual(['test']);

    // GitHub's comment on an issue, signed with the secret, by an account no person here is mapped to.
    const d = githubDelivery({ secret, repo: 'acme/api', number: 12, comment: '@agent please fix the flaky test', actor: { login: 'stranger', id: 999 } });
    const res = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
    expect(res.status).toBe(202);
    await panel.getByRole('button', { name: 'Refresh' }).click();
    await expect.poll(outcomes).toEqual(['refused · unmapped', 'test']);
    const row = panel.getByTestId('delivery').first();
    expect(await row.textContent()).toContain('stranger');
    expect(await row.getByRole('link', { name: 'acme/api#12', exact: true }).getAttribute('href')).toBe('https://github.com/acme/api/issues/12');
    expect(await page.content()).not.toContain(secret);
    await shoot(page, '44-admin-git-host-webhook');
  });

  /** A session a code host started carries its issue's link in the sessions list; a payload's non-http URL is no link. */
  it('the sessions list marks a session started from an issue with its link', async () => {
    const tenant = await seedTenant(t, 'acme-origin', [{ handle: 'mo', roles: ['member'] }]);
    const page = await pageAs(tenant.tenantId, tenant.ids.mo, ['member']);
    const insert = (title: string, url: string | null, label: string | null) =>
      t.opened.db.query(`insert into agent_sessions (tenant_id, owner_id, title, directory, origin_url, origin_label) values ($1, $2, $3, '/tmp/x', $4, $5)`, [tenant.tenantId, tenant.ids.mo, title, url, label]);
    await insert('acme/api#12: Flaky login test', 'https://github.com/acme/api/issues/12', 'acme/api#12');
    await insert('acme/web#3: Hostile', 'javascript:alert(1)', 'acme/web#3');
    await insert('A chat of my own', null, null);
    await page.goto(`${t.url}/#/sessions`);
    const row = (title: string) => page.getByTestId('session-row').filter({ hasText: title });
    const link = row('Flaky login test').getByRole('link', { name: 'acme/api#12', exact: true });
    expect(await link.getAttribute('href')).toBe('https://github.com/acme/api/issues/12');
    expect(await link.getAttribute('target')).toBe('_blank');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
    // The title still opens the session.
    expect(await row('Flaky login test').locator('a').first().getAttribute('href')).toMatch(/^#\/sessions\//);
    await row('Hostile').getByTestId('session-origin').waitFor();
    expect(await row('Hostile').getByRole('link', { name: 'acme/web#3', exact: true }).count()).toBe(0);
    expect(await row('A chat of my own').getByTestId('session-origin').count()).toBe(0);
    await shoot(page, '45-sessions-origin');
  });
});
