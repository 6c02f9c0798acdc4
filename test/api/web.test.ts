import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCS_API_CSP, DOCS_CSP } from '../../src/http/routes/docs.routes.js';
import { DASHBOARD_CSP, dashboardDir } from '../../src/http/routes/web.routes.js';
import { docPages, pageUrl } from '../../scripts/docs/markdown.js';
import { ROOT } from '../../scripts/docs/references.js';
import { api, seedTenant, signInAs, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

// The dashboard's files come from `npm run build` (dist/web), which the test command runs first.
describe(`the dashboard at / and its CSRF defence (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let cookie = '';

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    cookie = `agentws_access=${(await signInAs(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] })).access}`;
  });
  afterAll(async () => t?.close());

  it('serves the dashboard with a strict Content-Security-Policy, its assets gzipped and cached for good', async () => {
    expect(dashboardDir()).not.toBeNull();
    const page = await fetch(`${t.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const html = await page.text();
    expect(html).not.toMatch(/<script>|<script(?![^>]*\bsrc=)[^>]*>/); // no inline script: the policy would block it
    const js = /src="\/assets\/(app-[0-9a-f]{12}\.js)"/.exec(html)![1];
    const css = /href="\/assets\/(app-[0-9a-f]{12}\.css)"/.exec(html)![1];

    const raw = await fetch(`${t.url}/assets/${js}`, { headers: { 'accept-encoding': 'identity' } });
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(raw.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const body = Buffer.from(await raw.arrayBuffer());
    // Node's fetch would decode gzip itself: ask over plain HTTP to see the bytes sent.
    const zipped = await new Promise<Buffer>((resolve, reject) => {
      import('node:http').then(({ get }) =>
        get(`${t.url}/assets/${js}`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
          expect(res.headers['content-encoding']).toBe('gzip');
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
        }).on('error', reject),
      );
    });
    expect(zipped.length).toBeLessThan(body.length / 2);
    expect(gunzipSync(zipped).equals(body)).toBe(true);
    expect((await fetch(`${t.url}/assets/${css}`)).headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect((await fetch(`${t.url}/assets/app-000000000000.js`)).status).toBe(404);
    expect((await fetch(`${t.url}/assets/..%2Fweb%2Findex.html`)).status).toBe(404);
  });

  it('serves the docs at /docs and the API reference at /docs/api, without sign-in, under the dashboard\'s policy for scripts', async () => {
    // Every Markdown page of the repository's docs is a page at /docs, reached from the navigation (which
    // lists the map's sections by audience).
    const index = await fetch(`${t.url}/docs`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('content-security-policy')).toBe(DOCS_CSP);
    expect(DOCS_CSP).toBe(DASHBOARD_CSP);
    const html = await index.text();
    expect(html).not.toMatch(/<script>|<script(?![^>]*\bsrc=)[^>]*>|\sstyle=/); // no inline script or style
    const urls = docPages(ROOT).map(pageUrl);
    expect(urls).toEqual(
      expect.arrayContaining(['/docs', '/docs/readme', '/docs/operating/runner-hosts', '/docs/api/overview', '/docs/reference/configuration', '/docs/reference/commands', '/docs/reference/api']),
    );
    expect(urls).not.toContain('/docs/api'); // the interactive reference's, below
    for (const url of urls) {
      expect(html, url).toContain(`href="${url}"`);
      const page = await fetch(`${t.url}${url}`);
      expect([page.status, page.headers.get('content-security-policy')], url).toEqual([200, DOCS_CSP]);
    }
    // The navigation is the map's sections, by audience (docs/README.md's headings).
    for (const section of ['Getting started', 'Operating', 'Administering a tenant', 'Using it', 'Security', 'The API', 'Developing', 'Reference'])
      expect(html, section).toContain(`<summary>${section}</summary>`);
    const config = await (await fetch(`${t.url}/docs/reference/configuration`)).text();
    expect(config).toContain('<h2 id="agentws_runtime_max">');
    expect(await (await fetch(`${t.url}/docs/reference/commands`)).text()).toContain('<h2 id="aws-init">');
    expect((await fetch(`${t.url}/docs/no-such-page`)).status).toBe(404);
    const css = /href="(\/docs\/assets\/docs-[0-9a-f]{12}\.css)"/.exec(html)![1];
    expect((await fetch(`${t.url}${css}`)).headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

    // The API reference: Swagger UI from this origin over the service's own document.
    const ui = await fetch(`${t.url}/docs/api`);
    expect(ui.status).toBe(200);
    expect(ui.headers.get('content-security-policy')).toBe(DOCS_API_CSP);
    expect(DOCS_API_CSP).toContain("script-src 'self';");
    expect(DOCS_API_CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    const uiHtml = await ui.text();
    expect(uiHtml).not.toMatch(/<script>|<script(?![^>]*\bsrc=)[^>]*>/);
    for (const src of uiHtml.match(/(?<=src=")[^"]+/g)!) expect((await fetch(new URL(src, `${t.url}/docs/api`))).status, src).toBe(200);
    const init = await fetch(`${t.url}/docs/api/static/swagger-initializer.js`);
    expect(init.headers.get('content-security-policy')).toBe(DOCS_API_CSP);
    expect(await init.text()).toContain('X-Agentws-Csrf');
    expect((await api(t, 'GET', '/docs/api/json')).json).toEqual((await api(t, 'GET', '/v1/openapi.json')).json);
  });

  it('asks a change made with the cookie for the CSRF header; a bearer token needs none', async () => {
    const noHeader = await api(t, 'POST', '/v1/sessions', { body: { title: 'forged' }, headers: { cookie } });
    expect(noHeader.status).toBe(403);
    expect(noHeader.json).toMatchObject({ error: 'csrf_failed' });
    const crossOrigin = await api(t, 'POST', '/v1/sessions', { body: { title: 'forged' }, headers: { cookie, 'x-agentws-csrf': '1', origin: 'https://evil.example' } });
    expect(crossOrigin.status).toBe(403);
    const sameSite = await api(t, 'POST', '/v1/sessions', { body: { title: 'forged' }, headers: { cookie, 'x-agentws-csrf': '1', 'sec-fetch-site': 'same-site' } });
    expect(sameSite.status).toBe(403);
    // Nothing was created by the refused ones.
    expect((await api(t, 'GET', '/v1/sessions', { headers: { cookie } })).json.sessions).toEqual([]);

    const ok = await api(t, 'POST', '/v1/sessions', { body: { title: 'mine' }, headers: { cookie, 'x-agentws-csrf': '1', origin: t.url, 'sec-fetch-site': 'same-origin' } });
    expect(ok.status).toBe(201);
    expect((await api(t, 'GET', '/v1/sessions', { headers: { cookie } })).json.sessions.map((s: { title: string }) => s.title)).toEqual(['mine']);
    // Reads need no header.
    expect((await api(t, 'GET', '/v1/auth/me', { headers: { cookie } })).json.permissions.agents.create).toBe(true);
  });

  it('lists a session\'s pending permission requests (none yet) for its owner only', async () => {
    const mine = await api(t, 'POST', '/v1/sessions', { body: { title: 'p' }, headers: { cookie, 'x-agentws-csrf': '1' } });
    const r = await api(t, 'GET', `/v1/sessions/${mine.json.sessionId}/permissions`, { headers: { cookie } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ permissions: [] });
    const other = await signInAs(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    expect((await api(t, 'GET', `/v1/sessions/${mine.json.sessionId}/permissions`, { token: other.access })).status).toBe(404);
  });
});

describe(`demo mode refuses changes other sites ask a browser to make (${DB_MODE})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'owner@ops.example' } });
    await seedTenant(t, 'ops');
  });
  afterAll(async () => t?.close());

  it('says a caller acts in demo mode (the dashboard\'s sign-out explains it), and serves an icon', async () => {
    const me = await api(t, 'GET', '/v1/auth/me');
    expect([me.status, me.json.demo, me.json.user.email]).toEqual([200, true, 'owner@ops.example']);
    for (const path of ['/favicon.ico', '/favicon.svg']) {
      const icon = await fetch(`${t.url}${path}`);
      expect([icon.status, icon.headers.get('content-type')], path).toEqual([200, 'image/svg+xml']);
      expect(await icon.text()).toMatch(/^<svg /);
    }
  });

  it('a page of another origin cannot act as the operator; scripts without an Origin still can', async () => {
    const forged = await api(t, 'POST', '/v1/sessions', { body: { title: 'forged' }, headers: { origin: 'http://localhost:3000' } });
    expect(forged.status).toBe(403);
    expect(forged.json.error).toBe('csrf_failed');
    const script = await api(t, 'POST', '/v1/sessions', { body: { title: 'from curl' } });
    expect(script.status).toBe(201);
    const page = await api(t, 'POST', '/v1/sessions', { body: { title: 'from the dashboard' }, headers: { origin: t.url, 'x-agentws-csrf': '1', 'sec-fetch-site': 'same-origin' } });
    expect(page.status).toBe(201);
  });
});
