import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { settingHref, settingParts } from '../../src/web/setting-links.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('setting names in the dashboard\'s messages', () => {
  it('cuts a message into its text and the settings it names', () => {
    expect(settingParts('The turn waits; an operator can raise AGENTWS_RUNTIME_MAX.')).toEqual([{ text: 'The turn waits; an operator can raise ' }, { text: 'AGENTWS_RUNTIME_MAX', setting: true }, { text: '.' }]);
    expect(settingParts('turned off (AGENTWS_RUNTIME_PAGEOUT_SECONDS=0)')).toEqual([{ text: 'turned off (' }, { text: 'AGENTWS_RUNTIME_PAGEOUT_SECONDS', setting: true }, { text: '=0)' }]);
    expect(settingParts('AGENTWS_A, AGENTWS_B')).toEqual([{ text: 'AGENTWS_A', setting: true }, { text: ', ' }, { text: 'AGENTWS_B', setting: true }]);
    // No name: the text as it is; a prefix or a lower-case word is no setting.
    expect(settingParts('no settings here')).toEqual([{ text: 'no settings here' }]);
    expect(settingParts('AGENTWS_ and AGENTWS_x')).toEqual([{ text: 'AGENTWS_ and AGENTWS_x' }]);
  });

  it('links a setting to its heading in the configuration reference', () => {
    expect(settingHref('AGENTWS_RUNTIME_PAGEOUT_SECONDS')).toBe('/docs/reference/configuration#agentws_runtime_pageout_seconds');
  });

  it('every setting the dashboard names has its entry in the configuration reference', () => {
    const reference = readFileSync(join(ROOT, 'docs', 'reference', 'configuration.md'), 'utf8');
    const headings = new Set([...reference.matchAll(/^## (\S+)$/gm)].map((m) => m[1]));
    const named = new Set<string>();
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(dir, e.name));
        else if (/\.tsx?$/.test(e.name) && e.name !== 'setting-links.ts') for (const p of settingParts(readFileSync(join(dir, e.name), 'utf8'))) if (p.setting) named.add(p.text);
      }
    };
    walk(join(ROOT, 'src', 'web'));
    expect(named.size).toBeGreaterThan(5);
    expect([...named].filter((n) => !headings.has(n))).toEqual([]);
  });
});
