/**
 * Syntax colour for code the dashboard shows (a chat's code blocks, a file, a diff line). A small
 * tokenizer rather than a highlighting library: it builds elements, never an HTML string, so whatever
 * the model or a file holds stays text under the strict CSP, and it adds ~2 KB to the bundle where a
 * library with its grammars adds hundreds. It colours what helps reading (comments, strings, numbers,
 * keywords), per line, so a diff or a file can be coloured line by line; a string or comment spanning
 * lines is coloured on its first line only.
 */

export type Family = 'c' | 'hash' | 'sql' | 'markup' | 'plain';

const KEYWORDS: Record<Exclude<Family, 'plain' | 'markup'>, Set<string>> = {
  c: new Set(
    'abstract as async await break case catch class const continue def default defer delete do else enum export extends false final finally fn for func function go if impl implements import in instanceof interface let match mod mut new nil null package private protected pub public readonly return self static struct super switch this throw throws trait true try type typeof undefined use var void where while yield'.split(' '),
  ),
  hash: new Set(
    'and as assert async await break case class continue def del do done elif else esac except False fi finally for from function global if import in is lambda local None nonlocal not or pass raise return then True try unless until while with yield echo export'.split(' '),
  ),
  sql: new Set(
    'select from where insert into update delete create table index alter drop join left right inner outer on group by order having limit offset values set and or not null primary key references default as distinct union all returning begin commit rollback with'.split(' '),
  ),
};

const BY_NAME: Record<string, Family> = {
  js: 'c', jsx: 'c', mjs: 'c', cjs: 'c', ts: 'c', tsx: 'c', mts: 'c', cts: 'c', javascript: 'c', typescript: 'c',
  java: 'c', kt: 'c', kotlin: 'c', c: 'c', h: 'c', cc: 'c', cpp: 'c', hpp: 'c', cs: 'c', csharp: 'c', go: 'c', rs: 'c', rust: 'c',
  swift: 'c', scala: 'c', php: 'c', json: 'c', jsonc: 'c', css: 'c', scss: 'c', dart: 'c', zig: 'c',
  py: 'hash', python: 'hash', rb: 'hash', ruby: 'hash', sh: 'hash', bash: 'hash', zsh: 'hash', shell: 'hash', console: 'hash',
  yml: 'hash', yaml: 'hash', toml: 'hash', ini: 'hash', conf: 'hash', dockerfile: 'hash', makefile: 'hash', r: 'hash', pl: 'hash', perl: 'hash',
  sql: 'sql', psql: 'sql',
  html: 'markup', htm: 'markup', xml: 'markup', svg: 'markup', vue: 'markup', svelte: 'markup',
};

/** The language family of a fence's info string or a file's name (by its extension, or a known name). */
export function languageOf(nameOrLang: string | undefined): Family {
  if (!nameOrLang) return 'plain';
  const base = nameOrLang.trim().toLowerCase().split(/[\s{]/)[0].split('/').pop() ?? '';
  if (BY_NAME[base]) return BY_NAME[base];
  const ext = base.includes('.') ? base.slice(base.lastIndexOf('.') + 1) : '';
  return BY_NAME[ext] ?? 'plain';
}

// One pass over a line: the first of these to match at a position wins.
const PATTERNS: Record<Exclude<Family, 'plain'>, RegExp> = {
  c: /(\/\/.*$|\/\*.*?(?:\*\/|$))|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|`(?:[^`\\]|\\.)*`?)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[\da-f]+\b)|([A-Za-z_$][\w$]*)/gi,
  hash: /(#.*$)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|(\b\d[\d_]*(?:\.\d+)?\b)|([A-Za-z_][\w]*)/g,
  sql: /(--.*$|\/\*.*?(?:\*\/|$))|('(?:[^']|'')*'?)|(\b\d+(?:\.\d+)?\b)|([A-Za-z_][\w]*)/g,
  markup: /(<!--.*?(?:-->|$))|("[^"]*"?|'[^']*'?)|()(<\/?[A-Za-z][\w:-]*|\/?>)/g,
};

/** One line's tokens: comments, strings, numbers and keywords with their class, the rest plain (null). */
export function tokenizeLine(line: string, family: Family): Array<{ cls: string | null; text: string }> {
  if (family === 'plain' || line.length > 2000) return [{ cls: null, text: line }];
  const re = new RegExp(PATTERNS[family].source, PATTERNS[family].flags);
  const out: Array<{ cls: string | null; text: string }> = [];
  let last = 0;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    if (m[0] === '') {
      re.lastIndex++;
      continue;
    }
    const cls = m[1] !== undefined ? 'tok-com' : m[2] !== undefined ? 'tok-str' : m[3] ? 'tok-num' : m[4] !== undefined ? wordClass(m[4], family) : null;
    if (!cls) continue;
    if (m.index > last) out.push({ cls: null, text: line.slice(last, m.index) });
    out.push({ cls, text: m[0] });
    last = m.index + m[0].length;
  }
  if (last < line.length) out.push({ cls: null, text: line.slice(last) });
  return out;
}

function wordClass(word: string, family: Family): string | null {
  if (family === 'markup') return 'tok-kw';
  if (family === 'sql') return KEYWORDS.sql.has(word.toLowerCase()) ? 'tok-kw' : null;
  if (family === 'c' || family === 'hash') return KEYWORDS[family].has(word) ? 'tok-kw' : null;
  return null;
}
