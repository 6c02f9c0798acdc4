import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium } from '../helpers/browser.js';

/**
 * Admin → Git hosts and Admin → MCP servers in a real headless Chromium (issue 28), one app and one
 * browser for both: each connector registered with its token, a refusal shown at its field, the access
 * edited, disabled and removed, as a person would; the token never comes back to the page.
 */
describe('the dashboard connector tabs in Chromium', () => {
  let browser: Browser;
  let t: TestApp;
  const contexts: BrowserContext[] = [];
  const GIT_TOKEN = `ghp-${Math.random().toString(36).slice(2)}`;
  const MCP_TOKEN = `tok-${Math.random().toString(36).slice(2)}`;

  /** A page signed in as the owner of a new tenant (its access cookie, as after a sign-in); dialogs accepted. */
  async function ownerPage(slug: string): Promise<Page> {
    const tenant = await seedTenant(t, slug);
    const token = await signToken(t, { sub: tenant.ids.owner, tid: tenant.tenantId, roles: ['owner'] });
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
    await page.getByText('baseUrl must be an http or https URL').waitFor();
    await form.locator('input[name=baseUrl]').fill('https://github.com');
    await form.getByRole('button', { name: 'Add git host' }).click();
    const host = page.getByRole('form', { name: 'Git host github' });
    await host.waitFor();
    expect(await host.locator('input[name=token]').inputValue()).toBe('');
    expect(await host.locator('textarea[name=access]').inputValue()).toBe('role:member=acme/*');

    await host.locator('textarea[name=access]').fill('role:member=acme/*\nteam:ops=infra/**');
    await host.getByRole('button', { name: 'Save' }).click();
    await expect.poll(async () => (await t.opened.db.query(`select access from git_hosts where name = 'github'`)).rows[0]?.access).toEqual([
      { who: 'role:member', repos: ['acme/*'] },
      { who: 'team:ops', repos: ['infra/**'] },
    ]);
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
    await form.locator('textarea[name=access]').fill('member: lookup, search\nadmin');
    await form.getByRole('button', { name: 'Add MCP server' }).click();
    await page.getByText('url must be an http(s) URL').waitFor();
    await form.locator('input[name=url]').fill('https://mcp.example.com/mcp');
    await form.getByRole('button', { name: 'Add MCP server' }).click();
    const row = page.getByRole('row', { name: /tracker/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('member: lookup, search; admin: all tools');

    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit MCP server tracker' });
    expect(await edit.locator('input[name=secret]').inputValue()).toBe('');
    await edit.locator('textarea[name=access]').fill('member');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('member: all tools').waitFor();
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByRole('button', { name: 'Enable' }).waitFor();
    expect(await page.content()).not.toContain(MCP_TOKEN);
    const stored = (await t.opened.db.query(`select access, enabled, secret_sealed is not null as sealed from mcp_servers where name = 'tracker'`)).rows[0];
    expect(stored).toEqual({ access: [{ role: 'member', tools: '*' }], enabled: false, sealed: true });

    await row.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('No MCP servers yet.').waitFor();
    const audit = (await t.opened.db.query(`select action from audit_log where target = 'mcp:tracker' order by ts`)).rows.map((r) => r.action);
    expect(audit).toEqual(['connector.mcp.add', 'connector.mcp.update', 'connector.mcp.update', 'connector.mcp.remove']);
  });
});
