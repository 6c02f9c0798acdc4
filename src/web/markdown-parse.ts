// Markdown as the dashboard shows it (an agent's answers, a skill's SKILL.md): parsed into a small tree
// of plain objects, which markdown.tsx turns into elements. Pure and DOM-free, so the unit tests check it
// without a browser (test/unit/markdown-parse.test.ts). Nothing here ever becomes HTML: raw HTML in the
// text stays text, and a link is kept only when it is http(s).

export type Inline =
  | string
  | { t: 'code'; text: string }
  | { t: 'b' | 'i' | 's'; children: Inline[] }
  | { t: 'a'; href: string; children: Inline[] };

type Align = 'left' | 'center' | 'right' | null;

export type Block =
  | { t: 'h'; level: number; children: Inline[] }
  | { t: 'p'; children: Inline[] }
  /** `open`: the fence is not closed (yet: an answer still streaming). */
  | { t: 'code'; lang: string; text: string; open: boolean }
  | { t: 'list'; ordered: boolean; start: number; items: Block[][] }
  | { t: 'quote'; children: Block[] }
  | { t: 'table'; align: Align[]; head: Inline[][]; rows: Inline[][][] }
  | { t: 'hr' }
  | { t: 'front'; text: string };

/** A top-level block with the source lines it was read from: a renderer redraws only blocks whose source changed. */
export type SourcedBlock = Block & { src: string };

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const LIST = /^(\s*)([-*+]|\d{1,9}[.)])(\s+|$)/;
const QUOTE = /^ {0,3}>\s?/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
/** Most a nesting of lists and quotes goes (deeper text stays in the innermost). */
const MAX_DEPTH = 12;

const indentOf = (line: string) => /^\s*/.exec(line)![0].replace(/\t/g, '    ').length;
const blank = (line: string | undefined) => line === undefined || !line.trim();

/** Whether a line starts a block of its own (it ends a paragraph). */
function startsBlock(line: string, next: string | undefined): boolean {
  return FENCE.test(line) || HEADING.test(line) || HR.test(line) || LIST.test(line) || QUOTE.test(line) || (line.includes('|') && next !== undefined && TABLE_RULE.test(next) && next.includes('-'));
}

/** The blocks of a Markdown text. `frontMatter`: a leading YAML block (`---` ... `---`) is kept apart, as a skill's is. */
export function parseMarkdown(text: string, o: { frontMatter?: boolean } = {}): SourcedBlock[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let start = 0;
  const out: SourcedBlock[] = [];
  if (o.frontMatter && lines[0] === '---') {
    const end = lines.indexOf('---', 1);
    if (end > 0) {
      out.push({ t: 'front', text: lines.slice(1, end).join('\n'), src: lines.slice(0, end + 1).join('\n') });
      start = end + 1;
    }
  }
  out.push(...blocks(lines.slice(start), 0, true));
  return out;
}

