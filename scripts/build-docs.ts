// Renders the docs (README.md and docs/**/*.md) to HTML pages in dist/web/docs, which `aws serve` answers
// at /docs (src/http/routes/docs.routes.ts). Run by `npm run build` after the dashboard's build (which
// empties dist/web). Nothing is fetched when a page is read: the pages, one stylesheet, one script (the
// search) and the search index are files of this build, named by their content's hash, so the dashboard's
// Content-Security-Policy holds (no inline script or style).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { Lexer, Marked, type Token, type Tokens } from 'marked';
import { docPages, pageUrl, plainText, slugger } from './docs/markdown.js';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'dist', 'web', 'docs');

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const hashed = (base: string, ext: string, bytes: string | Buffer) => `${base}-${createHash('sha256').update(bytes).digest('hex').slice(0, 12)}.${ext}`;

interface Section {
  url: string;
  page: string;
  heading: string;
  text: string;
}

const pages = docPages(ROOT);
const urls = new Map(pages.map((p) => [p, pageUrl(p)]));
const titles = new Map<string, string>();
const sources = new Map(pages.map((p) => [p, readFileSync(join(ROOT, p), 'utf8')]));
for (const [p, md] of sources) titles.set(p, /^# (.+)$/m.exec(md)?.[1].replace(/`/g, '') ?? p);

function render(path: string, md: string): { html: string; sections: Section[] } {
  const slug = slugger();
  const url = urls.get(path)!;
  const ids = new WeakMap<Tokens.Heading, string>();
  const marked = new Marked({ gfm: true, async: false });
  marked.use({
    renderer: {
      heading(token: Tokens.Heading) {
        const id = slug(plainText(token.text));
        ids.set(token, id);
        return `<h${token.depth} id="${esc(id)}"><a class="anchor" href="#${esc(id)}" aria-hidden="true">#</a>${this.parser.parseInline(token.tokens)}</h${token.depth}>\n`;
      },
      link({ href, title, tokens }: Tokens.Link) {
        const inner = this.parser.parseInline(tokens);
        const target = siteHref(path, href);
        if (target === null) return `<span class="repo-link" title="${esc(href)} in the repository">${inner}</span>`;
        return `<a href="${esc(target)}"${title ? ` title="${esc(title)}"` : ''}>${inner}</a>`;
      },
    },
  });
  const lexed = marked.lexer(md);
  const html = marked.parser(lexed);
  // For the search: the text under each heading of the page (headings are its top-level tokens).
  const sections: Section[] = [];
  let raw: string[] = [];
  const flush = () => {
    const s = sections.at(-1);
    if (s) s.text = toSearchText(raw.join(''));
    raw = [];
  };
  for (const t of lexed) {
    if (t.type !== 'heading') {
      raw.push(t.raw);
      continue;
    }
    flush();
    const h = t as Tokens.Heading;
    sections.push({ url: h.depth === 1 ? url : `${url}#${ids.get(h)}`, page: titles.get(path)!, heading: plainText(h.text), text: '' });
  }
  flush();
  return { html, sections };
}

/** Plain text of a section's Markdown for the search: no markup, one line, bounded. */
function toSearchText(md: string): string {
  return plainText(md.replace(/```[\s\S]*?```/g, (block) => block.replace(/```\w*/g, '')).replace(/^\s*\|?[-:| ]+\|\s*$/gm, ''))
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 4000);
}

/** A link of a page as the site serves it: another page's URL, an outside link as it is, or null for a file of the repository not served. */
function siteHref(from: string, href: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//') || href.startsWith('#')) return href;
  const [path, anchor] = href.split('#', 2);
  const target = normalize(join(dirname(from), decodeURIComponent(path))).replace(/\\/g, '/');
  const url = urls.get(target) ?? urls.get(`${target.replace(/\/$/, '')}/README.md`);
  if (!url) return null;
  return anchor ? `${url}#${anchor}` : url;
}

/**
 * The site's navigation, by audience: the sections of the map (docs/README.md), each with the pages its
 * lists link to, in the map's order. A page the map does not link to (the README, say) is listed under
 * "More", so every page is reachable from every other.
 */
interface NavSection {
  title: string;
  pages: string[];
}
function navSections(): NavSection[] {
  const found: NavSection[] = [];
  const firstLink = (tokens: Token[]): string | null => {
    for (const t of tokens) {
      if (t.type === 'link') return (t as Tokens.Link).href;
      const inner = (t as { tokens?: Token[] }).tokens;
      const href = inner ? firstLink(inner) : null;
      if (href) return href;
    }
    return null;
  };
  for (const t of Lexer.lex(sources.get('docs/README.md') ?? '')) {
    if (t.type === 'heading' && (t as Tokens.Heading).depth === 2) found.push({ title: plainText((t as Tokens.Heading).text), pages: [] });
    else if (t.type === 'list' && found.length) {
      const section = found.at(-1)!;
      for (const item of (t as Tokens.List).items) {
        const href = firstLink(item.tokens);
        if (!href || /^[a-z][a-z0-9+.-]*:/i.test(href)) continue;
        const target = normalize(join('docs', decodeURIComponent(href.split('#')[0]))).replace(/\\/g, '/');
        if (urls.has(target) && !section.pages.includes(target)) section.pages.push(target);
      }
    }
  }
  const sections = found.filter((s) => s.pages.length);
  const listed = new Set(sections.flatMap((s) => s.pages));
  const more = pages.filter((p) => p !== 'docs/README.md' && !listed.has(p));
  return more.length ? [...sections, { title: 'More', pages: more }] : sections;
}
const NAV = navSections();

/** The side navigation: the map first, then a section per audience, open where the current page is. */
function nav(current: string): string {
  const item = (p: string, label = p === 'README.md' ? 'The README' : titles.get(p)!) =>
    `<li><a href="${urls.get(p)}"${p === current ? ' aria-current="page"' : ''}>${esc(label)}</a></li>`;
  const sections = NAV.map(
    (s) => `<details${s.pages.includes(current) ? ' open' : ''}><summary>${esc(s.title)}</summary><ul>${s.pages.map((p) => item(p)).join('')}</ul></details>`,
  );
  return [`<ul>${item('docs/README.md', 'Documentation map')}</ul>`, ...sections].join('\n');
}

rmSync(OUT, { recursive: true, force: true });
mkdirSync(join(OUT, 'assets'), { recursive: true });
mkdirSync(join(OUT, 'pages'), { recursive: true });

const css = readFileSync(join(ROOT, 'scripts', 'docs', 'site.css'));
const js = readFileSync(join(ROOT, 'scripts', 'docs', 'site.js'));
const rendered = pages.map((p) => ({ path: p, ...render(p, sources.get(p)!) }));
const search = JSON.stringify(rendered.flatMap((r) => r.sections));
const assets = { css: hashed('docs', 'css', css), js: hashed('docs', 'js', js), search: hashed('search', 'json', search) };
writeFileSync(join(OUT, 'assets', assets.css), css);
writeFileSync(join(OUT, 'assets', assets.js), js);
writeFileSync(join(OUT, 'assets', assets.search), search);

const site: { pages: { url: string; file: string; title: string; source: string }[] } = { pages: [] };
for (const r of rendered) {
  const url = urls.get(r.path)!;
  const file = `${url === '/docs' ? 'index' : url.slice('/docs/'.length).replace(/\//g, '--')}.html`;
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(titles.get(r.path)!)} · Agent Workspace Service docs</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/docs/assets/${assets.css}">
<script type="module" src="/docs/assets/${assets.js}"></script>
</head>
<body>
<header class="top">
<a class="brand" href="/docs">Agent Workspace Service · docs</a>
<form class="search" role="search" action="/docs" data-index="/docs/assets/${assets.search}"><input type="search" name="q" placeholder="Search the docs" aria-label="Search the docs" autocomplete="off"></form>
<nav class="links"><a href="/docs/api">API explorer</a><a href="/">Dashboard</a></nav>
</header>
<div class="layout">
<nav class="side" aria-label="Pages">
${nav(r.path)}
</nav>
<main>
<section class="results" aria-live="polite" hidden></section>
<article class="page">
${r.html}</article>
<footer>Source: <code>${esc(r.path)}</code></footer>
</main>
</div>
</body>
</html>
`;
  writeFileSync(join(OUT, 'pages', file), html);
  site.pages.push({ url, file, title: titles.get(r.path)!, source: r.path });
}
writeFileSync(join(OUT, 'site.json'), JSON.stringify(site, null, 2));
console.log(`docs: ${site.pages.length} pages at /docs (${site.pages.map((p) => p.url).join(', ')}), search index ${(search.length / 1024).toFixed(0)} KB`);
