import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { api, seedTenant, signToken } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { agentTurn, applyScriptedProvider, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * Sharing in a real headless Chromium (issue 39), one browser and one runtime for every case: the owner
 * shares from the Share dialog (at 1280 px), a teammate on a phone's width (390 px) finds the session under
 * "Shared with me", follows a turn live read-only, and sees the stream end when the owner revokes; then
 * the owner hands the session over from its dialog and their page turns read-only.
 */
describe('the dashboard Share dialog and a teammate following live, in Chromium', () => {
  let browser: Browser;
  let r: RuntimeApp;
  const contexts: BrowserContext[] = [];
  let owner: Page;
  let mate: Page;
  let sessionId: string;
  const tok: Record<string, string> = {};
  const uncaught: string[] = [];

  const pageFor = async (token: string, viewport: { width: number; height: number }) => {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    await context.addCookies([{ name: 'agentws_access', value: token, url: r.t.url, httpOnly: true, sameSite: 'Lax' }]);
    const page = await context.newPage();
    page.on('pageerror', (err) => uncaught.push(err.message));
    return page;
  };
  // What this feature shows stays within a phone's width (the header's own wrapping is the phone-width work's).
  type Box = { getBoundingClientRect(): { right: number }; scrollWidth: number; clientWidth: number };
  type Win = { innerWidth: number; document: { querySelectorAll(s: string): Iterable<Box> } };
  const fits = (page: Page, selector: string) =>
    page.evaluate((sel) => {
      const w = globalThis as unknown as Win;
      return [...w.document.querySelectorAll(sel)].every((e) => e.getBoundingClientRect().right <= w.innerWidth + 0.5 && e.scrollWidth <= e.clientWidth + 1);
    }, selector);

  beforeAll(async () => {
    browser = await launchChromium();
    r = await startRuntimeApp();
    const acme = await seedTenant(r.t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'max', roles: ['member'] },
    ]);
    tok.owner = await signToken(r.t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.mia = await signToken(r.t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.max = await signToken(r.t, { sub: acme.ids.max, tid: acme.tenantId, roles: ['member'] });
    await applyScriptedProvider(r.t, tok.owner, r.llm);
    owner = await pageFor(tok.mia, { width: 1280, height: 900 });
    mate = await pageFor(tok.max, { width: 390, height: 844 });
    sessionId = (await agentTurn(r, tok.mia, [{ text: 'The first answer.' }], { title: 'Release notes', text: 'draft them' })).sessionId;
  }, 180_000);
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => {});
    await browser?.close().catch(() => {});
    await r?.close();
  });

  it('shares from the dialog: a refusal under the field, a teammate picked by name, listed live', async () => {
    await owner.goto(`${r.t.url}/#/sessions/${sessionId}`);
    await owner.getByText('The first answer.').waitFor({ timeout: 30_000 });
    await owner.getByRole('button', { name: 'Share…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Share this session' });
    await dialog.getByText('Nobody yet.').waitFor();
    // Somebody not of the organisation: refused in plain words, under the field.
    await dialog.getByPlaceholder('Name, email or team').fill('nobody@elsewhere.example');
    await dialog.getByRole('button', { name: 'Share', exact: true }).click();
    await expect.poll(() => dialog.locator('.field-error').innerText()).toContain('no active person "nobody@elsewhere.example" in your organisation');
    // The teammate by a part of the name.
    await dialog.getByPlaceholder('Name, email or team').fill('ma');
    await dialog.getByRole('button', { name: 'max <max@acme.example>' }).click();
    await dialog.getByLabel('Live: they follow it as it happens').check();
    await dialog.getByRole('button', { name: 'Share', exact: true }).click();
    const shared = dialog.getByRole('list', { name: 'Shared with' });
    await shared.getByText('max <max@acme.example>').waitFor({ timeout: 10_000 });
    expect(await shared.innerText()).toContain('live');
    expect(await dialog.locator('.field-error').count()).toBe(0);
    await shoot(owner, '39-share-dialog');
  }, 60_000);

  it('lets the teammate follow the session live, read-only, at a phone\'s width', async () => {
    await mate.goto(`${r.t.url}/#/sessions`);
    const list = mate.getByRole('region', { name: 'Shared with me' });
    await list.getByRole('link', { name: 'Release notes' }).waitFor();
    expect(await list.innerText()).toContain('mia <mia@acme.example> · live');
    expect(await fits(mate, '.shared-with-me li')).toBe(true);
    await list.getByRole('link', { name: 'Release notes' }).click();
    await mate.getByText('The first answer.').waitFor({ timeout: 30_000 });
    expect(await mate.getByTestId('read-only').innerText()).toContain('Read-only: shared with you by mia <mia@acme.example>, live');
    // No way to act on somebody else's session: no composer, stop, share, hand-over or workspace pane.
    expect(await mate.getByRole('textbox', { name: 'Message' }).count()).toBe(0);
    expect(await mate.getByRole('button', { name: /Share…|Hand over…|Plan a task…/ }).count()).toBe(0);
    expect(await mate.locator('.workspace-pane').count()).toBe(0);
    await mate.locator('.dot.on').waitFor({ timeout: 15_000 });

    // The owner prompts; the teammate sees the turn as it happens (the answer is held until they saw it start).
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    r.llm.script([{ text: 'Second answer, followed live.', until: gate }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tok.mia, body: { text: 'add the fixes', agent: 'build' } })).status).toBe(202);
    await mate.getByText('add the fixes').waitFor({ timeout: 30_000 });
    expect(await mate.getByText('Second answer, followed live.').count()).toBe(0);
    release();
    await mate.getByText('Second answer, followed live.').waitFor({ timeout: 30_000 });
    for (const sel of ['.chat', '.transcript', '[data-testid=read-only]', '.msg']) expect(await fits(mate, sel), sel).toBe(true);
    await shoot(mate, '39-shared-live-390');
  }, 90_000);

  it('ends the teammate\'s stream when the owner revokes the share', async () => {
    const dialog = owner.getByRole('dialog', { name: 'Share this session' });
    await dialog.getByRole('button', { name: 'Revoke max <max@acme.example>' }).click();
    await dialog.getByText('Nobody yet.').waitFor({ timeout: 10_000 });
    await mate.getByText('The owner stopped sharing this session with you.').waitFor({ timeout: 15_000 });
    await mate.locator('.dot.off').waitFor();
    // Gone from their list, too.
    await mate.goto(`${r.t.url}/#/sessions`);
    await mate.getByRole('heading', { name: 'Sessions' }).waitFor();
    expect(await mate.getByRole('region', { name: 'Shared with me' }).count()).toBe(0);
    expect(uncaught).toEqual([]);
  }, 60_000);

  it('hands the session over from the dialog: the owner\'s page turns read-only, the teammate owns it', async () => {
    await owner.getByRole('dialog', { name: 'Share this session' }).getByRole('button', { name: 'Close' }).click();
    await owner.getByRole('button', { name: 'Hand over…' }).click();
    const dialog = owner.getByRole('dialog', { name: 'Hand over this session' });
    await dialog.getByPlaceholder('Name or email').fill('max');
    await dialog.getByRole('button', { name: 'max <max@acme.example>' }).click();
    await dialog.getByRole('button', { name: 'Hand over', exact: true }).click();
    await owner.getByTestId('read-only').waitFor({ timeout: 30_000 });
    expect(await owner.getByTestId('read-only').innerText()).toContain('shared with you by max <max@acme.example>, live');
    expect(await owner.getByRole('textbox', { name: 'Message' }).count()).toBe(0);
    expect((await api(r.t, 'GET', `/v1/sessions/${sessionId}/access`, { token: tok.max })).json.role).toBe('owner');
    expect(uncaught).toEqual([]);
  }, 60_000);
});
