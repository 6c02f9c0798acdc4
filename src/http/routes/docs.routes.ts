import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError } from '../../kernel/errors.js';
import type { App } from '../app-type.js';
import { DASHBOARD_CSP, FAVICON_SVG, TYPES, dashboardDir, readAsset, type Asset } from './web.routes.js';

/**
 * The documentation, served by the appliance itself so it can be read where the internet cannot be
 * reached: `/docs` the pages of docs/ (and the README), rendered to HTML by `npm run build`
 * (scripts/build-docs.ts writes dist/web/docs), and `/docs/api` an interactive reference over the API's
 * OpenAPI document (Swagger UI, vendored by @fastify/swagger-ui). Public, like /v1/openapi.json: they
 * say what the product is and does, nothing of a tenant; no sign-in is asked.
 *
 * The pages keep the dashboard's Content-Security-Policy exactly (their script and stylesheet are files of
 * this origin). Swagger UI needs no looser script policy either: its bundle and initializer are files of
 * this origin too; only `style-src` names one more thing, for /docs/api alone (DOCS_API_CSP).
 */
export const DOCS_CSP = DASHBOARD_CSP;

/**
 * The API reference's policy: the dashboard's, with one exception for styles. Swagger UI's bundle inserts
 * one fixed inline <style> block, which 'self' refuses (a violation in the console on every load); that
 * block alone is allowed, by its hash, rather than 'unsafe-inline'. Scripts are as strict as the
 * dashboard's ('self' only, no inline script, no eval). A new Swagger UI whose block differs shows as a
 * violation in the browser test (test/e2e/docs.test.ts): put the hash the console names here.
 */
const SWAGGER_UI_STYLE_HASH = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='";
export const DOCS_API_CSP = DASHBOARD_CSP.replace("style-src 'self'", `style-src 'self' ${SWAGGER_UI_STYLE_HASH}`);

/** The dashboard's file types, and the search index's JSON. */
const DOC_TYPES: Record<string, string> = { ...TYPES, '.json': 'application/json; charset=utf-8' };

const asset = (path: string): Asset => readAsset(path, DOC_TYPES[path.slice(path.lastIndexOf('.'))] ?? 'application/octet-stream');

/** The rendered docs (dist/web/docs): the pages by URL and their assets by name. Null when not built. */
function loadDocs(dir: string | null): { pages: Map<string, Asset>; assets: Map<string, Asset> } | null {
  const root = dir ? join(dir, 'docs') : null;
  if (!root || !existsSync(join(root, 'site.json'))) return null;
  const site = JSON.parse(readFileSync(join(root, 'site.json'), 'utf8')) as { pages: { url: string; file: string }[] };
  const pages = new Map(site.pages.map((p) => [p.url, asset(join(root, 'pages', p.file))]));
  const assets = new Map(readdirSync(join(root, 'assets')).map((name) => [name, asset(join(root, 'assets', name))]));
  return { pages, assets };
}

export async function docsRoutes(app: App, opts: { dir?: string | null } = {}): Promise<void> {
  const docs = loadDocs(opts.dir === undefined ? dashboardDir() : opts.dir);
  const send = (req: FastifyRequest, reply: FastifyReply, a: Asset, cache: string) => {
    const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '');
    if (gzip) reply.header('content-encoding', 'gzip');
    return reply.header('cache-control', cache).header('vary', 'accept-encoding').header('x-content-type-options', 'nosniff').type(a.type).send(gzip ? a.gzip : a.raw);
  };

  const page = async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header('content-security-policy', DOCS_CSP).header('referrer-policy', 'no-referrer').header('x-frame-options', 'DENY');
    if (!docs) {
      return reply.status(503).type('text/plain; charset=utf-8').send('The docs are not built: run `npm run build` (it writes dist/web/docs), then restart. They are also in the docs/ folder of the source.\n');
    }
    const url = req.url.split(/[?#]/)[0].replace(/\/+$/, '') || '/docs';
    const found = docs.pages.get(url);
    if (!found) throw new NotFoundError('no such page of the docs');
    // Always asked again (a new build changes them and the assets they name).
    return send(req, reply, found, 'no-cache');
  };
  app.get('/docs', { schema: { hide: true } }, page);
  app.get('/docs/*', { schema: { hide: true } }, page);

  app.get('/docs/assets/:name', { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 100 }) }) } }, async (req, reply) => {
    const a = docs?.assets.get(req.params.name);
    if (!a) throw new NotFoundError('no such asset');
    // Named by their content's hash: kept for good.
    return send(req, reply, a, 'public, max-age=31536000, immutable');
  });

  await app.register(swaggerUi, {
    routePrefix: '/docs/api',
    // The reference reads the document of `app.swagger()` at /docs/api/json: the one /v1/openapi.json
    // answers, made by the same call, public as that one is.
    staticCSP: DOCS_API_CSP,
    logo: { type: 'image/svg+xml', content: Buffer.from(FAVICON_SVG), href: '/docs', target: '_self' },
    theme: { title: 'API reference · Agent Workspace Service' },
    uiConfig: {
      deepLinking: true,
      docExpansion: 'none',
      tryItOutEnabled: false,
      // "Try it out" calls this instance as the person signed in to the dashboard: the browser sends the
      // sign-in cookie, and a change made with the cookie needs the CSRF header (src/http/csrf.ts).
      requestInterceptor: ((req: { headers: Record<string, string> }) => {
        req.headers['X-Agentws-Csrf'] = '1';
        return req;
      }) as never,
    },
    uiHooks: {
      onRequest: (_req, reply, done) => {
        reply.header('referrer-policy', 'no-referrer').header('x-frame-options', 'DENY').header('x-content-type-options', 'nosniff');
        done();
      },
    },
  });
}
