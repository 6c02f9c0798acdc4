import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';

/**
 * The "API tokens" screen in a real headless Chromium (issue 29): a member creates a token with the scopes
 * they hold (admin is not offered), sees and copies the value once, uses it, sees its last use, revokes it.
 */
describe('the dashboard API tokens screen in Chromium', () => {
  let browser: Browser;
  let t: TestApp;
  let context: BrowserContext;

  beforeAll(async () => {
    browser = await launchChromium();
    t = await startTestApp();
  }, 120_000);
  afterAll(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await t?.close();
  });

  it('creates a token shown once with a copy button, lists its last use, revokes it', async () => {
    const acme = await seedTenant(t, 'acme', [{ handle: 'mel', roles: ['member'] }]);
    const token = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
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
});
