import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { api } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

const LONG = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');

const ANSWER = [
  '## Results',
  '',
  'Here is **what I found**, with `inline code` and a [link](https://example.com/docs).',
  '',
  '| Name | Size |',
  '|------|-----:|',
  '| alpha | 10 |',
  '| beta | 20 |',
  '',
  '```python',
  'def hello():',
  '    return "hi"  # greet',
  '```',
  '',
  '- first',
  '- second',
  '',
  '<img src=x onerror="document.title=\'pwned\'"> <script>document.title="pwned"</script>',
  '',
  '[bad](javascript:document.title="pwned")',
].join('\n');

/**
 * The chat's answers and its Stop button in a real headless Chromium (issue 38): an answer streaming in is
 * stopped with the button and with Escape; an answer's Markdown is drawn as elements (a table, a coloured
 * code block with its copy button), never the model's raw HTML.
 */
describe('the chat: stopping a turn and reading answers, in Chromium', () => {
  let browser: Browser;
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    browser = await launchChromium();
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: r.t.url });
    await context.addCookies([{ name: 'agentws_access', value: people.tokens.member, url: r.t.url, httpOnly: true, sameSite: 'Lax' }]);
    page = await context.newPage();
  }, 180_000);
  afterAll(async () => {
    await context?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await r?.close();
  });

  const openSession = async (title: string) => {
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title } })).json.sessionId as string;
    await page.goto(`${r.t.url}/#/sessions/${sessionId}`);
    await page.getByRole('textbox', { name: 'Message' }).waitFor();
    return sessionId;
  };
  const ask = async (text: string) => {
    await page.getByRole('textbox', { name: 'Message' }).fill(text);
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
  };

  it('stops a streaming answer with the Stop button, then with Escape; the partial answer stays', async () => {
    const sessionId = await openSession('stop in the browser');
    r.llm.script([{ text: LONG, chunkDelayMs: 40 }]);
    await ask('write a lot');
    const answer = page.getByTestId('msg-assistant').last();
    await answer.getByText(/word5\b/).waitFor({ timeout: 30_000 });
    await page.getByTestId('stop').click();
    await page.getByText('Stopped.').first().waitFor({ timeout: 5_000 });
    await expect.poll(() => page.getByTestId('stop').count(), { timeout: 5_000 }).toBe(0);
    const kept = (await answer.textContent()) ?? '';
    expect(kept).toContain('word5');
    expect(kept).not.toContain('word119');
    await shoot(page, 'chat-stopped');

    // Escape, from anywhere on the screen.
    r.llm.script([{ text: LONG, chunkDelayMs: 40 }]);
    const answers = await page.getByTestId('msg-assistant').count();
    await ask('again');
    await page.getByTestId('stop').waitFor({ timeout: 30_000 });
    await page.getByTestId('msg-assistant').nth(answers).getByText(/word3\b/).waitFor({ timeout: 30_000 });
    await page.locator('body').press('Escape');
    await expect.poll(() => page.getByTestId('stop').count(), { timeout: 5_000 }).toBe(0);
    await expect
      .poll(async () => (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: people.tokens.member })).json.messages.filter((m: any) => m.info.error?.name === 'MessageAbortedError').length, { timeout: 5_000 })
      .toBe(2);
    expect(await page.getByTestId('msg-assistant').nth(answers).textContent()).not.toContain('word119');
  });

  it('draws an answer as Markdown: a table, a coloured code block with a copy button, safe links, no raw HTML; an edit as a diff', async () => {
    await openSession('markdown');
    r.llm.script([
      { toolCall: { name: 'write', arguments: { filePath: 'notes.py', content: 'x = 1\ny = 2\n' } } },
      { toolCall: { name: 'read', arguments: { filePath: 'notes.py' } } },
      { toolCall: { name: 'edit', arguments: { filePath: 'notes.py', oldString: 'y = 2', newString: 'y = "three"' } } },
      { text: ANSWER },
    ]);
    await ask('show me');
    const answer = page.getByTestId('msg-assistant').last();
    await answer.locator('table').waitFor({ timeout: 60_000 });
    // An answer's headings sit a level under the page's own.
    expect(await answer.locator('h3').textContent()).toBe('Results');
    expect(await answer.locator('strong').textContent()).toBe('what I found');
    expect(await answer.locator('table th').allTextContents()).toEqual(['Name', 'Size']);
    expect(await answer.locator('table tbody tr').count()).toBe(2);
    expect(await answer.locator('li').allTextContents()).toEqual(['first', 'second']);
    const link = answer.getByRole('link', { name: 'link' });
    expect(await link.getAttribute('href')).toBe('https://example.com/docs');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(await link.getAttribute('target')).toBe('_blank');
    // The javascript: link is its label only.
    expect(await answer.getByRole('link', { name: 'bad' }).count()).toBe(0);
    // The code block: coloured (a keyword, a string, a comment), copied by its button.
    const code = answer.getByTestId('code-block');
    expect(await code.locator('.tok-kw').first().textContent()).toBe('def');
    expect(await code.locator('.tok-str').first().textContent()).toBe('"hi"');
    expect(await code.locator('.tok-com').first().textContent()).toBe('# greet');
    await code.getByRole('button', { name: 'Copy code' }).click();
    await code.getByText('Copied').waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText())).toBe('def hello():\n    return "hi"  # greet');
    // The model's HTML is text: no element made of it, nothing of it ran.
    expect(await answer.locator('img, script').count()).toBe(0);
    await answer.getByText('<img src=x onerror=', { exact: false }).waitFor();
    expect(await page.title()).not.toBe('pwned');
    // The write shows the file it wrote; the edit its change as a coloured diff (each step is a message of its own).
    const write = page.getByTestId('tool').filter({ hasText: 'write' });
    expect(await write.getByTestId('written').textContent()).toContain('y = 2');
    const diff = page.getByTestId('tool').filter({ hasText: 'edit' }).getByTestId('diff');
    expect(await diff.locator('.dl-del').allTextContents()).toEqual(['-y = 2\n']);
    expect(await diff.locator('.dl-add').allTextContents()).toEqual(['+y = "three"\n']);
    expect(await diff.locator('.dl-add .tok-str').textContent()).toBe('"three"');
    await shoot(page, 'chat-markdown');
  });

  it('chooses the session\'s model by the composer, names it on the answer, and branches from an answer (issue 39)', async () => {
    const models = [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096 }, { id: 'fake-big', name: 'Fake Big', contextLimit: 64000, outputLimit: 4096 }];
    expect((await api(r.t, 'PATCH', '/v1/admin/providers/scripted', { token: people.tokens.owner, body: { models } })).status).toBe(200);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token: people.tokens.owner, body: {} })).status).toBe(200);
    const sessionId = await openSession('pick a model');
    const picker = page.getByTestId('model-pick').getByRole('combobox', { name: 'Model' });
    await picker.selectOption('scripted/fake-big');
    await expect.poll(async () => (await api(r.t, 'GET', `/v1/sessions/${sessionId}/model`, { token: people.tokens.member })).json.model).toBe('scripted/fake-big');
    r.llm.script([{ text: 'Big answer.' }]);
    const before = r.llm.requests.length;
    await ask('which model?');
    const answer = page.getByTestId('msg-assistant').last();
    await answer.getByText('Big answer.').waitFor({ timeout: 60_000 });
    await answer.getByTestId('answer-model').getByText('fake-big').waitFor();
    expect(r.llm.requests.slice(before).filter((q) => !q.title).map((q) => q.body.model)).toEqual(['fake-big']);

    // At a phone's width the picker has a line of its own, within the screen (it takes nothing from the message box's row).
    await page.setViewportSize({ width: 390, height: 844 });
    const pick = await page.getByTestId('model-pick').boundingBox();
    expect(pick!.x + pick!.width).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1200, height: 900 });

    await answer.getByRole('button', { name: 'Branch from here' }).click();
    await page.waitForURL((u) => u.hash.startsWith('#/sessions/') && !u.hash.endsWith(sessionId));
    await page.getByText('shares your workspace', { exact: false }).waitFor();
    await page.getByTestId('msg-assistant').getByText('Big answer.').waitFor();
    expect(await page.getByTestId('msg-user').allTextContents()).toEqual(['which model?']);
    await shoot(page, 'chat-model-branch');
  });
});
