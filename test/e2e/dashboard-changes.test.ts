import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { api } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * What changed, undo and redo in a real headless Chromium (issue 38): the Changes tab beside the chat,
 * "changed in this turn" under the prompt, Undo and Redo there; a real runtime in its sandbox.
 */
describe('the dashboard Changes tab, undo and redo in Chromium', () => {
  let browser: Browser;
  let r: RuntimeApp;
  let context: BrowserContext;
  let page: Page;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    browser = await launchChromium();
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([{ name: 'agentws_access', value: people.tokens.member, url: r.t.url, httpOnly: true, sameSite: 'Lax' }]);
    page = await context.newPage();
  }, 180_000);
  afterAll(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await r?.close();
  });

  it('shows the files a turn changed and their diff, undoes the turn (files and chat) and redoes it', async () => {
    const { tokens } = people;
    // A first turn and a second that edits its file, as the person would have had them.
    const first = await agentTurn(r, tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: '/workspace/app.py', content: 'def total(xs):\n    return sum(xs)\n' } } }, { text: 'Wrote app.py.' }], { title: 'Changes' });
    const sessionId = first.sessionId;
    await agentTurn(r, tokens.member, [{ toolCall: { name: 'edit', arguments: { filePath: '/workspace/app.py', oldString: 'return sum(xs)', newString: 'return sum(x for x in xs if x)' } } }, { text: 'Skipped the empty ones.' }], { sessionId });
    const dir = (await r.t.opened.db.query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory as string;
    await expect.poll(async () => (await api(r.t, 'GET', `/v1/sessions/${sessionId}/changes`, { token: tokens.member })).json.turns.map((t: any) => t.files), { timeout: 10_000 }).toEqual([1, 1]);

    await page.goto(`${r.t.url}/#/sessions/${sessionId}`);
    await page.getByText('Skipped the empty ones.').waitFor({ timeout: 30_000 });
    // Under each prompt: what its turn changed.
    const notes = page.getByTestId('turn-changes');
    await expect.poll(() => notes.count(), { timeout: 10_000 }).toBe(2);
    expect(await notes.nth(1).innerText()).toContain('Changed in this turn: app.py +1 −1');

    // The Changes tab: the whole session, then the second turn alone, its diff coloured.
    await page.getByRole('tab', { name: 'Changes' }).click();
    const panel = page.getByTestId('changes-panel');
    await panel.getByTestId('changed-file').first().waitFor();
    expect(await panel.getByTestId('changed-file').first().innerText()).toMatch(/A\s+app\.py \+2 −0/);
    expect(await panel.getByTestId('diff').innerText()).toContain('+    return sum(x for x in xs if x)');
    await panel.getByRole('combobox', { name: 'Changes of' }).selectOption({ index: 2 });
    await expect.poll(() => panel.getByTestId('diff').innerText(), { timeout: 10_000 }).toContain('-    return sum(xs)');
    expect(await panel.locator('.dl.add .tok-kw').first().innerText()).toBe('return');
    await shoot(page, '38-changes');

    // Undo the second turn from its prompt: the file and the chat as before it; then Redo.
    await notes.nth(1).getByRole('button', { name: 'Undo' }).click();
    await page.getByTestId('redo-note').waitFor({ timeout: 15_000 });
    await expect.poll(() => page.getByText('Skipped the empty ones.').count(), { timeout: 10_000 }).toBe(0);
    expect(readFileSync(join(dir, 'app.py'), 'utf8')).toBe('def total(xs):\n    return sum(xs)\n');
    expect(await page.getByTestId('redo-note').innerText()).toContain('One turn is undone');
    await shoot(page, '38-changes-undone');
    await page.getByTestId('redo-note').getByRole('button', { name: 'Redo' }).click();
    await page.getByText('Skipped the empty ones.').waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('redo-note').count()).toBe(0);
    expect(readFileSync(join(dir, 'app.py'), 'utf8')).toBe('def total(xs):\n    return sum(x for x in xs if x)\n');
  }, 150_000);
});
