import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { NotFoundError } from '../../kernel/errors.js';
import type { App } from '../app-type.js';

/**
 * The browser dashboard at `/`, from the files `npm run build` writes to dist/web (sources in
 * src/web): index.html and content-hashed assets, held in memory with their gzip form (a few tens of KB).
 * Same origin as the API, so the sign-in cookies and the CSRF header work without CORS.
 *
 * Content-Security-Policy: scripts, styles, connections only from this origin; no inline script, no
 * eval, no framing, no plugins. What a model writes is rendered as text by Preact, never as HTML, and
 * the policy is the second wall if that ever changes.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The dashboard's icon: a small SVG (a rounded square with a prompt chevron), linked from index.html and
 * also answered at /favicon.ico, which browsers and tools ask for on their own (a 404 there is logged
 * as an error in the browser's console).
 */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f5fbf"/><path d="M9 10l7 6-7 6" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/><path d="M17 23h7" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>';

/** A file served from memory, with its gzip made once at start. */
export interface Asset {
  type: string;
  raw: Buffer;
  gzip: Buffer;
}

export function readAsset(path: string, type: string): Asset {
  const raw = readFileSync(path);
  return { type, raw, gzip: gzipSync(raw, { level: 9 }) };
}

export const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

/** dist/web beside the compiled code (dist/src/http/routes → dist/web), or dist/web of the checkout when run from sources. */
export function dashboardDir(): string | null {
  const here = fileURLToPath(new URL('.', import.meta.url));
  for (const dir of [join(here, '..', '..', '..', 'web'), join(here, '..', '..', '..', 'dist', 'web')]) {
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return null;
}

function load(dir: string): { index: Asset; assets: Map<string, Asset> } {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(join(dir, 'assets'))) {
    const ext = name.slice(name.lastIndexOf('.'));
    if (TYPES[ext]) assets.set(name, readAsset(join(dir, 'assets', name), TYPES[ext]));
  }
  return { index: readAsset(join(dir, 'index.html'), TYPES['.html']), assets };
}

export async function webRoutes(app: App, opts: { dir?: string | null } = {}): Promise<void> {
  const dir = opts.dir === undefined ? dashboardDir() : opts.dir;
  const files = dir ? load(dir) : null;
  const send = (accept: string | undefined, a: Asset) => (/\bgzip\b/.test(accept ?? '') ? { body: a.gzip, encoding: 'gzip' } : { body: a.raw, encoding: undefined });

  app.get('/', { schema: { hide: true } }, async (req, reply) => {
    reply.header('content-security-policy', DASHBOARD_CSP).header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer').header('x-frame-options', 'DENY');
    if (!files) {
      return reply
        .status(503)
        .type('text/plain; charset=utf-8')
        .send('The dashboard is not built: run `npm run build` (it writes dist/web), then restart. The API is at /v1 (its document at /v1/openapi.json).\n');
    }
    const { body, encoding } = send(req.headers['accept-encoding'], files.index);
    if (encoding) reply.header('content-encoding', encoding);
    // Always asked again (it names the current assets); small.
    return reply.header('cache-control', 'no-cache').header('vary', 'accept-encoding').type(files.index.type).send(body);
  });

  const icon = async (_req: unknown, reply: FastifyReply) =>
    reply.header('cache-control', 'public, max-age=86400').header('x-content-type-options', 'nosniff').type('image/svg+xml').send(FAVICON_SVG);
  app.get('/favicon.svg', { schema: { hide: true } }, icon);
  app.get('/favicon.ico', { schema: { hide: true } }, icon);

  app.get('/assets/:name', { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 100 }) }) } }, async (req, reply) => {
    const a = files?.assets.get(req.params.name);
    if (!a) throw new NotFoundError('no such asset');
    const { body, encoding } = send(req.headers['accept-encoding'], a);
    if (encoding) reply.header('content-encoding', encoding);
    // Named by their content's hash: a new build has new names, so they can be kept for good.
    return reply.header('cache-control', 'public, max-age=31536000, immutable').header('vary', 'accept-encoding').header('x-content-type-options', 'nosniff').type(a.type).send(body);
  });
}
