import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { api, signToken } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/** A 1x1 PNG (a red pixel). */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

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
 * A person's workspace in the dashboard, in a real headless Chromium: the Files tab, the Changes
 * tab with undo and redo, sharing the session, the Terminal tab, and the chat's answers and Stop
 * button; a real runtime in its sandbox. One app, one runtime and one Chromium for all of them: each start-up costs ~30 s of a CI run's
 * time on 2 cores, what the four used to pay apiece. Each part has its own browser context (a fresh
 * profile, as before) and its own sessions. They all act as the same member, mia, so they share her
 * workspace (and her runtime): the parts below write different files (src/ for Files, app.py for Changes,
 * notes.py for the answers; sharing writes none) and read only their own, so their order does not matter.
 */
describe('a person\'s workspace in the dashboard (files, changes, terminal, answers) in Chromium', () => {
  let browser: Browser;
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    // Both at once (Chromium starts while the app and its runtime come up). Both are awaited before a
    // failure is thrown, so afterAll closes whichever started.
    const [launched, started] = await Promise.allSettled([launchChromium(), startRuntimeApp()]);
    if (launched.status === 'fulfilled') browser = launched.value;
    if (started.status === 'fulfilled') r = started.value;
    if (launched.status === 'rejected') throw launched.reason;
    if (started.status === 'rejected') throw started.reason;
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 180_000);
  afterAll(async () => {
    await browser?.close().catch(() => {});
    await r?.close();
  });

  /** A fresh context signed in as the member, closed after its part. */
  const memberContext = async (options: Parameters<Browser['newContext']>[0]) => {
    const context = await browser.newContext(options);
    await context.addCookies([{ name: 'agentws_access', value: people.tokens.member, url: r.t.url, httpOnly: true, sameSite: 'Lax' }]);
    return context;
  };

  /**
   * The Files tab of the workspace pane: a person sees the file their agent wrote, opens it (syntax colour),
   * uploads a file and an image (shown from the same-origin file URL under the dashboard's strict CSP),
   * downloads a file and the workspace as an archive.
   */
  describe('the Files tab', () => {
    let context: BrowserContext;
    afterAll(async () => {
      await context?.close().catch(() => {});
    });

    it('browses, views, uploads and downloads the person\'s own files', async () => {
      const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: 'src/plan.ts', content: 'export const answer = 42; // the plan\n' } } }, { text: 'wrote the plan' }]);
      context = await memberContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
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

  /** What changed, undo and redo: the Changes tab beside the chat, "changed in this turn" under the prompt, Undo and Redo there. */
  describe('the Changes tab, undo and redo', () => {
    let context: BrowserContext;
    let page: Page;
    beforeAll(async () => {
      context = await memberContext({ viewport: { width: 1280, height: 900 } });
      page = await context.newPage();
    });
    afterAll(async () => {
      await context?.close().catch(() => {});
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

  /**
   * Sharing (dashboard-shares.test.ts until it joined this file, which has the runtime and the
   * person it needs: mia, whose runtime already runs): the owner shares from the Share dialog (at 1280
   * px), a teammate on a phone's width (390 px) finds the session under "Shared with me", follows a turn
   * live read-only, and sees the stream end when the owner revokes; then the owner hands the session over
   * from its dialog and their page turns read-only. Its own session (mia's "Release notes"), read by no
   * other part.
   */
  describe('the Share dialog and a teammate following live', () => {
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
      // Max, a teammate of mia's in her tenant (seedPeople has an owner, mia and a viewer).
      const { rows } = await r.t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'max', 'max@acme.example', 'max') returning id`, [people.tenantId]);
      await r.t.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [people.tenantId, rows[0].id]);
      tok.mia = people.tokens.member;
      tok.max = await signToken(r.t, { sub: rows[0].id, tid: people.tenantId, roles: ['member'] });
      owner = await pageFor(tok.mia, { width: 1280, height: 900 });
      mate = await pageFor(tok.max, { width: 390, height: 844 });
      sessionId = (await agentTurn(r, tok.mia, [{ text: 'The first answer.' }], { title: 'Release notes', text: 'draft them' })).sessionId;
    }, 120_000);
    afterAll(async () => {
      for (const c of contexts) await c.close().catch(() => {});
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

  /**
   * The Terminal tab of the workspace pane under the dashboard's strict CSP: xterm.js loaded as its own
   * module, a shell in the person's real sandbox, a command typed and its output read.
   */
  describe('the Terminal tab', () => {
    let context: BrowserContext;
    let page: Page;
    let sessionId = '';
    const violations: string[] = [];
    beforeAll(async () => {
      sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'terminal' } })).json.sessionId;
      context = await memberContext({ viewport: { width: 1300, height: 900 } });
      page = await context.newPage();
      page.on('console', (m) => m.type() === 'error' && /Content Security Policy/.test(m.text()) && violations.push(m.text()));
    });
    afterAll(async () => {
      await context?.close().catch(() => {});
    });

    it('opens a shell in the workspace, runs what is typed and shows its output, sized to the pane', async () => {
      await page.goto(`${r.t.url}/#/sessions/${sessionId}`);
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

  /**
   * The chat's answers and its Stop button: an answer streaming in is stopped with the button and with
   * Escape; an answer's Markdown is drawn as elements (a table, a coloured code block with its copy
   * button), never the model's raw HTML.
   */
  describe('the chat: stopping a turn and reading answers', () => {
    let context: BrowserContext;
    let page: Page;
    beforeAll(async () => {
      context = await memberContext({ viewport: { width: 1200, height: 900 } });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: r.t.url });
      page = await context.newPage();
    });
    afterAll(async () => {
      await context?.close().catch(() => {});
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

    it('chooses the session\'s model by the composer, names it on the answer, and branches from an answer', async () => {
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
});
