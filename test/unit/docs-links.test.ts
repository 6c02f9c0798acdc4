import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf, docPages, githubSlug, linksOf, slugger } from '../../scripts/docs/markdown.js';
import { ROOT } from '../../scripts/docs/references.js';

describe('GitHub heading anchors', () => {
  it('follow GitHub\'s rules: lower case, punctuation dropped, spaces hyphens, repeats numbered', () => {
    expect(githubSlug('Containers: image and compose')).toBe('containers-image-and-compose');
    expect(githubSlug('AGENTWS_RUNTIME_MAX')).toBe('agentws_runtime_max');
    expect(githubSlug('What\'s new? (2.0)')).toBe('whats-new-20');
    expect(githubSlug('A -- B')).toBe('a----b');
    const s = slugger();
    expect(['Usage', 'Usage', 'Usage'].map(s)).toEqual(['usage', 'usage-1', 'usage-2']);
    expect(anchorsOf('# `aws init` **now**\n\n```\n# not a heading\n```\n<a id="kept"></a>\n')).toEqual(new Set(['aws-init-now', 'kept']));
  });
});

// Every relative link in the README and under docs/ leads to a file of the repository, and every #anchor
// to a heading of its target. Links to other sites are not fetched (the suite runs offline).
describe('links in README.md and docs/', () => {
  const pages = docPages(ROOT);
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string) => anchors.get(path) ?? anchors.set(path, anchorsOf(readFileSync(join(ROOT, path), 'utf8'))).get(path)!;

  it('finds the pages', () => {
    expect(pages).toContain('README.md');
    expect(pages).toContain('docs/README.md');
    expect(pages).toContain('docs/reference/configuration.md');
  });

  it.each(pages)('%s: every relative link resolves, every anchor names a heading', (page) => {
    const broken: string[] = [];
    for (const href of linksOf(readFileSync(join(ROOT, page), 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//')) continue; // https:, mailto: …
      const [rawPath, anchor] = href.split('#', 2);
      const path = decodeURIComponent(rawPath);
      const target = path === '' ? page : join(dirname(page), path);
      if (path.startsWith('/')) broken.push(`${href}: absolute path (write it relative to ${page}, so it works on GitHub and at /docs)`);
      else if (!existsSync(join(ROOT, target))) broken.push(`${href}: no file ${target}`);
      else if (anchor !== undefined && target.endsWith('.md') && statSync(join(ROOT, target)).isFile() && !anchorsIn(target).has(decodeURIComponent(anchor)))
        broken.push(`${href}: no heading #${anchor} in ${target}`);
    }
    expect(broken, `broken links in ${page}`).toEqual([]);
  });
});

// The README is the way in: short, and its quick start true. Its test command is the one CI runs.
describe('the README', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const quickStart = /^## Quick start\n[\s\S]*?```sh\n([\s\S]*?)```/m.exec(readme)?.[1] ?? '';
  const commands = quickStart.split('\n').map((l) => l.replace(/#.*$/, '').trim()).filter(Boolean);

  it('is at most ~250 lines and links to the docs by audience', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(260);
    for (const page of ['docs/README.md', 'docs/getting-started/README.md', 'docs/operating/runner-hosts.md', 'docs/developing/tests.md']) expect(readme).toContain(`](${page})`);
  });

  it('gives the two quick-start commands, and the second is exactly what .ci/run runs', () => {
    expect(commands).toEqual(['./install.sh --serve', './install.sh --test']);
    const ci = readFileSync(join(ROOT, '.ci', 'run'), 'utf8');
    const run = ci.split('\n').filter((l) => l.startsWith('./install.sh'));
    expect(run.map((l) => l.replace(/\s*<\/dev\/null$/, ''))).toEqual([commands[1]]);
  });
});
