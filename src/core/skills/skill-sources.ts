/**
 * What the skill writer is given of the work a skill is learnt from, and how its draft is checked for
 * copying that work. Pure: no I/O.
 *
 * A skill reaches every agent of the tenant, and its sources are different people's requests and answers.
 * So the writer never sees a raw request or answer: values (numbers, quoted text, code, paths, addresses,
 * identifiers, names) become placeholders, and of the words that remain only those that requests (or
 * answers) of at least two different people share are kept. A word only one person wrote (a codename, a
 * client, a figure, an instruction aimed at the writer) never reaches the model, whatever the other
 * sources say. The draft is then compared with the raw texts: one that repeats a person's own phrasing is
 * refused.
 */

export interface SkillSource {
  /** `T1`, `T2`, ...: how the writer cites it. */
  label: string;
  userId: string;
  request: string;
  answer: string;
  tools: string[];
}

export interface AbstractedSource {
  label: string;
  request: string;
  answer: string;
  tools: string[];
}

/** Stands for words left out (consecutive ones collapse into one). */
export const OMITTED = '…';

/** Word shingles compared between a draft and a source's raw text. */
const COPY_SHINGLE_WORDS = 4;
/** A draft holding this share (or more) of the shingles only one person's text has copies that text. */
export const COPY_OVERLAP_MAX = 0.3;
/** ... or this many of them, whatever the share (a long answer copied in part). */
export const COPY_SHINGLES_MAX = 10;

/** Acronyms of the trade that are words, not names (kept as words; any other all-capitals word is a name). */
const ACRONYMS = new Set(
  'api apis cli ui ux ci cd pr prs url urls http https json yaml yml sql csv tsv readme todo fixme sdk css html js ts pdf db id ids io os ssh tls dns ssl jwt xml md orm cpu gpu ram qa uat'.split(' '),
);
/** Abbreviations that look like file names. */
const ABBREVIATIONS = new Set(['e.g', 'i.e', 'etc', 'vs', 'cf', 'a.m', 'p.m']);

/** NFKC; format, zero-width and bidi control characters removed; whitespace collapsed. */
export function normaliseText(text: string): string {
  return text
    .normalize('NFKC')
    .replace(/\p{Cf}/gu, '')
    .replace(/[^\S\n]+/g, ' ')
    .trim();
}

/**
 * A text as words and placeholders: `<code>`, `<text>` (anything quoted), `<url>`, `<email>`, `<path>`
 * (paths and file names), `<number>`, `<id>` (words with digits, snake_case, camelCase, hex), `<name>`
 * (capitalised words inside a sentence, all-capitals words). Words are lower-cased; punctuation dropped.
 */
