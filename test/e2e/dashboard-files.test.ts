import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium, shoot } from '../helpers/browser.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/** A 1x1 PNG (a red pixel). */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

/**
 * The Files tab of the workspace pane in a real headless Chromium (issue 38): a person sees the file their
 * agent wrote, opens it (syntax colour), uploads a file and an image (shown from the same-origin file URL
 * under the dashboard's strict CSP), downloads a file and the workspace as an archive.
 */
describe('the dashboard Files tab in Chromium', () => {
  let browser: Browser;
  let r: RuntimeApp;
  let context: BrowserContext;

  beforeAll(async () => {
    browser = await launchChromium();
    r = await startRuntimeApp();
  }, 180_000);
  afterAll(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await r?.close();
  });

  it('browses, views, uploads and downloads the person\'s own files', async () => {
    const people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: 'src/plan.ts', content: 'export const answer = 42; // the plan\n' } } }, { text: 'wrote the plan' }]);
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    await context.addCookies([{ name: 'agentws_access', value: people.tokens.member, url: r.t.url, httpOnly: true, sameSite: 'Lax' }]);
    const page = await context.newPage();
    const cspErrors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });

    await page.goto(`${r.t.url}/#/sessions/${turn.sessionId}`);
    await page.getByRole('tab', { name: 'Files' }).click();
    const list = page.getByRole('list', { name: 'Files' });
    await list.getByRole('button', { name: /src/ }).click();
    await list.getByRole('button', { name: 'plan.ts' }).click();
    const preview = page.getByRole('region', { name: 'File src/plan.ts' });
    await preview.getByText('export const answer = 42;', { exact: false }).waitFor();
    // Syntax colour: the keyword is its own element.
    expect(await preview.locator('.tok-kw').first().textContent()).toBe('export');

    // Upload a text file and an image into src; both are listed, the image shown.
    await page.getByLabel('Upload files').setInputFiles([
      { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('uploaded from the browser\n') },
      { name: 'dot.png', mimeType: 'image/png', buffer: PNG },
    ]);
    await page.getByRole('status').getByText('Uploaded 2 files.').waitFor();
    await list.getByRole('button', { name: 'notes.txt' }).waitFor();
    await list.getByRole('button', { name: 'dot.png' }).click();
    const img = page.getByRole('region', { name: 'File src/dot.png' }).locator('img');
    await img.waitFor();
    await expect.poll(() => img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).toBe(1);
    await shoot(page, 'files-tab');
    expect(readFileSync(join(r.t.opened.core.config.dataDir, 'workspaces', people.tenantId, people.ids.mia, 'src', 'notes.txt'), 'utf8')).toBe('uploaded from the browser\n');

    // Download one file, then the folder as an archive.
    const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download notes.txt' }).click()]);
    expect(file.suggestedFilename()).toBe('notes.txt');
    expect(readFileSync((await file.path())!, 'utf8')).toBe('uploaded from the browser\n');
    const [archive] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download folder' }).click()]);
    expect(archive.suggestedFilename()).toBe('src.tar');
    const tarBytes = readFileSync((await archive.path())!);
    expect(tarBytes.includes(Buffer.from('export const answer = 42;'))).toBe(true);
    expect(cspErrors).toEqual([]);
  }, 120_000);
});