function blocks(lines: string[], depth: number, sourced: true): SourcedBlock[];
function blocks(lines: string[], depth: number, sourced?: false): Block[];
function blocks(lines: string[], depth: number, sourced = false): Block[] {
  const out: Block[] = [];
  let i = 0;
  const push = (b: Block, from: number) => out.push(sourced ? ({ ...b, src: lines.slice(from, i).join('\n') } as SourcedBlock) : b);
  while (i < lines.length) {
    const line = lines[i];
    const from = i;
    if (blank(line)) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const body: string[] = [];
      const pad = indentOf(line);
      let open = true;
      for (i++; i < lines.length; i++) {
        if (new RegExp(`^ {0,3}${marker[0] === '`' ? '`' : '~'}{${marker.length},}\\s*$`).test(lines[i])) {
          open = false;
          i++;
          break;
        }
        body.push(pad ? lines[i].replace(new RegExp(`^ {0,${pad}}`), '') : lines[i]);
      }
      push({ t: 'code', lang: fence[2] ?? '', text: body.join('\n'), open }, from);
      continue;
    }
    const h = HEADING.exec(line);
    if (h) {
      i++;
      push({ t: 'h', level: h[1].length, children: inline(h[2] ?? '') }, from);
      continue;
    }
    if (HR.test(line)) {
      i++;
      push({ t: 'hr' }, from);
      continue;
    }
    if (QUOTE.test(line)) {
      const body: string[] = [];
      for (; i < lines.length && !blank(lines[i]) && (QUOTE.test(lines[i]) || !startsBlock(lines[i], lines[i + 1])); i++) body.push(lines[i].replace(QUOTE, ''));
      push(depth >= MAX_DEPTH ? { t: 'p', children: inline(body.join('\n')) } : { t: 'quote', children: blocks(body, depth + 1) }, from);
      continue;
    }
    if (LIST.test(line)) {
      const list = readList(lines, i, depth);
      i = list.next;
      push(list.block, from);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const head = cells(line);
      const align = cells(lines[i + 1]).map((c): Align => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : null));
      const rows: Inline[][][] = [];
      for (i += 2; i < lines.length && !blank(lines[i]) && lines[i].includes('|'); i++) {
        const row = cells(lines[i]);
        rows.push(head.map((_, k) => inline(row[k] ?? '')));
      }
      push({ t: 'table', align: head.map((_, k) => align[k] ?? null), head: head.map((c) => inline(c)), rows }, from);
      continue;
    }
    // A paragraph: up to a blank line or a line that starts another block; `===` / `---` under it makes it a heading.
    const para: string[] = [line.trim()];
    for (i++; i < lines.length && !blank(lines[i]); i++) {
      if (/^ {0,3}=+\s*$/.test(lines[i]) || /^ {0,3}-+\s*$/.test(lines[i])) break;
      if (startsBlock(lines[i], lines[i + 1])) break;
      para.push(lines[i].trim());
    }
    if (i < lines.length && (/^ {0,3}=+\s*$/.test(lines[i]) || (/^ {0,3}-+\s*$/.test(lines[i]) && !blank(lines[i])))) {
      const level = lines[i].trim().startsWith('=') ? 1 : 2;
      i++;
      push({ t: 'h', level, children: inline(para.join(' ')) }, from);
      continue;
    }
    push({ t: 'p', children: inline(para.join('\n')) }, from);
  }
  return out;
}

/** A list starting at `lines[start]`: its items (each a list of blocks: nested lists, paragraphs, code). */
function readList(lines: string[], start: number, depth: number): { block: Block; next: number } {
  const first = LIST.exec(lines[start])!;
  const indent = indentOf(first[1]);
  const ordered = /\d/.test(first[2]);
  const items: Block[][] = [];
  let i = start;
  while (i < lines.length) {
    const m = LIST.exec(lines[i]);
    if (!m || indentOf(m[1]) !== indent || /\d/.test(m[2]) !== ordered) break;
    const content = m[0].length;
    const body: string[] = [lines[i].slice(content)];
    for (i++; i < lines.length; i++) {
      const line = lines[i];
      if (blank(line)) {
        // A blank line inside an item only when what follows is indented under it.
        let j = i;
        while (j < lines.length && blank(lines[j])) j++;
        if (j < lines.length && indentOf(lines[j]) > indent && !(LIST.test(lines[j]) && indentOf(LIST.exec(lines[j])![1]) === indent)) {
          body.push('');
          continue;
        }
        break;
      }
      const lineIndent = indentOf(line);
      if (lineIndent > indent) {
        body.push(line.replace(/\t/g, '    ').slice(Math.min(lineIndent, Math.max(content, indent + 2))));
        continue;
      }
      // A line at the list's own indent: the next item, another block, or the item's text going on.
      if (LIST.test(line) || startsBlock(line, lines[i + 1]) || blank(body.at(-1))) break;
      body.push(line.trim());
    }
    items.push(depth >= MAX_DEPTH ? [{ t: 'p', children: inline(body.join('\n')) }] : blocks(body, depth + 1));
  }
  return { block: { t: 'list', ordered, start: ordered ? parseInt(first[2], 10) : 1, items }, next: i };
}

