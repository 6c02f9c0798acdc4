import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { indexRows } from '../../src/core/sessions/session-manage-fns.js';
import { createSessionManageRepo } from '../../src/core/sessions/session-manage.repo.js';
import { startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signInAs, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';
import { runCommand } from '../helpers/cli.js';

const KEY = 'sk-right-key-0123456789abcdef';
const WRONG = 'sk-wrong-key-fedcba9876543210';

/**
 * Setting a workspace up in the dashboard only: a fresh tenant with nothing set up
 * shows its first-run checklist (a member is told who to ask, the owner gets links), the owner adds a
 * provider with a key the provider refuses (the test says so in the provider's words), rotates it, tests
 * again, picks the default model and applies it, and the first prompt is answered by the scripted model.
 * Then the embedder screen: set, backfill with progress, clear. Real Chromium, the real app with its
 * managed runtime in the sandbox and an in-process worker, the scripted model on loopback; the scripted
 * chat platform for the gateway screen of the admin setup screens and the session list (below), which
 * share the app and the browser.
 */
describe('setting a workspace up in the dashboard', () => {
  let browser: Browser;
  let llm: FakeLlm;
  let platform: FakeChatPlatform;
  let t: TestApp;
  let worker: Worker;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let ownerToken = '';
  let owner: BrowserContext;
  let member: BrowserContext;
  let page: Page;

  /** A browser signed in as a seeded user: the access cookie a sign-in sets. */
  async function signedIn(sub: string, roles: string[]): Promise<BrowserContext> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const s = await signInAs(t, { sub, tid: acme.tenantId, roles });
    await context.addCookies([{ name: 'agentws_access', value: s.access, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
    return context;
  }

  beforeAll(async () => {
    browser = await launchChromium();
    llm = await startFakeLlm();
    // The provider refuses any key but its own, in its own words (OpenAI's, quoting the key back).
    llm.respond((req) => (req.authorization === `Bearer ${KEY}` ? undefined : { error: { status: 401, message: `Incorrect API key provided: ${req.authorization?.slice(7) ?? 'none'}` } }));
    platform = await startFakeChatPlatform();
    // Three memories a person: the owner's embedder test writes three, the docs-link test is refused a fourth.
    t = await startTestApp({ vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_MEMORY_QUOTA: '3' } });
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    await t.opened.db.query(`update users set display_name = 'Olive Owner' where id = $1`, [acme.ids.owner]);
    ownerToken = (await signInAs(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] })).access;
    await t.opened.core.startRuntime();
    worker = await startWorker(t.opened.core, t.opened.boss, silentLogger, { concurrency: 4 });
    owner = await signedIn(acme.ids.owner, ['owner']);
    member = await signedIn(acme.ids.mia, ['member']);
    page = await owner.newPage();
  }, 180_000);
  afterAll(async () => {
    await owner?.close().catch(() => {});
    await member?.close().catch(() => {});
    await browser?.close().catch(() => {});
    await worker?.stop(2000).catch(() => {});
    await t?.opened.core.stopRuntime().catch(() => {});
    await t?.close();
    await llm?.close();
    await platform?.close();
  });

  it('a fresh tenant shows the first-run checklist: a member sees who to ask, the owner the way to the setup screens', async () => {
    const mia = await member.newPage();
    await mia.goto(`${t.url}/`);
    const checklist = mia.getByTestId('setup-checklist');
    await checklist.waitFor();
    expect(await mia.getByTestId('setup-step').allInnerTexts()).toEqual([
      'Add a model provider (its URL, key and models)',
      'Choose the default model and apply it',
      'Start a session and ask your first question',
    ]);
    expect(await mia.getByTestId('setup-ask').innerText()).toBe('Your role cannot set up models. Ask Olive Owner (owner@acme.example) to set it up.');
    expect(await checklist.getByRole('link', { name: 'Add a provider' }).count()).toBe(0);
    // No prompt to fail: the new-session form waits for the setup.
    expect(await mia.getByRole('button', { name: 'New session' }).count()).toBe(0);
    await shoot(mia, '30-setup-checklist-member');
    await mia.close();

    await page.goto(`${t.url}/`);
    await page.getByTestId('setup-checklist').waitFor();
    expect(await page.getByTestId('setup-ask').count()).toBe(0);
    await shoot(page, '31-setup-checklist-owner');
    await page.getByRole('link', { name: 'Add a provider' }).click();
    await page.getByRole('heading', { name: 'Providers' }).waitFor();
    expect(page.url()).toBe(`${t.url}/#/admin/providers`);
    expect(await page.getByTestId('runtime-readiness').innerText()).toMatch(/^not ready/);
  });

  it('a one-time sign-in link from `aws user sign-in-link` signs the owner in, with no identity provider and no demo mode; once', async () => {
    expect((await api(t, 'GET', '/v1/auth/status')).json.auth).toMatchObject({ allowAnonymous: false, entraConfigured: false });
    const made = await runCommand(['user', 'sign-in-link', 'owner@acme.example', '--tenant', 'acme'], { env: t.env });
    expect(made.code, made.stderr).toBe(0);
    const url = made.stdout.trim();
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    try {
      const p = await context.newPage();
      await p.goto(url);
      // Nothing used by opening it (a previewer would stop here), and the token already out of the address bar.
      const button = p.getByRole('button', { name: 'Sign in' });
      await button.waitFor();
      expect(p.url()).toBe(`${t.url}/#/sign-in-link`);
      await shoot(p, '37-sign-in-link');
      await button.click();
      await p.getByText('Olive Owner (owner)').waitFor();
      expect(p.url()).toBe(`${t.url}/#/sessions`);
      await p.getByTestId('setup-checklist').waitFor();
      expect((await context.cookies()).map((c) => `${c.name} ${c.path} ${c.httpOnly} ${c.sameSite}`).sort()).toEqual(['agentws_access / true Lax', 'agentws_refresh /v1/auth true Lax']);

      const later = await context.newPage();
      await later.goto(url);
      await later.getByRole('button', { name: 'Sign in' }).click();
      expect(await later.getByRole('alert').innerText()).toMatch(/^this sign-in link was already used .*: a link signs in once — Ask the operator for a new link/);
    } finally {
      await context.close();
    }
  });

  it('the providers screen: add with models and prices, a test the provider refuses, rotate the key, test, default model, apply', async () => {
    await page.getByRole('button', { name: 'Add a provider' }).click();
    const form = page.getByRole('form', { name: 'New provider' });
    await form.getByRole('textbox', { name: 'Name' }).fill('scripted');
    await form.getByRole('textbox', { name: 'Base URL' }).fill(`${llm.url}/v1`);
    await form.getByLabel('API key').fill(WRONG);
    await form.getByRole('textbox', { name: 'Model id 1' }).fill('fake-model');
    await form.getByRole('textbox', { name: 'Context tokens 1' }).fill('32000');
    await form.getByRole('textbox', { name: 'Output tokens 1' }).fill('4096');
    await form.getByRole('textbox', { name: 'Input $/MTok 1' }).fill('2');
    await form.getByRole('textbox', { name: 'Output $/MTok 1' }).fill('8');
    // An empty cache price says what it defaults to for this kind; the read price is given.
    expect(await form.getByRole('textbox', { name: 'Cache write $/MTok 1' }).getAttribute('placeholder')).toBe('input price');
    await form.getByRole('textbox', { name: 'Cache read $/MTok 1' }).fill('0.5');
    await form.getByRole('button', { name: 'Add a model' }).click();
    await form.getByRole('textbox', { name: 'Model id 2' }).fill('fake-embed-32');
    await shoot(page, '32-setup-provider-form');
    await form.getByRole('button', { name: 'Add provider' }).click();
    const row = page.getByTestId('provider-scripted');
    await row.waitFor();
    expect(await row.innerText()).toMatch(/fake-model\s+32,000 ctx · 4,096 out · \$2\/\$8 per MTok · cache \$0\.5 read\/\$2 write \(defaults where unset\)/);
    const stored = (await api(t, 'GET', '/v1/admin/providers', { token: ownerToken })).json.providers;
    expect(stored).toMatchObject([
      { name: 'scripted', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, hasApiKey: true, enabled: true, models: [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096, inputCostPerMTok: 2, outputCostPerMTok: 8, cacheReadCostPerMTok: 0.5 }, { id: 'fake-embed-32' }] },
    ]);
    expect(stored[0].models[0].cacheWriteCostPerMTok).toBeUndefined();

    // The test: the provider's own refusal, its status and message, the key cut out.
    await row.getByRole('button', { name: 'Test' }).click();
    const result = page.getByTestId('provider-test-scripted');
    await result.waitFor();
    expect(await result.innerText()).toBe('Test failed (fake-model): 401 Incorrect API key provided: [key]');
    expect(await page.content()).not.toContain(WRONG);
    await shoot(page, '33-setup-provider-test-refused');

    // A new key, and the test passes.
    await row.getByRole('button', { name: 'Rotate key' }).click();
    await page.getByLabel('New API key for scripted').fill(KEY);
    await page.getByRole('button', { name: 'Save key' }).click();
    await expect.poll(async () => (await api(t, 'GET', '/v1/admin/audit-log?action=provider.update', { token: ownerToken })).json.entries.length).toBe(1);
    await row.getByRole('button', { name: 'Test' }).click();
    await expect.poll(() => result.innerText(), { timeout: 20_000 }).toMatch(/^Test passed: fake-model answered in \d+ ms \("No more scripted replies\."\)\.$/);

    // Disabled, then enabled again: the checkbox is the provider's `enabled`.
    await row.getByRole('checkbox', { name: 'scripted enabled' }).uncheck();
    await expect.poll(async () => (await api(t, 'GET', '/v1/admin/providers', { token: ownerToken })).json.providers[0].enabled).toBe(false);
    await row.getByRole('checkbox', { name: 'scripted enabled' }).check();
    await expect.poll(async () => (await api(t, 'GET', '/v1/admin/providers', { token: ownerToken })).json.providers[0].enabled).toBe(true);

    // The default model, then apply.
    await page.getByRole('combobox', { name: 'Default model' }).selectOption('scripted/fake-model');
    await page.getByRole('button', { name: 'Apply changes' }).click();
    await expect.poll(() => page.getByTestId('runtime-readiness').innerText(), { timeout: 20_000 }).toMatch(/^ready/);
    // Who applied it, by name and email (not user:<uuid>).
    expect(await page.getByTestId('applied').innerText()).toMatch(/^Applied: scripted\/fake-model with scripted, .+ by Olive Owner \(owner@acme\.example\)\./);
    // Set-up complete: the owner's runtime starts and prepares now, before any prompt, so the
    // first answer does not pay the cold start.
    const ownersRuntimes = async () => (await t.opened.db.query(`select count(*)::int as n from agent_runtimes where user_id = $1`, [acme.ids.owner])).rows[0].n;
    await expect.poll(ownersRuntimes, { timeout: 30_000, interval: 200 }).toBe(1);
    await shoot(page, '34-setup-providers-applied');

    const actions = (await t.opened.db.query<{ action: string; actor: string }>(`select action, actor from audit_log where tenant_id = $1 and (action like 'provider.%' or action like 'runtime.%') order by ts, seq`, [acme.tenantId])).rows;
    expect(actions.map((a) => a.action)).toEqual(['provider.create', 'provider.test', 'provider.update', 'provider.test', 'provider.update', 'provider.update', 'runtime.model_set', 'runtime.apply']);
    expect(new Set(actions.map((a) => a.actor))).toEqual(new Set([`user:${acme.ids.owner}`]));
  });

  it('the first prompt is answered: the checklist gone, a session started and the scripted model replying', async () => {
    await page.getByRole('link', { name: 'Sessions' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    await page.getByRole('button', { name: 'New session' }).waitFor();
    expect(await page.getByTestId('setup-checklist').count()).toBe(0);
    await page.getByRole('textbox', { name: 'Title' }).fill('First steps');
    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByRole('textbox', { name: 'Message' }).waitFor();
    llm.script([{ text: 'Hello from the scripted model, set up in the browser.' }]);
    await page.getByRole('textbox', { name: 'Message' }).fill('Are you there?');
    await page.getByRole('textbox', { name: 'Message' }).press('Enter');
    await page.getByText('Hello from the scripted model, set up in the browser.').waitFor({ timeout: 90_000 });
    await shoot(page, '35-setup-first-answer');
    // The model call went through the gateway with the rotated key.
    expect(llm.requests.filter((r) => !r.title).at(-1)?.authorization).toBe(`Bearer ${KEY}`);
  });

  it('the providers screen: a second provider, its key removed, edited, then removed', async () => {
    await page.goto(`${t.url}/#/admin/providers`);
    await page.getByRole('button', { name: 'Add a provider' }).click();
    const form = page.getByRole('form', { name: 'New provider' });
    await form.getByRole('textbox', { name: 'Name' }).fill('spare');
    await form.getByRole('textbox', { name: 'Base URL' }).fill(`${llm.url}/v1`);
    await form.getByLabel('API key').fill('sk-spare');
    await form.getByRole('textbox', { name: 'Model id 1' }).fill('spare-model');
    await form.getByRole('textbox', { name: 'Cache read $/MTok 1' }).fill('0.1');
    await form.getByRole('textbox', { name: 'Cache write $/MTok 1' }).fill('1');
    await form.getByRole('button', { name: 'Add provider' }).click();
    const row = page.getByTestId('provider-spare');
    await row.waitFor();
    expect(await row.innerText()).toContain('stored');
    page.once('dialog', (d) => void d.accept());
    await row.getByRole('button', { name: 'Remove key' }).click();
    await expect.poll(() => row.innerText()).toContain('none');
    // Edit: another model added to it.
    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit spare' });
    await edit.getByRole('button', { name: 'Add a model' }).click();
    await edit.getByRole('textbox', { name: 'Model id 2' }).fill('spare-large');
    await edit.getByRole('button', { name: 'Save provider' }).click();
    await expect.poll(() => row.innerText()).toContain('spare-large');
    // The edit kept what the form did not change: the first model's cache prices.
    const spare = (await api(t, 'GET', '/v1/admin/providers', { token: ownerToken })).json.providers.find((p: any) => p.name === 'spare');
    expect(spare.models).toEqual([{ id: 'spare-model', cacheReadCostPerMTok: 0.1, cacheWriteCostPerMTok: 1 }, { id: 'spare-large' }]);
    expect(await row.innerText()).toMatch(/spare-model\s+· cache \$0\.1 read\/\$1 write/);
    page.once('dialog', (d) => void d.accept());
    await row.getByRole('button', { name: 'Remove', exact: true }).click();
    await expect.poll(() => page.getByTestId('provider-spare').count()).toBe(0);
    expect((await api(t, 'GET', '/v1/admin/providers', { token: ownerToken })).json.providers.map((p: any) => p.name)).toEqual(['scripted']);
  });

  it('the embedder screen: set (its backfill followed to the end), backfill again, clear', async () => {
    for (const content of ['Deploys go out on Tuesdays', 'The staging cluster is called blue', 'Use pnpm in the web repo']) {
      expect((await api(t, 'POST', '/v1/memories', { token: ownerToken, body: { kind: 'fact', content } })).status).toBe(201);
    }
    await page.getByRole('link', { name: 'Embedder' }).click();
    await page.getByText('No embedder: memory search answers on full text.', { exact: false }).waitFor();
    const form = page.getByRole('form', { name: 'Set the embedder' });
    await form.getByRole('combobox', { name: 'Provider' }).selectOption('scripted');
    await form.getByRole('textbox', { name: 'Embeddings model' }).fill('fake-embed-32');
    await form.getByRole('button', { name: 'Set embedder' }).click();
    await page.getByTestId('embedder').waitFor();
    expect(await page.getByTestId('embedder').innerText()).toMatch(/^Embedder: scripted \/ fake-embed-32, 32 dimensions/);
    // A first embedder spends nothing on its own: the memories written before it wait for a backfill.
    expect(await page.getByTestId('embedder').innerText()).toContain('0 memories embedded, 3 waiting for a vector of this model.');
    await page.getByRole('button', { name: 'Embed memories lacking a vector' }).click();
    await expect.poll(() => page.getByTestId('backfill-state').innerText(), { timeout: 30_000 }).toBe('completed: 3 of 3 embedded, 0 still lacking a vector');
    await expect.poll(() => page.getByTestId('embedder').innerText()).toContain('3 memories embedded, 0 waiting');
    expect(await page.locator('progress').evaluate((p) => [(p as unknown as { value: number }).value, (p as unknown as { max: number }).max])).toEqual([3, 3]);
    await shoot(page, '36-setup-embedder');

    // Another model: the backfill queued with the change re-embeds every memory, followed here too.
    await form.getByRole('textbox', { name: 'Embeddings model' }).fill('fake-embed-16');
    await form.getByRole('button', { name: 'Change embedder' }).click();
    await expect.poll(() => page.getByTestId('embedder').innerText()).toMatch(/^Embedder: scripted \/ fake-embed-16, 16 dimensions/);
    await expect.poll(() => page.getByTestId('backfill-state').innerText(), { timeout: 30_000 }).toBe('completed: 3 of 3 embedded, 0 still lacking a vector');
    await expect.poll(() => page.getByTestId('embedder').innerText()).toContain('3 memories embedded, 0 waiting');
    expect((await api(t, 'GET', '/v1/jobs?kind=embed-memories', { token: ownerToken })).json.jobs).toHaveLength(2);
    // After a reload the last backfill is shown again.
    await page.reload();
    await expect.poll(() => page.getByTestId('backfill-state').innerText()).toBe('completed: 3 of 3 embedded, 0 still lacking a vector');

    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Clear embedder' }).click();
    await page.getByText('No embedder: memory search answers on full text.', { exact: false }).waitFor();
    const actions = (await t.opened.db.query<{ action: string }>(`select action from audit_log where tenant_id = $1 and action like 'embedder.%' order by ts, seq`, [acme.tenantId])).rows.map((r) => r.action);
    expect(actions).toEqual(['embedder.set', 'embedder.set', 'embedder.clear']);
  });

  it('a screen links to its page of the docs; a refusal naming a setting links to its entry in the configuration reference', async () => {
    const miaToken = (await signInAs(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] })).access;
    for (const content of ['Standups are at ten', 'The wiki is the source of truth', 'Releases are tagged vX.Y.Z']) {
      expect((await api(t, 'POST', '/v1/memories', { token: miaToken, body: { kind: 'fact', content } })).status).toBe(201);
    }
    const mia = await member.newPage();
    try {
      await mia.goto(`${t.url}/#/memories`);
      await mia.getByRole('heading', { name: 'Memories' }).waitFor();
      // The header's docs link: the screen's page (the route table's), in a tab of its own.
      const docsLink = mia.getByTestId('docs-link');
      expect(await docsLink.getAttribute('href')).toBe('/docs/admin/memories-and-skills');
      const [docsPage, opened] = await Promise.all([member.waitForEvent('page'), member.waitForEvent('response', (r) => r.url() === `${t.url}/docs/admin/memories-and-skills`), docsLink.click()]);
      // The page is the docs' (docs/admin/memories-and-skills.md, rendered at the build).
      expect(opened.status()).toBe(200);
      await docsPage.waitForURL(`${t.url}/docs/admin/memories-and-skills`);
      expect(await docsPage.locator('h1').textContent()).toMatch(/memor/i);
      await docsPage.close();
      // Another screen, another page: the admin tabs each have theirs.
      await mia.goto(`${t.url}/#/tokens`);
      await mia.getByRole('heading', { name: 'API tokens' }).waitFor();
      expect(await mia.getByTestId('docs-link').getAttribute('href')).toBe('/docs/admin/tokens');

      // A fourth memory is past the quota: the refusal's hint names the setting, which links to its entry.
      await mia.goto(`${t.url}/#/memories`);
      await mia.getByRole('heading', { name: 'Memories' }).waitFor();
      const form = mia.getByRole('form', { name: 'New memory' });
      await form.locator('input[name=content]').fill('Lunch is at noon');
      await form.getByRole('button', { name: 'Save' }).click();
      const setting = mia.getByRole('alert').getByRole('link', { name: 'AGENTWS_MEMORY_QUOTA' });
      await setting.waitFor();
      expect(await setting.getAttribute('href')).toBe('/docs/reference/configuration#agentws_memory_quota');
      const [reference] = await Promise.all([member.waitForEvent('page'), setting.click()]);
      await reference.waitForURL(`${t.url}/docs/reference/configuration#agentws_memory_quota`);
      await reference.locator('h2#agentws_memory_quota').waitFor();
      expect(await reference.locator('h1').textContent()).toContain('Configuration reference');
      await reference.close();
    } finally {
      await mia.close();
    }
  });

  /**
   * The dashboard's other setup screens: templates, custom roles, cost limits per role,
   * egress rules and chat gateways, each done as a person would (click, type, reload) and checked where it
   * matters: listed after a reload, the API's refusal shown, the audit log holding the entry, the setting
   * taking effect. Each person is signed in by their access cookie (the sign-in itself is
   * dashboard.test.ts's). In a tenant of their own, with no model set up (no runtime), in this file's app
   * and browser (dashboard-admin-setup.test.ts started an app and a browser of its own for them).
   */
  describe('the admin setup screens and the session list', () => {
    let acme: Awaited<ReturnType<typeof seedTenant>>;
    let ownerToken = '';
    const contexts: BrowserContext[] = [];

    beforeAll(async () => {
      // A tenant of its own (the first-run one above is 'acme').
      acme = await seedTenant(t, 'acme-admin', [
        { handle: 'ada', roles: ['admin'] },
        { handle: 'mia', roles: ['member'] },
        { handle: 'rho', roles: [] },
      ]);
      ownerToken = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
      // Rho manages roles and holds little else: what she may grant is narrow.
      const created = await api(t, 'POST', '/v1/admin/roles', {
        token: ownerToken,
        body: { name: 'role-manager', permissions: { admin: { manage_roles: true }, memory: { read_own: true }, tools: { allowed: ['read'] } } },
      });
      expect(created.status).toBe(201);
      expect((await api(t, 'POST', `/v1/admin/users/${acme.ids.rho}/roles`, { token: ownerToken, body: { roleId: created.json.role.id } })).status).toBe(200);
    }, 120_000);
    afterAll(async () => {
      await Promise.all(contexts.map((c) => c.close().catch(() => {})));
    });

    const pages = new Map<string, Page>();
    /** A page signed in as the user (their access cookie, as the sign-in sets it; one browser context each), freshly loaded on an admin tab. */
    async function open(who: 'owner' | 'ada' | 'rho', tab: string): Promise<Page> {
      let page = pages.get(who);
      if (!page) {
        const roles = { owner: ['owner'], ada: ['admin'], rho: ['role-manager'] }[who];
        const token = await signToken(t, { sub: acme.ids[who], tid: acme.tenantId, roles });
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        contexts.push(context);
        await context.addCookies([{ name: 'agentws_access', value: token, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
        page = await context.newPage();
        page.on('dialog', (d) => void d.accept());
        pages.set(who, page);
      }
      await page.goto(`${t.url}/?${tab}#/admin/${tab}`);
      await page.getByRole('heading', { name: 'Admin' }).waitFor();
      return page;
    }

    const audited = async (action: string) => (await api(t, 'GET', `/v1/admin/audit-log?action=${action}`, { token: ownerToken })).json.entries as Array<{ target: string; actor: string }>;

    it('templates: created, listed after a reload, edited, refused when the slug is taken, deleted; the audit log has them', async () => {
      const page = await open('owner', 'templates');
      await page.getByRole('button', { name: 'New template' }).click();
      const form = page.getByRole('form', { name: 'New template' });
      await form.locator('input[name=slug]').fill('code-review');
      await form.locator('input[name=name]').fill('Code review');
      await form.locator('textarea[name=systemPrompt]').fill('You review code. Be brief.');
      // A model no provider lists: the API refuses, the form stays with what was typed.
      await form.locator('input[name=model]').fill('nosuch/model');
      await form.getByRole('button', { name: 'Create template' }).click();
      await page.getByText('model nosuch/model: no provider "nosuch"').waitFor();
      await form.locator('input[name=model]').fill('');
      await form.getByRole('button', { name: 'Create template' }).click();
      await page.getByTestId('template-code-review').waitFor();

      await page.reload();
      const row = page.getByTestId('template-code-review');
      expect(await row.innerText()).toContain('Code review');
      await row.getByRole('button', { name: 'Edit' }).click();
      const edit = page.getByRole('form', { name: 'Edit template code-review' });
      expect(await edit.locator('textarea[name=systemPrompt]').inputValue()).toBe('You review code. Be brief.');
      await edit.locator('input[name=name]').fill('Careful code review');
      await edit.getByRole('button', { name: 'Save template' }).click();
      await expect.poll(() => row.innerText()).toContain('Careful code review');

      // The same slug again: the API's 409 is shown in the form.
      await page.getByRole('button', { name: 'New template' }).click();
      await page.locator('input[name=slug]').fill('code-review');
      await page.locator('input[name=name]').fill('Again');
      await page.getByRole('button', { name: 'Create template' }).click();
      await page.getByText('template "code-review" already exists').waitFor();
      await shoot(page, '20-admin-templates');
      await page.getByRole('button', { name: 'Cancel' }).click();

      const stored = await api(t, 'GET', '/v1/admin/templates', { token: ownerToken });
      expect(stored.json.templates.map((x: { slug: string; name: string; systemPrompt: string }) => [x.slug, x.name, x.systemPrompt])).toEqual([['code-review', 'Careful code review', 'You review code. Be brief.']]);

      // The audit log shows the change, in the dashboard too.
      await page.goto(`${t.url}/#/admin/audit`);
      await page.locator('input[name=action]').fill('template.update');
      await page.getByRole('button', { name: 'Filter' }).click();
      await expect.poll(() => page.getByTestId('audit-entry').first().innerText().catch(() => '')).toContain('template:code-review');

      await page.goto(`${t.url}/#/admin/templates`);
      await page.getByTestId('template-code-review').getByRole('button', { name: 'Delete' }).click();
      await page.getByText('No templates.', { exact: false }).waitFor();
      await page.reload();
      await page.getByText('No templates.', { exact: false }).waitFor();
      expect((await audited('template.create')).map((e) => e.target)).toEqual(['template:code-review']);
      expect((await audited('template.delete')).map((e) => e.target)).toEqual(['template:code-review']);
    });

    it('custom roles: what the editor does not hold is disabled, a grant beyond it shows the API\'s refusal, the role is created and edited', async () => {
      const page = await open('rho', 'roles');
      await page.getByRole('button', { name: 'New role' }).click();
      const form = page.getByRole('form', { name: 'New role' });
      // Rho holds admin.manage_roles and memory.read_own, nothing else among the yes/no permissions.
      expect(await form.locator('input[name="admin.manage_users"]').isDisabled()).toBe(true);
      expect(await form.locator('input[name="agents.create"]').isDisabled()).toBe(true);
      expect(await form.locator('input[name="admin.manage_roles"]').isDisabled()).toBe(false);
      expect(await form.locator('input[name="memory.read_own"]').isDisabled()).toBe(false);

      await form.locator('input[name=name]').fill('reader');
      await form.locator('input[name="memory.read_own"]').check();
      // A tool she may not use herself: the API refuses, and says which.
      await form.locator('input[name="tools.allowed"]').fill('read, bash');
      await form.getByRole('button', { name: 'Create role' }).click();
      await page.getByText('it grants permissions you do not hold (tools.allowed:bash)', { exact: false }).waitFor();
      await shoot(page, '21-admin-roles-refused');

      await form.locator('input[name="tools.allowed"]').fill('read');
      await form.getByRole('button', { name: 'Create role' }).click();
      await page.getByTestId('role-reader').waitFor();
      await page.reload();
      const row = page.getByTestId('role-reader');
      expect(await row.innerText()).toContain('memory.read_own');
      expect(await row.innerText()).toContain('tools: read');

      await row.getByRole('button', { name: 'Edit' }).click();
      const edit = page.getByRole('form', { name: 'Edit role reader' });
      expect(await edit.locator('input[name="memory.read_own"]').isChecked()).toBe(true);
      await edit.locator('input[name=description]').fill('Reads their own memories');
      await edit.getByRole('button', { name: 'Save role' }).click();
      await expect.poll(() => row.innerText()).toContain('Reads their own memories');

      const roles = (await api(t, 'GET', '/v1/admin/roles', { token: ownerToken })).json.roles as Array<{ id: string; name: string; description: string; permissions: any }>;
      const reader = roles.find((r) => r.name === 'reader')!;
      expect(reader.description).toBe('Reads their own memories');
      expect(reader.permissions.tools.allowed).toEqual(['read']);
      expect(reader.permissions.memory.read_own).toBe(true);
      expect(reader.permissions.admin.manage_users).toBe(false);
      expect((await audited('role.create')).some((e) => e.target === `role:${reader.id}` && e.actor === `user:${acme.ids.rho}`)).toBe(true);
      expect((await audited('role.update')).some((e) => e.target === `role:${reader.id}`)).toBe(true);
    });

    it('system roles: issue hand-over from a git host (agents.code_host) taken from the member role and given back', async () => {
      const page = await open('owner', 'roles');
      const member = page.getByTestId('role-member');
      const memberRole = async () => ((await api(t, 'GET', '/v1/admin/roles', { token: ownerToken })).json.roles as Array<{ name: string; permissions: any }>).find((r) => r.name === 'member')!;
      await member.getByRole('button', { name: 'Take issue hand-over away' }).click();
      await member.getByRole('button', { name: 'Give issue hand-over back' }).waitFor();
      expect((await memberRole()).permissions.agents.code_host).toBe(false);
      // Nothing else of the role moved: the terminal is still theirs.
      expect((await memberRole()).permissions.agents.terminal).toBe(true);
      await member.getByRole('button', { name: 'Give issue hand-over back' }).click();
      await member.getByRole('button', { name: 'Take issue hand-over away' }).waitFor();
      expect((await memberRole()).permissions.agents.code_host).toBe(true);
    });

    it('cost limits: set per role, kept after a reload and applied to the role\'s members; a role beyond the editor\'s own is refused', async () => {
      const page = await open('owner', 'limits');
      const member = page.getByTestId('limits-member');
      await member.getByRole('spinbutton', { name: 'Monthly limit of member' }).fill('25');
      await member.getByRole('spinbutton', { name: 'Per-request limit of member' }).fill('0.5');
      await member.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => member.innerText()).toContain('$25.00 a month');
      await page.reload();
      expect(await page.getByTestId('limits-member').getByRole('spinbutton', { name: 'Monthly limit of member' }).inputValue()).toBe('25');
      expect(await page.getByTestId('limits-member').getByRole('spinbutton', { name: 'Per-request limit of member' }).inputValue()).toBe('0.5');
      await shoot(page, '22-admin-limits');
      // Mia, a member, now spends within them.
      expect(await t.opened.core.spending.limits(acme.tenantId, acme.ids.mia)).toEqual({ monthly: 25, perRequest: 0.5 });
      const memberRole = (await api(t, 'GET', '/v1/admin/roles', { token: ownerToken })).json.roles.find((r: { name: string }) => r.name === 'member');
      expect((await audited('role.update')).some((e) => e.target === `role:${memberRole.id}`)).toBe(true);

      // Rho manages roles but holds none of what member grants: changing it is refused, and she is told why.
      const rho = await open('rho', 'limits');
      const row = rho.getByTestId('limits-member');
      await row.getByRole('spinbutton', { name: 'Monthly limit of member' }).fill('10');
      await row.getByRole('button', { name: 'Save' }).click();
      await row.getByText('Not allowed: you cannot change the role "member"', { exact: false }).waitFor();
      expect(await t.opened.core.spending.limits(acme.tenantId, acme.ids.mia)).toEqual({ monthly: 25, perRequest: 0.5 });
    });

    it('egress: the API\'s validation errors are shown next to their list; saved rules stay after a reload', async () => {
      // An admin does not manage the tenant: no egress tab for her.
      const ada = await open('ada', 'users');
      expect(await ada.getByRole('link', { name: 'Egress' }).count()).toBe(0);
      expect(await ada.getByRole('link', { name: 'Templates' }).count()).toBe(1);

      const page = await open('owner', 'egress');
      const form = page.getByRole('form', { name: 'Egress rules' });
      await form.locator('textarea[name=allow]').fill('github.com\nnot_a_host!');
      await form.locator('textarea[name=deny]').fill('10.0.0.0/8');
      await form.locator('input[name=ports]').fill('22');
      await form.getByRole('button', { name: 'Save egress rules' }).click();
      const allowError = page.locator('#egress-allow-error');
      await allowError.waitFor();
      // Under the allow list, in plain words, naming the entry it refuses.
      expect(await allowError.innerText()).toContain('not_a_host!');

      await form.locator('textarea[name=allow]').fill('github.com\nregistry.npmjs.org');
      await form.locator('input[name=ports]').fill('22, 70000');
      await form.getByRole('button', { name: 'Save egress rules' }).click();
      await page.locator('#egress-ports-error').waitFor();
      expect(await page.locator('#egress-ports-error').innerText()).toBe('Must be 65535 or less.');
      expect(await page.locator('#egress-allow-error').count()).toBe(0);
      await shoot(page, '23-admin-egress-refused');

      await form.locator('input[name=ports]').fill('5432, 22');
      await form.getByRole('button', { name: 'Save egress rules' }).click();
      await page.getByText('Saved: running agents follow the new rules at once.').waitFor();
      await page.reload();
      expect((await page.locator('textarea[name=allow]').inputValue()).split('\n')).toEqual(['github.com', 'registry.npmjs.org']);
      expect(await page.locator('input[name=ports]').inputValue()).toBe('22, 5432');
      const tenant = await api(t, 'GET', '/v1/admin/tenant', { token: ownerToken });
      expect(tenant.json.tenant.settings.egress).toEqual({ allow: ['github.com', 'registry.npmjs.org'], deny: ['10.0.0.0/8'], ports: [22, 5432] });
      expect((await audited('tenant.update')).length).toBe(1);
    });

    it('sign-in: an owner creates a SCIM token (shown once, with its expiry), sees who minted it, renews and revokes it', async () => {
      const page = await open('owner', 'sign-in');
      const form = page.getByRole('form', { name: 'New SCIM token' });
      await form.locator('input[name=scimName]').fill('entra');
      await form.locator('input[name=scimDays]').fill('30');
      await form.getByRole('button', { name: 'Create or renew SCIM token' }).click();
      const value = await page.getByTestId('scim-token-value').innerText();
      expect(value).toMatch(/^agentws_scim_/);
      const scim = (token: string) => fetch(`${t.url}/scim/v2/Users?count=1`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
      expect(await scim(value)).toBe(200);
      const row = page.getByTestId('scim-token-entra');
      // Who minted it, by name and email, not user:<uuid>.
      await expect.poll(() => row.innerText()).toMatch(/by .+ <owner@acme-admin\.example>/);
      expect(await row.innerText()).toMatch(/active[\s\S]*expires /);
      const listed = (await api(t, 'GET', '/v1/admin/scim/tokens', { token: ownerToken })).json.tokens.find((x: { name: string }) => x.name === 'entra');
      expect(Math.round((Date.parse(listed.expiresAt) - Date.now()) / 86_400_000)).toBe(30);
      await shoot(page, '43-admin-scim-tokens');

      // The same name again renews it: a new value, the old one refused at once.
      await page.getByRole('button', { name: 'Done' }).click();
      await form.getByRole('button', { name: 'Create or renew SCIM token' }).click();
      await expect.poll(() => page.getByTestId('new-scim-token').innerText()).toContain('renewed');
      const renewed = await page.getByTestId('scim-token-value').innerText();
      expect(renewed).not.toBe(value);
      expect(await scim(value)).toBe(401);
      await row.getByRole('button', { name: 'Revoke' }).click();
      await expect.poll(() => row.count()).toBe(0);
      expect(await scim(renewed)).toBe(401);
    });

    it('sign-in: a team that does not exist is refused next to its mapping, a line without "=" in the form; the saved mapping and its switch stay after a reload', async () => {
      const settings = async () => (await api(t, 'GET', '/v1/admin/tenant', { token: ownerToken })).json.tenant.settings;
      const before = await settings();
      const updates = (await audited('tenant.update')).length;
      const page = await open('owner', 'sign-in');
      const form = page.getByRole('form', { name: 'Sign-in group mapping' });
      const teams = form.locator('textarea[name=groupTeamMapping]');
      const teamError = page.locator('#sign-in-teams-error');
      await teams.fill('engineering = Nosuch');
      await form.getByRole('button', { name: 'Save sign-in settings' }).click();
      await teamError.waitFor();
      expect(await teamError.innerText()).toContain('settings.groupTeamMapping names unknown teams: engineering -> Nosuch');
      expect(await settings()).toEqual(before);

      // A role that does not exist: refused under its own mapping.
      const roleError = page.locator('#sign-in-roles-error');
      await teams.fill('');
      await form.locator('textarea[name=groupRoleMapping]').fill('engineering = wizard');
      await form.getByRole('button', { name: 'Save sign-in settings' }).click();
      await roleError.waitFor();
      expect(await roleError.innerText()).toContain('settings.groupRoleMapping names unknown roles: engineering -> wizard');
      expect(await settings()).toEqual(before);
      await form.locator('textarea[name=groupRoleMapping]').fill('');

      // No "=": the form refuses the line itself, without asking the API.
      await teams.fill('engineering = Nosuch\nops');
      await form.getByRole('button', { name: 'Save sign-in settings' }).click();
      await expect.poll(() => teamError.innerText()).toBe('line 2: "ops" is not "group = team"');

      expect((await api(t, 'POST', '/v1/admin/teams', { token: ownerToken, body: { name: 'Platform' } })).status).toBe(201);
      await form.locator('textarea[name=groupRoleMapping]').fill('engineering = member\n\n  ops-admins = admin  ');
      await teams.fill('engineering = platform'); // stored as the team is named
      await form.locator('input[name=applyGroupMapping]').check();
      await form.getByRole('button', { name: 'Save sign-in settings' }).click();
      await page.getByText('Saved: the next sign-in follows it.').waitFor();
      expect(await teamError.count()).toBe(0);

      await page.reload();
      expect((await page.locator('textarea[name=groupRoleMapping]').inputValue()).split('\n')).toEqual(['engineering = member', 'ops-admins = admin']);
      expect(await page.locator('textarea[name=groupTeamMapping]').inputValue()).toBe('engineering = Platform');
      expect(await page.locator('input[name=applyGroupMapping]').isChecked()).toBe(true);
      await shoot(page, '42-admin-sign-in');
      const saved = await settings();
      expect(saved.groupRoleMapping).toEqual({ engineering: 'member', 'ops-admins': 'admin' });
      expect(saved.groupTeamMapping).toEqual({ engineering: 'Platform' });
      expect(saved.signIn).toEqual({ applyGroupMapping: true });
      expect((await audited('tenant.update')).length).toBe(updates + 1);
    });

    it('gateways: created, its token rotated and never shown, its webhook registered (a bad URL refused), disabled and enabled', async () => {
      const page = await open('owner', 'gateways');
      await page.getByRole('button', { name: 'New gateway' }).click();
      const form = page.getByRole('form', { name: 'New gateway' });
      await form.locator('input[name=botUsername]').fill('acme_bot');
      await form.locator('input[name=botId]').fill('424242');
      const firstToken = `424242:${crypto.randomUUID()}`;
      await form.locator('input[name=botToken]').fill(firstToken);
      await form.getByRole('button', { name: 'Create gateway' }).click();
      await page.getByRole('heading', { name: 'acme_bot' }).waitFor();
      await page.reload();
      await page.getByRole('heading', { name: 'acme_bot' }).waitFor();
      const [gateway] = (await api(t, 'GET', '/v1/gateways', { token: ownerToken })).json.gateways;
      expect(gateway).toMatchObject({ kind: 'bot_chat', botUsername: 'acme_bot', botId: '424242', enabled: true });

      const newToken = `424242:${crypto.randomUUID()}`;
      await page.getByRole('form', { name: 'Rotate the token of acme_bot' }).locator('input[name=botToken]').fill(newToken);
      await page.getByRole('button', { name: 'Rotate token' }).click();
      await page.getByText('Token replaced', { exact: false }).waitFor();
      expect(await page.content()).not.toContain(newToken);

      // The suggested address is this test's http one: the API refuses it, and the page says why.
      const webhook = page.getByRole('form', { name: 'Register the webhook of acme_bot' });
      await webhook.getByRole('button', { name: 'Register webhook' }).click();
      // Under the address, in plain words.
      await webhook.locator('.field-error', { hasText: 'must use https' }).waitFor();
      await webhook.locator('input[name=webhookUrl]').fill('https://8.8.8.8/agentws/hook');
      await webhook.getByRole('button', { name: 'Register webhook' }).click();
      await page.locator('code', { hasText: 'https://8.8.8.8/agentws/hook' }).waitFor();
      // The platform was told, with the rotated token.
      expect(platform.webhooks().map((w) => [w.url, w.token])).toEqual([['https://8.8.8.8/agentws/hook', newToken]]);

      await page.getByRole('button', { name: 'Disable' }).click();
      await page.locator('.badge', { hasText: 'disabled' }).waitFor();
      await shoot(page, '24-admin-gateways-setup');
      await page.getByRole('button', { name: 'Enable' }).click();
      await expect.poll(() => page.locator('.badge', { hasText: 'disabled' }).count()).toBe(0);

      const updates = await api(t, 'GET', `/v1/admin/audit-log?action=gateway.update`, { token: ownerToken });
      expect(updates.json.entries.length).toBe(3); // rotated, disabled, enabled
      expect((await audited('gateway.create')).map((e) => e.target)).toEqual([`gateway:${gateway.id}`]);
      expect((await audited('gateway.webhook_register')).map((e) => e.target)).toEqual([`gateway:${gateway.id}`]);
    });

    /**
     * The session list at a phone's width (390 x 844) and a desktop's (dashboard-sessions-manage
     * .test.ts until it joined this file's app and browser, which its own start-up cost more than its two
     * tests): rename, pin, archive and restore, the filter, more pages, and the search box with its
     * snippets. No runtime: sessions are made through the API and their text indexed through the repo, as
     * a turn's end indexes it (the turn itself: test/api/sessions-turn.runtime.test.ts).
     */
    describe('the session list: manage and search', () => {
      let context: BrowserContext;
      let page: Page;
      const errors: string[] = [];

      beforeAll(async () => {
        // A tenant of its own: its sessions and search index are nobody else's here.
        const acme = await seedTenant(t, 'acme-list', [{ handle: 'mel', roles: ['member'] }]);
        const token = await signToken(t, { sub: acme.ids.mel, tid: acme.tenantId, roles: ['member'] });
        // 60 older sessions (more than a page of 50), then three to work with.
        await t.opened.db.query(
          `insert into agent_sessions (tenant_id, owner_id, title, directory, updated_at)
           select $1, $2, 'older ' || g, '/tmp/x', now() - (g || ' hours')::interval from generate_series(1, 60) g`,
          [acme.tenantId, acme.ids.mel],
        );
        const ids: string[] = [];
        for (const title of ['Quarterly report', 'Fix the flaky login test', 'Kubernetes upgrade']) {
          ids.push((await api(t, 'POST', '/v1/sessions', { token, body: { title } })).json.sessionId);
        }
        const rows = indexRows([
          { info: { id: 'msg_0001', role: 'user' }, parts: [{ type: 'text', text: 'The login test fails one run in ten on CI.' }] },
          { info: { id: 'msg_0002', role: 'assistant', time: { completed: 1 } }, parts: [{ type: 'text', text: 'It races the session cookie: wait for the redirect before asserting. <img src=x onerror=alert(1)>' }] },
        ]);
        await createSessionManageRepo().index(t.opened.db, acme.tenantId, ids[1], rows, rows.map((r) => r.messageId), 'msg_0002');

        context = await browser.newContext({ viewport: { width: 390, height: 844 } });
        await context.addCookies([{ name: 'agentws_access', value: token, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
        page = await context.newPage();
        page.on('dialog', (d) => void d.accept());
        // Failed loads are left out: /favicon.ico's 404 and the chat's 409 runtime_not_ready (no model applied
        // here) are not this screen's; the phone-width work checks the console on every screen.
        page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()));
        page.on('pageerror', (e) => errors.push(e.message));
      }, 120_000);
      afterAll(async () => {
        await context?.close().catch(() => {});
      });

      const row = (title: string) => page.getByTestId('session-row').filter({ hasText: title });
      // The list's own content fits the width (the header's wrapping at 390 px is the phone-width work's).
      const noSideScroll = () =>
        page.evaluate(() => {
          const w = globalThis as any;
          return [...w.document.querySelectorAll('section.sessions *')].filter((e: any) => e.getBoundingClientRect().right > w.innerWidth + 0.5).map((e: any) => `${e.tagName}.${e.className}`);
        });

      it('renames, pins, archives and restores at 390 px, and loads more pages', async () => {
        await page.goto(`${t.url}/#/sessions`);
        await row('Kubernetes upgrade').waitFor();
        expect(await page.getByTestId('session-row').count()).toBe(50);
        expect(await noSideScroll()).toEqual([]);
        await shoot(page, 'sessions-list-390');

        await row('Quarterly report').getByText('More').click();
        await row('Quarterly report').getByRole('button', { name: 'Rename Quarterly report' }).click();
        await page.getByRole('textbox', { name: 'New title' }).fill('Q3 report for the board');
        await page.getByRole('button', { name: 'Save' }).click();
        await row('Q3 report for the board').waitFor();

        await row('Q3 report for the board').getByRole('button', { name: 'Pin Q3 report for the board' }).click();
        await row('Q3 report for the board').getByRole('button', { name: 'Unpin Q3 report for the board' }).waitFor();
        // Pinned first.
        expect((await page.getByTestId('session-row').first().textContent())!).toContain('Q3 report for the board');

        await row('Kubernetes upgrade').getByText('More').click();
        expect(await noSideScroll()).toEqual([]);
        await shoot(page, 'sessions-menu-390');
        await row('Kubernetes upgrade').getByRole('button', { name: 'Archive Kubernetes upgrade' }).click();
        await expect.poll(() => row('Kubernetes upgrade').count()).toBe(0);
        await page.getByRole('combobox', { name: 'Show' }).selectOption('archived');
        await row('Kubernetes upgrade').getByText('More').click();
        await row('Kubernetes upgrade').getByRole('button', { name: 'Restore Kubernetes upgrade' }).click();
        await page.getByText('No archived sessions.').waitFor();
        await page.getByRole('combobox', { name: 'Show' }).selectOption('pinned');
        await expect.poll(() => page.getByTestId('session-row').count()).toBe(1);
        await page.getByRole('combobox', { name: 'Show' }).selectOption('active');
        await row('Kubernetes upgrade').waitFor();

        await page.getByRole('button', { name: 'Load more' }).click();
        await expect.poll(() => page.getByTestId('session-row').count()).toBe(63);
        await expect.poll(() => page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
        expect(await noSideScroll()).toEqual([]);
        // Export links name the session's export.
        expect(await row('Kubernetes upgrade').locator('a[download]').first().getAttribute('href')).toMatch(/^\/v1\/sessions\/[0-9a-f-]{36}\/export\?format=markdown$/);
      }, 60_000);

      it('searches as the person types: ranked results with highlighted snippets (text, never markup) that open the session at the message', async () => {
        await page.getByRole('searchbox', { name: 'Search your sessions' }).fill('redirect racing');
        const hit = page.getByTestId('search-result');
        await hit.first().waitFor();
        expect(await hit.count()).toBe(1);
        expect(await hit.locator('b').textContent()).toBe('Fix the flaky login test');
        expect(await hit.locator('mark').allTextContents()).toEqual(['races', 'redirect']);
        // The agent's markup is shown as text: no image element was made of it.
        expect(await hit.locator('img').count()).toBe(0);
        expect(await noSideScroll()).toEqual([]);
        await shoot(page, 'sessions-search-390');

        await page.getByRole('searchbox', { name: 'Search your sessions' }).fill('nothing like this anywhere');
        await page.getByText(/Nothing found for/).waitFor();
        await page.getByRole('searchbox', { name: 'Search your sessions' }).fill('login');
        await hit.first().waitFor();
        await hit.getByRole('link').first().click();
        await page.waitForURL(/#\/sessions\/[0-9a-f-]{36}(\?m=msg_000[12])?$/);
        await page.getByRole('textbox').first().waitFor();

        await page.setViewportSize({ width: 1280, height: 900 });
        await page.goto(`${t.url}/#/sessions`);
        await row('Kubernetes upgrade').waitFor();
        await shoot(page, 'sessions-list-1280');
        expect(errors).toEqual([]);
      }, 60_000);
    });
  });
});
