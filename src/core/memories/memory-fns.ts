/**
 * The pure rules of memories: kinds and visibilities, input limits, what counts as widening, what reads
 * like instructions to a model, and how many memories fit a turn's token budget. No database, no I/O.
 */

export const MEMORY_KINDS = ['fact', 'preference', 'event', 'skill-note'] as const;
export type MemoryKind = (typeof MEMORY_KINDS)[number];

export const MEMORY_VISIBILITIES = ['private', 'team', 'org'] as const;
export type MemoryVisibility = (typeof MEMORY_VISIBILITIES)[number];

export type MemoryStatus = 'active' | 'quarantined';
export type MemorySource = 'api' | 'agent';

/** A memory is a short note, not a document: longer text belongs in the workspace. */
export const MEMORY_CONTENT_MAX = 8000;
/** Search text: a query, not a memory. */
export const MEMORY_QUERY_MAX = 1000;
export const MEMORY_LIMIT_DEFAULT = 20;
export const MEMORY_LIMIT_MAX = 100;
/** Reciprocal rank fusion constant (Cormack et al.): dampens the weight of the very top ranks. */
export const RRF_K = 60;
/** Rough size of a token for budgeting injected text (English prose averages ~4 characters). */
const CHARS_PER_TOKEN = 4;

export const isMemoryKind = (v: unknown): v is MemoryKind => typeof v === 'string' && (MEMORY_KINDS as readonly string[]).includes(v);
export const isMemoryVisibility = (v: unknown): v is MemoryVisibility => typeof v === 'string' && (MEMORY_VISIBILITIES as readonly string[]).includes(v);

const RANK: Record<MemoryVisibility, number> = { private: 0, team: 1, org: 2 };

/** True when `to` shows the memory to more people than `from` (private < team < org): needs memory.share. */
export function isWidening(from: MemoryVisibility, to: MemoryVisibility): boolean {
  return RANK[to] > RANK[from];
}

/**
 * How many candidates each arm of a search fetches before fusion: enough that fusing two ranked lists
 * still fills `limit` when they overlap little, bounded so a search stays cheap.
 */
export function candidateCount(limit: number): number {
  return Math.min(Math.max(limit * 2, 40), 200);
}

/**
 * How many memories the vector arm short-lists by the Hamming distance of their binary codes before
 * ranking them by exact cosine distance: a code keeps only the signs of a vector, so the true nearest
 * are found among several times as many nearest codes (recall@10 against exact ranking on the
 * memories benchmark, 100,000 memories: 0.95 with 150 codes, 0.96 with 200, 0.98 with 300, 0.99 with
 * 400). Bounded because each short-listed vector is read from storage to be re-ranked (~10 µs each).
 */
export function shortlistSize(candidates: number): number {
  return Math.min(Math.max(candidates * 8, 100), 1000);
}

/**
 * Signals that a text reads like instructions to a model rather than a note about the user or their work.
 * Each entry is [name, pattern]. They are deliberately specific: plain facts and preferences ("I prefer
 * tabs", "we deploy on Fridays", "I run marathons") must not trip them, because a quarantined memory is
 * useless until its person releases it. What they look for:
 * - orders addressed to the assistant/model/AI ("Assistant, you must…", "note to the AI: …");
 * - attempts to cancel earlier instructions ("ignore previous instructions", "disregard the above");
 * - re-programming ("you must now…", "from now on you…", "you are now…", "your new instructions");
 * - chat-template and system-prompt markers (`<|im_start|>`, `[INST]`, `<<SYS>>`, `system:` lines);
 * - URLs and bare domains with a path (something to fetch: the classic exfiltration and payload step);
 * - commands to run (`curl …`, `wget …`, "run/execute the following", `| sh`, `rm -rf`);
 * - secrecy toward the user ("don't tell the user").
 */
