import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARS } from '../../src/config/config.schema.js';
import { generateReferences, ROOT } from '../../scripts/docs/references.js';

// The reference pages are generated from the code (scripts/docs/references.ts); a committed page that
// differs from what the code produces now has drifted. Needs oclif.manifest.json (`npm run build`, which
// `npm test` runs first).
describe('the generated references under docs/reference', () => {
  it('match what the code produces now', async () => {
    const pages = await generateReferences();
    expect([...pages.keys()].sort()).toEqual(['docs/reference/api.md', 'docs/reference/commands.md', 'docs/reference/configuration.md']);
    for (const [path, text] of pages) {
      const file = join(ROOT, path);
      const committed = existsSync(file) ? readFileSync(file, 'utf8') : '';
      expect(committed === text, `${path} differs from what the code produces: run \`npm run docs:gen\` and commit the result`).toBe(true);
    }
  });

  it('name every setting, command and route', async () => {
    const pages = await generateReferences();
    for (const v of CONFIG_VARS) expect(pages.get('docs/reference/configuration.md')).toContain(`\n## ${v.name}\n`);
    const manifest = JSON.parse(readFileSync(join(ROOT, 'oclif.manifest.json'), 'utf8')) as { commands: Record<string, { id: string }> };
    for (const c of Object.values(manifest.commands)) expect(pages.get('docs/reference/commands.md')).toContain(`\n## aws ${c.id.replace(/:/g, ' ')}\n`);
    const api = pages.get('docs/reference/api.md')!;
    for (const route of ['`GET /v1/auth/me`', '`POST /v1/sessions`', '`GET /metrics`']) expect(api).toContain(route);
    expect(api).not.toContain('GET /v1/openapi.json'); // hidden from its own document
  });
});
