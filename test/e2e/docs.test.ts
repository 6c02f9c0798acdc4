import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signInAs, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, SCREENSHOTS } from '../helpers/browser.js';

/**
 * The docs the appliance serves, in real Chromium: `/docs` (the pages of docs/, with a navigation by
 * audience and a search) and `/docs/api` (Swagger UI over the instance's own OpenAPI document). Both are
 * read offline: every request that would leave the instance is refused and named, and a violation of the
 * Content-Security-Policy (a console error) fails the test. "Try it out" in the API reference calls the
 * instance as the person signed in to the dashboard: their sign-in cookie, and the CSRF header a change
 * made with it needs. No runtime is started: nothing here needs an agent.
 */
describe('the docs at /docs and the API reference at /docs/api', () => {
  let browser: Browser;
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  /** A browser context whose requests may reach this instance only; what else it asked for, and its console errors. */
  async function offline(cookie?: string): Promise<{ context: BrowserContext; page: Page; outside: string[]; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    if (cookie) await context.addCookies([{ name: 'agentws_access', value: cookie, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
    const outside: string[] = [];
    await context.route('**/*', (route) => (route.request().url().startsWith(`${t.url}/`) ? route.continue() : (outside.push(route.request().url()), route.abort())));
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    page.on('pageerror', (e) => problems.push(e.message));
    return { context, page, outside, problems };
  }

  /** Opens one operation of the API reference and presses "Try it out". */
  async function tryOperation(page: Page, tag: string, method: string, path: string) {
    await page.goto(`${t.url}/docs/api`);
    await page.locator(`.opblock-tag[data-tag="${tag}"]`).click();
    const op = page.locator(`.opblock-${method}`).filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) });
    await op.locator('.opblock-summary').click();
    await op.getByRole('button', { name: 'Try it out' }).click();
    return op;
  }

  const executed = async (op: ReturnType<Page['locator']>) => {
    await op.getByRole('button', { name: 'Execute' }).click();
    const row = op.locator('.live-responses-table .response').first();
    await row.waitFor();
    return { status: (await row.locator('.response-col_status').innerText()).trim(), body: await row.locator('.response-col_description').innerText() };
  };

  beforeAll(async () => {
    browser = await launchChromium();
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
  }, 120_000);
  afterAll(async () => {
    await browser?.close().catch(() => {});
    await t?.close();
  });

  it('reaches the runner-host page from /docs in two clicks of the navigation by audience, and by the search', async () => {
    const { context, page, outside, problems } = await offline();
    try {
      await page.goto(`${t.url}/docs`);
      const nav = page.getByRole('navigation', { name: 'Pages' });
      // The map's sections, folded: an operator opens theirs (one click) and picks the page (two).
      expect(await nav.locator('summary').allTextContents()).toEqual(
        expect.arrayContaining(['Getting started', 'Operating', 'Administering a tenant', 'Using it', 'Security', 'The API', 'Developing', 'Reference']),
      );
      const runnerHosts = nav.getByRole('link', { name: 'Scaling out: runner hosts', exact: true });
      expect(await runnerHosts.isVisible()).toBe(false);
      await nav.locator('summary', { hasText: /^Operating$/ }).click();
      await runnerHosts.click();
      await page.waitForURL(`${t.url}/docs/operating/runner-hosts`);
      expect(await page.locator('h1').innerText()).toContain('Scaling out: runner hosts');
      // On that page its section stays open and the page is marked as the current one.
      expect(await nav.locator('a[aria-current="page"]').innerText()).toBe('Scaling out: runner hosts');

      // The search, from the map again: its first result is the page itself.
      await page.goto(`${t.url}/docs`);
      await page.getByRole('searchbox', { name: 'Search the docs' }).fill('runner hosts');
      const first = page.locator('section.results li a').first();
      await expect.poll(() => first.innerText()).toBe('Scaling out: runner hosts');
      await first.click();
      await page.waitForURL(`${t.url}/docs/operating/runner-hosts`);

      // A setting from the generated reference, by its name's words, leads to its heading.
      await page.getByRole('searchbox', { name: 'Search the docs' }).fill('heartbeat timeout');
      await page.locator('section.results').getByRole('link', { name: /AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS/ }).click();
      await page.waitForURL(`${t.url}/docs/reference/configuration#agentws_runner_heartbeat_timeout_ms`);
      expect(await page.locator('h1').innerText()).toContain('Configuration reference');
      await page.screenshot({ path: join(SCREENSHOTS, 'docs-configuration.png') }); // the viewport: the page is long
      expect(problems).toEqual([]); // a CSP violation is a console error
      expect(outside).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('"Try it out" in /docs/api calls the instance as the signed-in person: a read with their cookie, a change with the CSRF header too', async () => {
    const s = await signInAs(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    const { context, page, outside, problems } = await offline(s.access);
    try {
      const me = await tryOperation(page, 'auth', 'get', '/v1/auth/me');
      const read = await executed(me);
      expect(read.status).toBe('200');
      expect(read.body).toContain('mia@acme.example');
      expect(await page.locator('.opblock-tag').count()).toBeGreaterThan(10);
      await page.screenshot({ path: join(SCREENSHOTS, 'docs-api.png') });

      // A change: the cookie alone would be refused (csrf_failed); the reference sends the header.
      const write = await tryOperation(page, 'memories', 'post', '/v1/memories');
      await write.locator('textarea.body-param__text').fill(JSON.stringify({ kind: 'fact', content: 'Written from the API reference' }));
      const made = await executed(write);
      expect(made.status).toBe('201');
      const mine = await api(t, 'GET', '/v1/memories', { token: s.access });
      expect(mine.json.memories.map((m: { content: string }) => m.content)).toEqual(['Written from the API reference']);
      expect(problems).toEqual([]);
      expect(outside).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('without a sign-in, the same "Try it out" is refused by the instance (401): the session is what the call carries', async () => {
    const { context, page, problems } = await offline();
    try {
      const me = await tryOperation(page, 'auth', 'get', '/v1/auth/me');
      expect((await executed(me)).status).toBe('401');
      // The refused call is the page's own console error, nothing else.
      expect(problems.filter((p) => !/401/.test(p))).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