/** A table row's cells (outer pipes dropped; `\|` and pipes in `code` stay in the cell). */
function cells(line: string): string[] {
  const out: string[] = [];
  let cell = '';
  let inCode = false;
  const s = line.trim().replace(/^\|/, '');
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (c === '\\' && s[k + 1] === '|') {
      cell += '|';
      k++;
    } else if (c === '`') {
      inCode = !inCode;
      cell += c;
    } else if (c === '|' && !inCode) {
      out.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  if (cell.trim() || !s.endsWith('|')) out.push(cell.trim());
  return out;
}

const SAFE_URL = /^https?:\/\/[^\s<>"'`]+$/i;
const AUTOLINK = /https?:\/\/[^\s<>"'`]*[^\s<>"'`.,;:!?)\]]/gi;

/** Only an http(s) address is a link; anything else (javascript:, data:, a relative path) is none. */
export function safeHref(url: string): string | null {
  const u = url.trim().replace(/^<|>$/g, '');
  return SAFE_URL.test(u) ? u : null;
}

/** Inline Markdown: `code`, **bold**, *italic*, ~~strike~~, [links](https://...), bare https:// addresses. */
export function inline(text: string, depth = 0): Inline[] {
  const out: Inline[] = [];
  let plain = '';
  const flush = () => {
    if (!plain) return;
    let last = 0;
    for (const m of plain.matchAll(AUTOLINK)) {
      if (m.index! > last) out.push(plain.slice(last, m.index));
      out.push({ t: 'a', href: m[0], children: [m[0]] });
      last = m.index! + m[0].length;
    }
    if (last < plain.length) out.push(plain.slice(last));
    plain = '';
  };
  let k = 0;
  while (k < text.length) {
    const c = text[k];
    if (c === '\\' && k + 1 < text.length && /[!-/:-@[-`{-~]/.test(text[k + 1])) {
      plain += text[k + 1];
      k += 2;
      continue;
    }
    if (c === '`') {
      const run = /^`+/.exec(text.slice(k))![0];
      const end = text.indexOf(run, k + run.length);
      if (end > 0) {
        flush();
        const body = text.slice(k + run.length, end);
        out.push({ t: 'code', text: body.length > 2 && body.startsWith(' ') && body.endsWith(' ') ? body.slice(1, -1) : body });
        k = end + run.length;
        continue;
      }
      plain += run;
      k += run.length;
      continue;
    }
    if (depth < 8 && (c === '[' || (c === '!' && text[k + 1] === '['))) {
      const open = c === '!' ? k + 1 : k;
      const close = matching(text, open, '[', ']');
      if (close > 0 && text[close + 1] === '(') {
        const end = matching(text, close + 1, '(', ')');
        if (end > 0) {
          flush();
          const label = text.slice(open + 1, close);
          const href = safeHref(text.slice(close + 2, end).split(/\s+"/)[0]);
          const children = inline(label || (href ?? ''), depth + 1);
          if (href) out.push({ t: 'a', href, children });
          else out.push(...children);
          k = end + 1;
          continue;
        }
      }
    }
    if (depth < 8 && (c === '*' || c === '_' || c === '~')) {
      const run = c === '~' ? (text.startsWith('~~', k) ? '~~' : '') : text.startsWith(c + c, k) ? c + c : c;
      // `_` emphasis only at a word's edge (snake_case stays as it is); nothing opens before a space.
      const wordBefore = k > 0 && /[\p{L}\p{N}]/u.test(text[k - 1]);
      if (run && !(c === '_' && wordBefore) && text[k + run.length] && !/\s/.test(text[k + run.length])) {
        const end = closing(text, k + run.length, run);
        if (end > 0) {
          flush();
          out.push({ t: run === '~~' ? 's' : run.length === 2 ? 'b' : 'i', children: inline(text.slice(k + run.length, end), depth + 1) });
          k = end + run.length;
          continue;
        }
      }
      plain += run || c;
      k += (run || c).length;
      continue;
    }
    plain += c;
    k++;
  }
  flush();
  return out;
}

/** The index of the bracket closing the one at `at` (nesting counted, code spans skipped), or -1. */
function matching(text: string, at: number, open: string, close: string): number {
  let depth = 0;
  for (let k = at; k < text.length; k++) {
    const c = text[k];
    if (c === '\\') k++;
    else if (c === open) depth++;
    else if (c === close && --depth === 0) return k;
    else if (c === '\n' && text[k + 1] === '\n') return -1;
  }
  return -1;
}

/** Where an emphasis run closes (not after a space, not inside a code span), or -1. */
function closing(text: string, from: number, run: string): number {
  for (let k = from; k < text.length; k++) {
    const c = text[k];
    if (c === '\\') {
      k++;
      continue;
    }
    if (c === '`') {
      const r = /^`+/.exec(text.slice(k))![0];
      const end = text.indexOf(r, k + r.length);
      if (end > 0) k = end + r.length - 1;
      continue;
    }
    if (text.startsWith(run, k) && !/\s/.test(text[k - 1]) && k > from) {
      // `*a **b** c*`: a longer run of the same character is a nested one, not the close.
      if (run.length === 1 && text[k + 1] === run) {
        const inner = closing(text, k + 2, run + run);
        if (inner > 0) {
          k = inner + 1;
          continue;
        }
      }
      if (run === '_' && /[\p{L}\p{N}]/u.test(text[k + 1] ?? '')) continue;
      return k;
    }
  }
  return -1;
}
