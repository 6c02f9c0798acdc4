// `npm run docs:gen`: writes the generated reference pages (scripts/docs/references.ts) under docs/reference.
// Needs oclif.manifest.json, which `npm run build` writes: `npm run docs:gen` builds first when the sources
// changed since the last build (a stale manifest would write yesterday's command texts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generateReferences, ROOT } from './docs/references.js';

for (const [path, text] of await generateReferences()) {
  mkdirSync(dirname(join(ROOT, path)), { recursive: true });
  writeFileSync(join(ROOT, path), text);
  console.log(`wrote ${path} (${text.split('\n').length} lines)`);
}
