import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Type } from '@sinclair/typebox';
import { NotFoundError } from '../../kernel/errors.js';
import type { App } from '../app-type.js';

/**
 * The browser dashboard (issue 16) at `/`, from the files `npm run build` writes to dist/web (sources in
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

interface Asset {
  type: string;
  raw: Buffer;
  gzip: Buffer;
}

const TYPES: Record<string, string> = {
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
  const asset = (path: string, type: string): Asset => {
    const raw = readFileSync(path);
    return { type, raw, gzip: gzipSync(raw, { level: 9 }) };
  };
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(join(dir, 'assets'))) {
    const ext = name.slice(name.lastIndexOf('.'));
    if (TYPES[ext]) assets.set(name, asset(join(dir, 'assets', name), TYPES[ext]));
  }
  return { index: asset(join(dir, 'index.html'), TYPES['.html']), assets };
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

  app.get('/assets/:name', { schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 100 }) }) } }, async (req, reply) => {
    const a = files?.assets.get(req.params.name);
    if (!a) throw new NotFoundError('no such asset');
    const { body, encoding } = send(req.headers['accept-encoding'], a);
    if (encoding) reply.header('content-encoding', encoding);
    // Named by their content's hash: a new build has new names, so they can be kept for good.
    return reply.header('cache-control', 'public, max-age=31536000, immutable').header('vary', 'accept-encoding').header('x-content-type-options', 'nosniff').type(a.type).send(body);
  });
}
