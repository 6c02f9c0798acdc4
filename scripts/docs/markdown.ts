// What the docs' link checker and the /docs site builder both need of a Markdown page: its headings'
// anchors, made by GitHub's rules (so a link that works on GitHub works at /docs and the other way round),
// and its links. Read with marked's lexer, so a link-like text in a code block is not taken for a link.
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Lexer, marked, type Token, type Tokens } from 'marked';

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", nbsp: ' ' };

/** The text a reader sees of inline Markdown: formatting, tags and entities gone. */
export function plainText(inline: string): string {
  const html = marked.parseInline(inline, { async: false }) as string;
  return html.replace(/<[^>]*>/g, '').replace(/&(#?\w+);/g, (m, e: string) => ENTITIES[e] ?? (e.startsWith('#') ? String.fromCodePoint(Number(e.slice(1))) : m));
}

/**
 * GitHub's anchor for a heading's text (the rules of github-slugger): lower case; every character that is
 * not a letter, mark, digit, connector (`_`), space or hyphen dropped; each space a hyphen.
 */
export function githubSlug(text: string): string {
  return text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Hands out a page's anchors in order, the second of a name as name-1, the third name-2 (as GitHub does). */
export function slugger(): (text: string) => string {
  const seen = new Map<string, number>();
  return (text) => {
    const base = githubSlug(text);
    let slug = base;
    let n = seen.get(base) ?? 0;
    while (seen.has(slug)) slug = `${base}-${++n}`;
    seen.set(base, n);
    seen.set(slug, 0);
    return slug;
  };
}

function walk(tokens: Token[], visit: (t: Token) => void): void {
  for (const t of tokens) {
    visit(t);
    const children = (t as { tokens?: Token[] }).tokens;
    if (children) walk(children, visit);
    if (t.type === 'list') for (const item of (t as Tokens.List).items) walk(item.tokens, visit);
    if (t.type === 'table') {
      const table = t as Tokens.Table;
      for (const c of table.header) walk(c.tokens, visit);
      for (const row of table.rows) for (const c of row) walk(c.tokens, visit);
    }
  }
}

/** Every anchor a page offers: its headings' slugs and any explicit `id="…"` or `name="…"` in its HTML. */
export function anchorsOf(md: string): Set<string> {
  const slug = slugger();
  const anchors = new Set<string>();
  walk(Lexer.lex(md), (t) => {
    if (t.type === 'heading') anchors.add(slug(plainText((t as Tokens.Heading).text)));
    if (t.type === 'html') for (const m of (t as Tokens.HTML).text.matchAll(/\b(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  });
  return anchors;
}

/** The targets of a page's links and images, as written. */
export function linksOf(md: string): string[] {
  const links: string[] = [];
  walk(Lexer.lex(md), (t) => {
    if (t.type === 'link' || t.type === 'image') links.push((t as Tokens.Link).href);
  });
  return links;
}

/** The docs' pages: README.md and every .md under docs/, as paths from the repository's root, sorted. */
export function docPages(root: string): string[] {
  const found: string[] = [];
  const visit = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) visit(join(dir, e.name));
      else if (e.name.endsWith('.md')) found.push(relative(root, join(dir, e.name)));
    }
  };
  visit(join(root, 'docs'));
  return ['README.md', ...found.sort()];
}

/**
 * Where a page is served: docs/README.md at /docs, docs/a/b.md at /docs/a/b, docs/a/README.md at /docs/a,
 * the README at /docs/readme. docs/api/README.md is the one exception: /docs/api is the interactive API
 * reference (Swagger UI), so the API's overview page is /docs/api/overview.
 */
export function pageUrl(path: string): string {
  if (path === 'README.md') return '/docs/readme';
  if (path === 'docs/api/README.md') return '/docs/api/overview';
  const rest = path.replace(/^docs\/?/, '').replace(/(^|\/)README\.md$/, '').replace(/\.md$/, '');
  return rest ? `/docs/${rest.replace(/\/$/, '')}` : '/docs';
}
