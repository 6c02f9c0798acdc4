import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signInAs, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { applyScriptedProvider } from '../helpers/runtime.js';

/**
 * The Terminal tab of the workspace pane in a real Chromium, under the dashboard's strict CSP: xterm.js
 * loaded as its own module, a shell in the person's real sandbox, a command typed and its output read.
 */
describe('the Terminal tab in Chromium', () => {
  let browser: Browser;
  let llm: FakeLlm;
  let t: TestApp;
  let context: BrowserContext;
  let page: Page;
  let sessionId = '';
  const violations: string[] = [];

  beforeAll(async () => {
    browser = await launchChromium();
    llm = await startFakeLlm();
    t = await startTestApp();
    const acme = await seedTenant(t, 'termweb', [{ handle: 'mia', roles: ['member'] }]);
    const owner = await signInAs(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    await applyScriptedProvider(t, owner.access, llm);
    await t.opened.core.startRuntime();
    const mia = await signInAs(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    sessionId = (await api(t, 'POST', '/v1/sessions', { token: mia.access, body: { title: 'terminal' } })).json.sessionId;
    context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
    await context.addCookies([{ name: 'agentws_access', value: mia.access, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
    page = await context.newPage();
    page.on('console', (m) => m.type() === 'error' && /Content Security Policy/.test(m.text()) && violations.push(m.text()));
  }, 180_000);
  afterAll(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await t?.opened.core.stopRuntime().catch(() => {});
    await t?.close();
    await llm?.close();
  });

  it('opens a shell in the workspace, runs what is typed and shows its output, sized to the pane', async () => {
    await page.goto(`${t.url}/#/sessions/${sessionId}`);
    await page.getByRole('tab', { name: 'Terminal' }).click();
    // Open (its runtime may have to start first), or a refusal the panel names.
    await page.locator('.terminal-box[data-state=open], .terminal-box[data-state=failed], .terminal-box[data-state=closed]').waitFor({ timeout: 90_000 });
    expect(await page.locator('.terminal-box').getAttribute('data-state'), (await page.locator('.terminal-state').textContent()) ?? '').toBe('open');
    // The prompt, then a command typed as keystrokes.
    await expect.poll(() => page.locator('.xterm-rows').textContent(), { timeout: 30_000 }).toMatch(/\$\s*$/m);
    await page.locator('.terminal-box').click();
    await page.keyboard.type('echo "web-$((6*7))"; pwd');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('.xterm-rows').textContent(), { timeout: 30_000 }).toMatch(/web-42\s*\/workspace/);
    // xterm's row sizing reached the page although its <style> elements are refused (the mirrored sheet):
    // rows have the same height, and the terminal fills the pane's width.
    const rows = await page.locator('.xterm-rows > div').evaluateAll((els) => els.slice(0, 3).map((e) => e.getBoundingClientRect().height));
    expect(rows[0]).toBeGreaterThan(8);
    expect(new Set(rows).size).toBe(1);
    const screen = (await page.locator('.xterm-screen').boundingBox())!;
    const box = (await page.locator('.terminal-box').boundingBox())!;
    expect(screen.width).toBeGreaterThan(box.width * 0.8);
    // Only xterm's own <style> elements were refused by the policy (never a script, never anything else).
    expect(violations.every((v) => /style/i.test(v))).toBe(true);
    await shoot(page, 'terminal-tab');
  }, 120_000);
});