export function valueTokens(text: string): string[] {
  let t = normaliseText(text)
    .replace(/```[\s\S]*?(?:```|$)/g, ' <code> ')
    .replace(/`[^`\n]*`/g, ' <code> ')
    .replace(/"[^"\n]{0,500}"|“[^”\n]{0,500}”|„[^“”\n]{0,500}[“”]|«[^»\n]{0,500}»|‘[^’\n]{0,500}’/g, ' <text> ')
    .replace(/(^|[\s([{])'[^'\n]{1,500}'(?=$|[\s.,;:!?)\]}])/g, '$1 <text> ')
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+|\bwww\.\S+/gi, ' <url> ')
    .replace(/\b[\w.%+-]+@[\w-]+(?:\.[\w-]+)+\b/g, ' <email> ');
  // A line break ends a sentence (a list item's first word is not a name).
  t = t.replace(/\n+/g, ' . ');
  const tokens: string[] = [];
  let sentenceStart = true;
  for (const chunk of t.split(/\s+/)) {
    if (!chunk) continue;
    if (/^<(?:code|text|url|email)>$/.test(chunk)) {
      tokens.push(chunk);
      sentenceStart = false;
      continue;
    }
    const core = chunk.replace(/^[^\p{L}\p{N}$€£¥+\-./\\~_]+/u, '').replace(/[.,;:!?)\]}"'’”]+$/u, '');
    const ends = /[.!?:;]["'’”)\]]*$/.test(chunk);
    if (!core || !/[\p{L}\p{N}]/u.test(core)) {
      if (ends || /^[.!?:;]+$/.test(chunk)) sentenceStart = true;
      continue;
    }
    tokens.push(classify(core, sentenceStart));
    sentenceStart = ends;
  }
  return tokens;
}

function classify(word: string, sentenceStart: boolean): string {
  const lower = word.toLowerCase();
  if (/^[-+]?[$€£¥]?\d[\d,.'_]*(?:%|[kmb]|bn|mm|x)?$/i.test(word) || /^\d[\d\-/:.]*\d$/.test(word)) return '<number>';
  if (/[/\\]/.test(word)) return '<path>';
  if (/^[\p{L}\p{N}_-]+\.[a-z0-9]{1,8}$/iu.test(word) && !ABBREVIATIONS.has(lower)) return '<path>';
  if (/\d/.test(word)) return '<id>';
  if (/_/.test(word) || /\p{Ll}\p{Lu}/u.test(word) || /^[0-9a-f]{12,}$/i.test(word)) return '<id>';
  const letters = word.replace(/[^\p{L}]/gu, '');
  if (letters.length >= 2 && letters === letters.toUpperCase() && letters !== letters.toLowerCase()) return ACRONYMS.has(lower) ? lower : '<name>';
  if (!sentenceStart && /^\p{Lu}/u.test(word)) return '<name>';
  return lower;
}

/**
 * Keeps of each text the tokens that texts of at least two different people hold (two different texts
 * when they are all one person's); everything else becomes OMITTED.
 */
function shared(texts: Array<{ userId: string; tokens: string[] }>): string[][] {
  const users = new Map<string, Set<string>>();
  const count = new Map<string, number>();
  for (const t of texts) {
    for (const token of new Set(t.tokens)) {
      if (!users.has(token)) users.set(token, new Set());
      users.get(token)!.add(t.userId);
      count.set(token, (count.get(token) ?? 0) + 1);
    }
  }
  const people = new Set(texts.map((t) => t.userId)).size;
  const quorum = Math.min(2, people);
  const kept = (token: string) => users.get(token)!.size >= quorum && count.get(token)! >= 2;
  return texts.map((t) => {
    const out: string[] = [];
    for (const token of t.tokens) {
      const next = kept(token) ? token : OMITTED;
      if (next === OMITTED && out.at(-1) === OMITTED) continue;
      out.push(next);
    }
    return out;
  });
}

const render = (tokens: string[], max: number) => {
  const s = tokens.join(' ').replace(/ ([…])/g, ' $1');
  return s.length > max ? `${s.slice(0, max)} ${OMITTED}` : s || OMITTED;
};

/**
 * The sources as the skill writer sees them: requests and answers reduced to what different people's
 * texts share, tool calls that different people's work shares (others OMITTED). Labels stay.
 */
export function abstractSources(sources: SkillSource[], options: { maxChars?: number } = {}): AbstractedSource[] {
  const max = options.maxChars ?? 800;
  const requests = shared(sources.map((s) => ({ userId: s.userId, tokens: valueTokens(s.request) })));
  const answers = shared(sources.map((s) => ({ userId: s.userId, tokens: valueTokens(s.answer) })));
  const tools = shared(sources.map((s) => ({ userId: s.userId, tokens: s.tools })));
  return sources.map((s, i) => ({ label: s.label, request: render(requests[i], max), answer: render(answers[i], max), tools: tools[i] }));
}

/** Lower-cased words of a text (letters and digits), for shingles. */
export function shingleWords(text: string): string[] {
  return normaliseText(text)
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
}

/** The text's runs of `n` words; a text of 3 to n-1 words is one run, itself (shorter: none). */
export function shingles(words: string[], n = COPY_SHINGLE_WORDS): Set<string> {
  if (words.length < n) return new Set(words.length >= 3 ? [words.join(' ')] : []);
  const out = new Set<string>();
  for (let i = 0; i + n <= words.length; i++) out.add(words.slice(i, i + n).join(' '));
  return out;
}

/**
 * How much of a text a draft repeats: of the text's own shingles, the share and count the draft holds.
 * Own: not `common` (another person's text has it too), and, when `distinctive` is given, holding one of
 * those words (words no other text has: a name, a figure); a generic phrase ("write the release notes")
 * is no one's own, however few texts have it.
 */
export function copyOverlap(draft: string, text: string, options: { common?: Set<string>; distinctive?: Set<string> } = {}): { share: number; copied: number; of: number } {
  const words = shingleWords(text);
  const { common, distinctive } = options;
  const own = [...shingles(words)].filter((s) => !common?.has(s) && (!distinctive || s.split(' ').some((w) => distinctive.has(w))));
  if (!own.length) return { share: 0, copied: 0, of: 0 };
  const d = shingleWords(draft);
  const sizes = new Set(own.map((s) => s.split(' ').length));
  const inDraft = new Set<string>();
  for (const n of sizes) for (let i = 0; i + n <= d.length; i++) inDraft.add(d.slice(i, i + n).join(' '));
  const copied = own.filter((s) => inDraft.has(s)).length;
  return { share: copied / own.length, copied, of: own.length };
}

/** Whether an overlap is a copy (COPY_OVERLAP_MAX of the text's own shingles, or COPY_SHINGLES_MAX of them). */
export const isCopy = (o: { share: number; copied: number }) => o.copied > 0 && (o.share >= COPY_OVERLAP_MAX || o.copied >= COPY_SHINGLES_MAX);

/**
 * The sources' requests and answers a draft copies (`T2's request`). Only a text's own phrasing counts:
 * runs of words that hold a word no other source has (a name, a figure, a client) and that no other
 * person's text has; phrasing several people use (`write release notes for`) is nobody's.
 */
export function copiedSources(draft: string, sources: SkillSource[]): string[] {
  const people = new Set(sources.map((s) => s.userId)).size;
  const sets = sources.map((s) => {
    const request = shingleWords(s.request);
    const answer = shingleWords(s.answer);
    return { s, words: new Set([...request, ...answer]), shingles: [...shingles(request), ...shingles(answer)] };
  });
  const found: string[] = [];
  for (const { s, words } of sets) {
    const common = new Set<string>();
    const elsewhere = new Set<string>();
    for (const o of sets) {
      if (o.s === s) continue;
      for (const w of o.words) elsewhere.add(w);
      if (people > 1 && o.s.userId === s.userId) continue;
      for (const x of o.shingles) common.add(x);
    }
    const distinctive = new Set([...words].filter((w) => !elsewhere.has(w)));
    for (const what of ['request', 'answer'] as const) if (isCopy(copyOverlap(draft, s[what], { common, distinctive }))) found.push(`${s.label}'s ${what}`);
  }
  return found;
}
