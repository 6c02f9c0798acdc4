import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signInAs, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, shoot } from '../helpers/browser.js';

const KEY = 'sk-right-key-0123456789abcdef';
const WRONG = 'sk-wrong-key-fedcba9876543210';

/**
 * Setting a workspace up in the dashboard only (issue 27, item 1): a fresh tenant with nothing set up
 * shows its first-run checklist (a member is told who to ask, the owner gets links), the owner adds a
 * provider with a key the provider refuses (the test says so in the provider's words), rotates it, tests
 * again, picks the default model and applies it, and the first prompt is answered by the scripted model.
 * Then the embedder screen: set, backfill with progress, clear. Real Chromium, the real app with its
 * managed runtime in the sandbox and an in-process worker, the scripted model on loopback.
 */
describe('setting a workspace up in the dashboard', () => {
  let browser: Browser;
  let llm: FakeLlm;
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
    t = await startTestApp();
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
    // Set-up complete: the owner's runtime starts and prepares now, before any prompt (issue 39), so the
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
});