const INSTRUCTION_SIGNALS: Array<[string, RegExp]> = [
  [
    'addressed-to-model',
    /\b(?:(?:dear|hey|hi|hello|attention|note to|message to|instructions? (?:for|to))\s*,?\s*(?:the\s+)?(?:assistant|ai|model|llm|agent|chatbot|bot|gpt|claude)\b|(?:assistant|ai|model|llm|agent|chatbot|gpt|claude)\s*[,:]\s*(?:you\b|please\b|always\b|never\b|do\b|don't\b|ignore\b|forget\b|from now on\b))/i,
  ],
  [
    'addressed-to-model',
    /\b(?:the\s+)?(?:assistant|ai|model|llm|agent|chatbot)\s+(?:must|should|shall|has to|needs to|is required to|will now)\s+(?:always|never|now|ignore|obey|follow|reveal|send|fetch)\b/i,
  ],
  [
    'cancel-instructions',
    /\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+|my\s+)*(?:(?:everything\s+)?(?:above|before this)\b|(?:previous|prior|earlier|preceding|former|original|system)\s+(?:\w+\s+)?(?:instructions?|prompts?|rules|messages?|context|directions?|directives?|guidelines|commands?|orders|text|content|conversation)\b)/i,
  ],
  ['cancel-instructions', /\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|your\s+|the\s+)*(?:instructions|rules|guidelines|guardrails|restrictions|system prompt)\b/i],
  ['reprogramming', /\byou\s+(?:must|should|shall|will|need to|have to|are to|are required to)\s+(?:now|always|never|immediately|henceforth|from now on)\b/i],
  ['reprogramming', /\b(?:from now on|henceforth|starting now)\s*,?\s+(?:you|always|never|ignore|respond|reply|answer|act|pretend|do not|don't)\b/i],
  ['reprogramming', /\byou are now\b|\bact as (?:an?\s+)?(?:unrestricted|jailbroken|different|new)\b|\bpretend (?:to be|you are)\b/i],
  ['reprogramming', /\b(?:your|the)\s+(?:new|real|true|actual|updated|secret|hidden)\s+(?:instructions|task|role|purpose|goal|orders|directive|system prompt)\b|\bnew instructions\s*:/i],
  ['prompt-markers', /<\|?\s*(?:im_start|im_end|system|endoftext|eot_id|start_header_id)\s*\|?>|<\/?system>|\[\/?INST\]|<<\/?SYS>>|\[system\]|###\s*(?:system|instruction)s?\b|\bsystem prompt\b|\bdeveloper message\b|\bjailbreak\b|\bDAN mode\b/i],
  // A forged turn of the conversation ("System: you …"); a plain "System: Ubuntu 24.04" is a fact.
  ['prompt-markers', /(?:^|\n)\s*(?:#+\s*)?(?:system|assistant|developer)\s*:\s*(?:you\b|ignore\b|always\b|never\b|from now on\b|do not\b|don't\b|new instructions\b)/i],
  ['url', /\b(?:https?|ftp|sftp|file|ws|wss):\/\/\S+/i],
  ['url', /\bwww\.[a-z0-9-]+\.[a-z]{2,}\S*/i],
  // A bare domain followed by a path ("evil.example/payload"): what gets fetched. A plain domain
  // (an email address, "example.com") is not enough, nor a file name ("notes.md").
  ['url', /\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,8}(?!(?:js|ts|jsx|tsx|mjs|cjs|md|py|rb|rs|java|kt|json|ya?ml|toml|txt|html?|css|scss|lock|cfg|ini|xml|csv|log|sql|vue|svelte)\b)[a-z]{2,24}(?::\d{1,5})?\/[^\s/]\S*/i],
  // Flags (at most 8, each one run of non-space) then something fetchable. Written so that no text can
  // make the pattern backtrack for long: these run on whatever text the agent saves.
  ['command', /\b(?:curl|wget|invoke-webrequest|iwr)\s+(?:-\S+\s+){0,8}['"]?(?:https?:|ftp:|\$|\/|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b)/i],
  ['command', /(?:^|[.!?;:\n]\s*)(?:please\s+|now\s+|then\s+)?(?:run|execute|exec|eval)\s+(?:`|\$\(|sudo\b|rm\s|bash\b|sh\s|zsh\b|python\d?\s|node\s|powershell\b|pwsh\b|curl\b|wget\b|chmod\b|\.\/)/i],
  ['command', /\b(?:run|execute|exec|eval)\s+(?:the\s+following|this|these|that)\s+(?:command|commands|script|code|shell|payload|snippet)\b|\b(?:run|execute)\s+the\s+following\b/i],
  ['command', /\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b|\brm\s+-[a-z]*r[a-z]*f|\bbase64\s+(?:-d|--decode)\b|\bnc\s+-e\b|\bchmod\s+\+x\b/i],
  ['secrecy', /\b(?:do not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|reveal(?:ing)?|let(?:ting)?|alert(?:ing)?|notify(?:ing)?)\s+(?:this\s+to\s+)?(?:the\s+)?(?:user|human|operator|anyone)\b|\bexfiltrat\w*/i],
];

/**
 * Characters a reader does not see but a model may: format characters (Unicode category Cf: zero-width
 * space and joiners, bidirectional controls, soft hyphen, word joiner, BOM, the invisible tag characters
 * U+E0000-E007F) and every other default-ignorable code point (variation selectors, which can carry a
 * hidden payload; the combining grapheme joiner; Hangul fillers). They split a word so that no pattern
 * matches it while a model still reads it whole ("Ig\u200bnore").
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;
/** Control characters other than the line feed and tab (line breaks are made line feeds first). */
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
/** Every spelling of a line break: CRLF, CR, vertical tab, form feed, NEL, line and paragraph separators. */
const LINE_BREAKS = /\r\n?|[\v\f\u0085\u2028\u2029]/g;

/**
 * THE normalisation of a memory's text, applied once to everything written (API and agent) and again to
 * what is injected, so what is screened is exactly what a model reads: line breaks made `\n`; invisible
 * and control characters removed; Unicode NFKC (full-width, mathematical and other compatibility letters
 * become the plain ones: "ｉｇｎｏｒｅ" and "𝐢𝐠𝐧𝐨𝐫𝐞" are "ignore"); removed again (NFKC could put back what
 * the first pass removed from around a mark); runs of white space collapsed, to one line break when they
 * hold one, else to one space; trimmed. Idempotent. What it does not do: confusable letters of other
 * scripts (a Cyrillic "о" in "ignоre") stay as they are, like any other text in those scripts.
 */
export function normaliseMemoryText(text: string): string {
  const visible = (s: string) => s.replace(LINE_BREAKS, '\n').replace(INVISIBLE, '').replace(CONTROLS, '');
  return visible(visible(text).normalize('NFKC'))
    .replace(/[^\S\n]*\n\s*/g, '\n')
    .replace(/[^\S\n]+/g, ' ')
    .trim();
}

/**
 * The names of the signals a text trips (empty: it reads like a note, not like instructions). A memory the
 * agent saves that trips any is saved `quarantined` and never injected into a turn until their person
 * releases it: text the agent read somewhere (a web page, a file, a chat) can try to plant orders that a
 * later session would obey.
 */
export function instructionSignals(content: string): string[] {
  const found = new Set<string>();
  for (const [name, re] of INSTRUCTION_SIGNALS) if (re.test(content)) found.add(name);
  return [...found];
}

/** The signals of a text as a model would read it: normalised first, whatever was stored. */
export function screenMemoryText(content: string): string[] {
  return instructionSignals(normaliseMemoryText(content));
}

/**
 * What keeps an ACTIVE memory from reaching a model, checked again at every recall (a turn's injection,
 * the agent's search): the signals of its normalised text, unless a person vouched for it for their own
 * agent, by writing it themselves (the API) or by releasing it. Another person's memory is screened
 * whatever its source: its author's word never speaks for the reader. Rows written before texts were
 * normalised (raw, with the zero-width characters that hid them from the screening) are caught here.
 */
export function recallBlockers(m: { content: string; source: MemorySource; released: boolean }, own: boolean): string[] {
  if (own && (m.source === 'api' || m.released)) return [];
  return screenMemoryText(m.content);
}

/** The per-user limits on writing memories (AGENTWS_MEMORY_WRITES_PER_MINUTE, AGENTWS_MEMORY_QUOTA). */
export interface MemoryWriteLimits {
  writesPerMinute: number;
  quota: number;
}

export type WriteRefusal =
  | { reason: 'rate'; limit: number; retryAfterSeconds: number }
  | { reason: 'quota'; memories: number; quota: number };

/**
 * Whether one more memory may be written: `stored` is how many the user keeps now (every source and
 * status), `recent` how many they wrote through the API within the last minute and `oldestAgeMs` the age
 * of the oldest of those. At the rate limit the caller may retry when that oldest write leaves the window
 * (at least 1 s from now). The rate is checked first: a refusal for the rate says when to come back,
 * one for the quota needs the user to delete something.
 */
export function writeRefusal(state: { stored: number; recent?: number; oldestAgeMs?: number | null }, limits: MemoryWriteLimits): WriteRefusal | null {
  if (state.recent !== undefined && state.recent >= limits.writesPerMinute) {
    const age = Math.max(0, Math.min(60_000, state.oldestAgeMs ?? 0));
    return { reason: 'rate', limit: limits.writesPerMinute, retryAfterSeconds: Math.max(1, Math.ceil((60_000 - age) / 1000)) };
  }
  if (state.stored >= limits.quota) return { reason: 'quota', memories: state.stored, quota: limits.quota };
  return null;
}

export interface Budgeted {
  content: string;
}

/**
 * Keeps memories, in rank order, while their text fits `maxTokens` (≈ CHARS_PER_TOKEN characters each,
 * plus a small allowance per item for the block's framing). An item that does not fit is skipped, so a
 * smaller one further down may still come in; when even the first does not fit, it comes in cut to the
 * budget (marked `truncated`), so a turn never loses its most relevant memory to one long neighbour.
 */
export function fitToBudget<T extends Budgeted>(items: T[], options: { limit: number; maxTokens: number }): Array<T & { truncated: boolean }> {
  const overhead = 12; // the kind label and delimiters each item gets in the injected block
  let left = Math.max(0, options.maxTokens) * CHARS_PER_TOKEN;
  const out: Array<T & { truncated: boolean }> = [];
  for (const item of items) {
    if (out.length >= options.limit) break;
    const cost = item.content.length + overhead;
    if (cost <= left) {
      out.push({ ...item, truncated: false });
      left -= cost;
    } else if (out.length === 0 && left > overhead + 1) {
      out.push({ ...item, content: item.content.slice(0, left - overhead - 1).trimEnd() + '…', truncated: true });
      left = 0;
    }
  }
  return out;
}
