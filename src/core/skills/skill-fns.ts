/**
 * The pure rules of learned skills: the state table, what a valid SKILL.md is (Agent Skills format plus
 * our own checks: sections, size, no secrets, nothing of one workspace, no fetch-and-run), how a tool
 * call is abstracted so that similar work looks alike, and how similarity is measured. No I/O.
 */

export const SKILL_STATUSES = ['proposed', 'promoted', 'deprecated'] as const;
export type SkillStatus = (typeof SKILL_STATUSES)[number];

/**
 * One version's review: `proposed` (waiting for a reviewer), `promoted` (what agents load: at most one
 * version of a skill), `retired` (promoted once and replaced, or a draft a newer one replaced, or its skill
 * deprecated), `rejected` (a reviewer said no). The skill's own status says whether agents load it at all.
 */
export const VERSION_STATUSES = ['proposed', 'promoted', 'retired', 'rejected'] as const;
export type VersionStatus = (typeof VERSION_STATUSES)[number];

/**
 * A reviewer's act on one version: `move`, `same` (done already: nothing changes) or `refused` (409).
 * Only a version waiting for review is promoted or rejected; a deprecated skill's versions are final
 * (its name may come back as a new proposal of the learning loop).
 */
export function versionMove(skill: SkillStatus, version: VersionStatus, act: 'promote' | 'reject'): 'move' | 'same' | 'refused' {
  if ((act === 'promote' && version === 'promoted') || (act === 'reject' && version === 'rejected')) return 'same';
  if (skill === 'deprecated') return 'refused';
  return version === 'proposed' ? 'move' : 'refused';
}

/**
 * Whether a skill may move from one status to another: `move` (it changes), `same` (it is there
 * already: nothing changes, users expect the call to succeed), `refused` (409). A deprecated skill
 * stays deprecated: its name may return as a new version proposed by the learning loop.
 */
export function canMove(from: SkillStatus, to: SkillStatus): 'move' | 'same' | 'refused' {
  if (from === to) return 'same';
  if (from === 'proposed') return to === 'promoted' || to === 'deprecated' ? 'move' : 'refused';
  if (from === 'promoted') return to === 'deprecated' ? 'move' : 'refused';
  return 'refused';
}

/** Agent Skills: lower-case letters and digits in words joined by single hyphens, 1-64 characters. */
const SKILL_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SKILL_NAME_MAX = 64;
export const SKILL_DESCRIPTION_MAX = 1024;
export const SKILL_MAX_TOKENS = 5000;
/** A rough token count (English prose and code): what bounds a skill's size without a tokenizer. */
const CHARS_PER_TOKEN = 4;
export const REQUIRED_SECTIONS = ['When to use', 'Steps', 'Verify'] as const;

/** Similarity thresholds of detection: tool sequence (3-gram Jaccard) and task (cosine with an embedder, word Jaccard without). */
export const TOOL_GRAM_JACCARD = 0.5;
export const TASK_COSINE = 0.75;
export const TASK_JACCARD = 0.4;
/** Successful similar trajectories needed for a proposal, and the sessions they must come from. */
export const MIN_CLUSTER = 3;
export const MIN_SESSIONS = 2;
/**
 * The different people whose work a proposal needs (tenant setting `skills.minUsers`, 1 to
 * tenants/tenant-settings-fns.ts MIN_USERS_MAX): a skill
 * reaches everyone, so one person's work alone is not a pattern of the organisation, and a member cannot
 * make their own turns and one of a colleague's into a skill.
 */
export const MIN_USERS_DEFAULT = 2;
/** Two requests in a row this alike (word Jaccard) ask for the same thing: the second redoes the first. */
const REDO_JACCARD = 0.8;

export interface SkillDocument {
  name: string;
  description: string;
  /** The Markdown after the front matter. */
  body: string;
}

export type SkillReading = { ok: true; skill: SkillDocument } | { ok: false; errors: string[] };

/** One front-matter value: plain, quoted, or a folded/literal block (`>` / `|`) on the lines below. */
function frontMatterValue(lines: string[], key: string): string | null {
  const i = lines.findIndex((l) => new RegExp(`^${key}\\s*:`).test(l));
  if (i < 0) return null;
  let value = lines[i].slice(lines[i].indexOf(':') + 1).trim();
  if (/^[>|][-+]?$/.test(value)) {
    const block: string[] = [];
    for (const l of lines.slice(i + 1)) {
      if (!/^\s+\S/.test(l) && l.trim() !== '') break;
      block.push(l.trim());
    }
    value = block.join(' ').trim();
  }
  if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) {
    value = value.length >= 2 ? value.slice(1, -1) : '';
    value = value.replace(/''/g, "'").replace(/\\"/g, '"');
  }
  return value;
}

/**
 * Reads a SKILL.md out of a model's answer: the file itself, or the file wrapped in a ``` fence (models
 * do that), with YAML front matter holding `name` and `description`.
 */
export function parseSkillMd(text: string): SkillReading {
  let t = text.replace(/\r\n/g, '\n').trim();
  const fenced = /^```[a-z]*\n([\s\S]*?)\n```$/i.exec(t) ?? /```(?:markdown|md)?\n(---\n[\s\S]*?)\n```/i.exec(t);
  if (fenced) t = fenced[1].trim();
  const m = /^---\n([\s\S]*?)\n---\n?([\s\S]*)$/.exec(t);
  if (!m) return { ok: false, errors: ['the file must start with YAML front matter between "---" lines holding name and description'] };
  const lines = m[1].split('\n');
  const name = frontMatterValue(lines, 'name');
  const description = frontMatterValue(lines, 'description');
  const errors: string[] = [];
  if (!name) errors.push('front matter: name is missing');
  if (!description) errors.push('front matter: description is missing');
  if (errors.length) return { ok: false, errors };
  return { ok: true, skill: { name: name!, description: description!.replace(/\s+/g, ' '), body: m[2].trim() } };
}

/** The SKILL.md of a document (the description quoted so that any character is safe in YAML). */
export function renderSkillMd(doc: SkillDocument): string {
  return `---\nname: ${doc.name}\ndescription: ${JSON.stringify(doc.description)}\n---\n\n${doc.body.trim()}\n`;
}

// Secrets: the shapes of real credentials, and assignments of a value to something named like one.
const SECRETS: Array<[string, RegExp]> = [
  ['a private key', /-----BEGIN [A-Z ]*PRIVATE KEY-----/],
  ['an AWS access key', /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/],
  ['an API key', /\b(?:sk|pk|rk)-(?:[A-Za-z0-9_-]*-)?[A-Za-z0-9]{20,}\b/],
  ['a GitHub token', /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b/],
  ['a Slack token', /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/],
  ['a JSON Web Token', /\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/],
  ['a bearer token', /\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*/],
  ['a credential in a URL', /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]+:[^\s/@]+@/i],
  ['a secret value', /\b(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret)\b\s*[:=]\s*['"]?(?![<$({])[^\s'"<>]{8,}/i],
];

// Values of one workspace, one machine or one person: a skill is for every user of the tenant.
const INSTANCE: Array<[string, RegExp]> = [
  ['an absolute path of one machine or workspace', /(?:^|[\s`'"(=])\/(?:workspace|home|srv|tmp|root|var\/lib|Users|data)\/[^\s`'")]+/m],
  ['a Windows user path', /\b[A-Z]:\\Users\\/],
  ['an id of one instance', /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/i],
  ['an IP address', /\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b(?<!\b(?:0\.0\.0\.0|127\.0\.0\.1))/],
  ['an email address', /\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b/],
];

// Downloading code and running it: the one instruction a learned skill may never carry.
const FETCH_AND_RUN: RegExp[] = [
  /\b(?:curl|wget|fetch)\b[^\n|]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b/i,
  /\b(?:curl|wget)\b[^\n|]*\|\s*(?:sudo\s+)?(?:python\d?|node|perl|ruby|php)\b/i,
  /\b(?:ba|z)?sh\s+(?:-c\s+)?["']?\$\(\s*(?:curl|wget)\b/i,
  /\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b/i,
  /\b(?:iex|invoke-expression)\b[^\n]*\b(?:iwr|invoke-webrequest|downloadstring|irm|invoke-restmethod)\b/i,
  /\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n|]*\|\s*(?:iex|invoke-expression)\b/i,
  /\beval\s+["']?\$\(\s*(?:curl|wget)\b/i,
  /\b(?:npx|pnpx|bunx)\s+(?:-y\s+|--yes\s+)?https?:\/\//i,
  /\bpip3?\s+install\s+(?:[^\n]*\s)?(?:git\+)?https?:\/\//i,
];

// A credential written out in prose ("the password is hunter2-prod"): the value follows the word and a
// verb or sign, and looks like a secret (a digit or a symbol in it), not like a word or a placeholder.
const PROSE_CREDENTIAL =
  /\b(?:password|passphrase|passwd|pwd|pin|secret|token|api[\s_-]?key|access[\s_-]?key|private[\s_-]?key|credentials?|login)\b(?:\s+(?:for|of|to|on)\s+(?:the\s+)?[\w.-]+)?\s*(?:is|are|was|reads|equals|=|:|->)\s*[`'"“]?([^\s`'"”<>]{6,})/gi;
const looksSecret = (value: string) => {
  const v = value.replace(/[.,;:)\]]+$/, '');
  if (v.length < 6 || /^[${%(]/.test(v) || /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/.test(v)) return false;
  return /\d/.test(v) || /[!@#%^&*+=~?$]/.test(v);
};

// Workspace files that hold secrets, and ways of sending something somewhere: together on one line, a
// skill that ships the secrets out ("upload .env with webfetch to https://...").
const SENSITIVE_FILE =
  /(?:^|[\s`'"(=@:/])(?:\.env(?!\.(?:example|sample|template|dist|defaults)\b)(?:\.[\w-]+)?|\.npmrc|\.pypirc|\.netrc|\.pgpass|\.git-credentials|\.ssh|id_(?:rsa|dsa|ecdsa|ed25519)|\.aws\/credentials|\.kube\/config|kubeconfig|credentials\.json|secrets?\.(?:json|ya?ml|toml|env)|[\w.-]+\.(?:pem|key|p12|pfx|jks|keystore))(?=$|[\s`'",;:)\]/.])/im;
const SENDS =
  /\b(?:upload(?:s|ed|ing)?|send(?:s|ing)?|sent|exfiltrat\w*|transmit\w*|paste[sd]?|leak\w*|webfetch|scp|rsync|sftp|ftp|nc|ncat|netcat|sendmail|mailx?)\b|\bcurl\b[^\n]*(?:\s-[a-zA-Z]*[dFT]\b|--data\b|--data-\w+|--form\b|--upload-file\b|-X\s*(?:POST|PUT|PATCH))|\bwget\b[^\n]*--post-(?:file|data)/i;

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Files a skill downloads (curl -o / -O / > file, wget) and then runs (bash f, sh f, ./f, python f, source f, chmod +x f). */
function downloadsThenRuns(text: string): boolean {
  const files = new Set<string>();
  const base = (ref: string) => ref.replace(/[?#].*$/, '').split('/').filter(Boolean).pop() ?? '';
  for (const m of text.matchAll(/\b(curl|wget)\b([^\n|;&]*)/g)) {
    const args = m[2];
    const url = /\b(?:https?|ftp):\/\/\S+/.exec(args)?.[0];
    const out = /(?:^|\s)(?:-[a-zA-Z]*[oO]|--output(?:-document)?)(?:\s*=\s*|\s+)([^\s'"`]+)/.exec(args)?.[1] ?? />\s*([^\s'"`]+)/.exec(args)?.[1];
    const file = out && !/^(?:https?|ftp):/.test(out) ? base(out) : m[1] === 'wget' || /(?:^|\s)-[a-zA-Z]*O(?:\s|$)/.test(args) ? (url ? base(url) : '') : '';
    if (file && file !== '-') files.add(file);
  }
  for (const f of files) {
    const name = escapeRe(f);
    const run = new RegExp(
      `(?:\\b(?:ba|z|da|k|fi)?sh|\\bsource|\\bpython\\d?(?:\\.\\d+)?|\\bnode|\\bperl|\\bruby|\\bphp|\\bpwsh|\\bpowershell|(?:^|[;&|(])\\s*\\.)\\s+(?:-\\S+\\s+)*(?:\\S*\\/)?${name}(?![\\w.-])|\\.\\/${name}(?![\\w.-])|\\bchmod\\s+\\S*x\\S*\\s+(?:\\S*\\/)?${name}(?![\\w.-])`,
      'm',
    );
    if (run.test(text)) return true;
  }
  return false;
}

/** Headings of the body (level 1-3), as written. */
const headings = (body: string) => [...body.matchAll(/^#{1,3}\s+(.+?)\s*#*\s*$/gm)].map((m) => m[1].trim());

/**
 * What is wrong with a skill (empty: it may be stored): the hard problems, for which the writer is asked
 * again. `sources` are the labels of the trajectories it was written from: it must cite at least one of
 * them. What a reviewer may still accept is not here but in skillFlags.
 */
export function skillProblems(doc: SkillDocument, options: { sources: string[] }): string[] {
  const problems: string[] = [];
  if (doc.name.length < 1 || doc.name.length > SKILL_NAME_MAX) problems.push(`name: 1 to ${SKILL_NAME_MAX} characters`);
  if (!SKILL_NAME.test(doc.name)) problems.push('name: lower-case letters and digits in words joined by single "-" (for example run-unit-tests)');
  if (!doc.description.trim()) problems.push('description: must not be empty');
  if (doc.description.length > SKILL_DESCRIPTION_MAX) problems.push(`description: at most ${SKILL_DESCRIPTION_MAX} characters (it has ${doc.description.length})`);
  const present = headings(doc.body).map((h) => h.toLowerCase());
  for (const section of REQUIRED_SECTIONS) {
    if (!present.some((h) => h === section.toLowerCase() || h.startsWith(`${section.toLowerCase()} `))) problems.push(`a "## ${section}" section is missing`);
  }
  const tokens = Math.ceil(renderSkillMd(doc).length / CHARS_PER_TOKEN);
  if (tokens > SKILL_MAX_TOKENS) problems.push(`too long: about ${tokens} tokens, at most ${SKILL_MAX_TOKENS}`);
  if (options.sources.length && !options.sources.some((label) => new RegExp(`\\b${label}\\b`).test(doc.body))) {
    problems.push(`it must cite the records it was learnt from (${options.sources.join(', ')})`);
  }
  const text = `${doc.description}\n${doc.body}`;
  for (const [what, re] of SECRETS) if (re.test(text)) problems.push(`it contains ${what}: skills must carry no secrets`);
  if ([...text.matchAll(PROSE_CREDENTIAL)].some((m) => looksSecret(m[1]))) problems.push('it contains a credential written out in prose: skills must carry no secrets');
  for (const [what, re] of INSTANCE) if (re.test(text)) problems.push(`it contains ${what}: use relative paths and placeholders, a skill is for every workspace`);
  if (FETCH_AND_RUN.some((re) => re.test(text)) || downloadsThenRuns(text)) problems.push('it downloads code and runs it: skills must never fetch and run remote code');
  if (text.split('\n').some((line) => SENSITIVE_FILE.test(line) && SENDS.test(line))) {
    problems.push('it sends a workspace file that holds secrets (.env, keys, credentials) somewhere: a skill must never move secrets out of the workspace, do not mention it at all');
  }
  return problems;
}

/** A line of a skill a reviewer should read before promoting it, and why. */
export interface SkillFlag {
  /** 1-based, in the SKILL.md as stored (front matter included). */
  line: number;
  text: string;
  reason: string;
}

// Installing software or running it from a registry: fine for a reviewer who knows the package, never
// unseen (a package name is as good as a URL to an attacker).
const INSTALLS: Array<[string, RegExp]> = [
  ['it runs a package fetched from a registry (npx and the like)', /\b(?:npx|pnpx|bunx)\b|\b(?:npm|pnpm)\s+exec\b|\b(?:pnpm|yarn)\s+dlx\b/],
  ['it runs a Python package fetched from a registry (uvx, pipx)', /\buvx\b|\buv\s+tool\s+(?:run|install)\b|\bpipx\s+(?:run|install)\b/],
  ['it installs a Python package', /\bpip\d?(?:\.\d+)?\s+install\b|\bpython\d?(?:\.\d+)?\s+-m\s+pip\s+install\b|\buv\s+(?:pip\s+install|add)\b|\bpoetry\s+add\b/],
  ['it installs an npm package', /\b(?:npm|pnpm|yarn|bun)\s+(?:(?:i|install|add)\b(?=[^\n&|;`]*?(?:\s-g\b|\s--global\b|\s(?!-)[^\s&|;`)]))|global\s+add\b)/],
  ['it installs a package', /\b(?:gem|cargo|go)\s+install\b|\bgo\s+get\b|\bbrew\s+install\b|\b(?:apt|apt-get|dnf|yum|zypper|apk)\s+(?:-\S+\s+)*(?:install|add)\b/],
  ['it runs a container image', /\b(?:docker|podman|nerdctl)\s+(?:run|pull|create)\b|\bdocker[\s-]compose\s+(?:up|run|pull)\b/],
  ['it pipes text into a shell or an interpreter', /\|\s*(?:sudo\s+)?(?:(?:ba|z|da|k|fi)?sh|python\d?|node|perl|ruby)(?:\s+-s?)?\s*(?:$|[;&)`'"])/m],
  ['it evaluates generated text as code', /\beval\s+["']?\$\(|\b(?:ba|z)?sh\s+-c\s+["']?\$\(/],
];

/** Hosts a line names: in URLs, and as arguments of network commands (`curl host/x`, `ssh user@host`). */
function hostsOf(line: string): string[] {
  const hosts: string[] = [];
  for (const m of line.matchAll(/\b(?:https?|ftp|wss?|git|ssh|sftp|rsync):\/\/(?:[^\s/@`'"]+@)?(\[[^\]\s]+\]|[^\s/:?#`'")\]>]+)/gi)) hosts.push(m[1]);
  for (const m of line.matchAll(/\b(?:curl|wget|xh|http|https|nc|ncat|telnet|ssh|scp|sftp|ftp|ping|dig|nslookup|webfetch)\b((?:[ \t]+[^\s|;&`]+)+)/g)) {
    for (const arg of m[1].trim().split(/\s+/)) {
      if (arg.startsWith('-') || arg.includes('://')) continue;
      const h = /^(?:[\w.-]+@)?((?:[a-z0-9-]+\.)+[a-z]{2,})(?=$|[:/?#])/i.exec(arg)?.[1];
      if (h && !/\.(?:md|txt|json|ya?ml|toml|lock|ts|js|mjs|cjs|tsx|jsx|py|sh|rb|go|rs|java|html?|css|xml|csv|log|env|ini|cfg|conf|tar|gz|tgz|zip)$/i.test(h)) hosts.push(h);
    }
  }
  return [...new Set(hosts.map((h) => h.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.+$/, '')))];
}

const LOOPBACK = /^(?:localhost|.+\.localhost|127(?:\.\d{1,3}){3}|::1|0\.0\.0\.0)$/;

/** Whether a host is on an allow-list (`example.com`, `.example.com` or `*.example.com` cover the name and its subdomains). */
export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  if (LOOPBACK.test(host)) return true;
  return allowed.some((rule) => {
    const r = rule.trim().toLowerCase().replace(/^\*?\./, '').replace(/\.+$/, '');
    return r !== '' && (host === r || host.endsWith(`.${r}`));
  });
}

/** Shannon entropy of a string, in bits per character. */
export function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) h -= (n / s.length) * Math.log2(n / s.length);
  return h;
}

/** A run of 20+ key-like characters, with letters and digits, at 3.5 bits a character or more: a secret, or a pinned hash. */
const HIGH_ENTROPY_BITS = 3.5;
const highEntropy = (line: string) => (line.match(/[A-Za-z0-9+/=_-]{20,}/g) ?? []).filter((w) => /\d/.test(w) && /[A-Za-z]/.test(w) && entropy(w) >= HIGH_ENTROPY_BITS);

/**
 * The lines of a SKILL.md a reviewer is shown before promoting it (not refused: a person may accept
 * them): hosts not on the tenant's allow-list (`allowedHosts`: tenant settings `skills.allowedHosts` and
 * `egress.allow`; loopback is the workspace's own), package installs and running code from a registry or
 * a container image, text piped into a shell, and high-entropy strings.
 */
export function skillFlags(content: string, options: { allowedHosts: readonly string[] }): SkillFlag[] {
  const flags: SkillFlag[] = [];
  content.split('\n').forEach((raw, i) => {
    const text = raw.trim().slice(0, 300);
    const add = (reason: string) => flags.push({ line: i + 1, text, reason });
    for (const host of hostsOf(raw)) if (!hostAllowed(host, options.allowedHosts)) add(`it names the host ${host}, which is not on the tenant's allow-list (skills.allowedHosts, egress.allow)`);
    for (const [reason, re] of INSTALLS) if (re.test(raw)) add(reason);
    if (highEntropy(raw).length) add('it holds a high-entropy string: a secret, or a pinned value to check');
  });
  return flags;
}

/** The directory of a path relative to the workspace, as a glob with its extension: `src/**\/*.ts`. */
function pathPattern(path: string, workspace: string): string {
  let p = path.replace(/\\/g, '/');
  const root = workspace.replace(/\/+$/, '');
  if (root && (p === root || p.startsWith(`${root}/`))) p = p.slice(root.length + 1);
  else if (p.startsWith('/')) return '/…'; // outside the workspace: where does not generalise
  p = p.replace(/^\.\//, '');
  const parts = p.split('/').filter(Boolean);
  if (!parts.length) return '.';
  const file = parts.pop()!;
  const dot = file.lastIndexOf('.');
  const ext = dot > 0 ? file.slice(dot) : '';
  const top = parts[0];
  const name = ext ? `*${ext}` : file;
  return top ? `${top}/**/${name}` : name;
}

/**
 * A tool call as the kind of work it is, without what belongs to one instance: `bash:npm test` (the
 * command's first two words), `edit:src/**\/*.ts` (the top directory and the extension), `read:…`,
 * `grep`, `webfetch`. Similar tasks done in different workspaces look the same.
 */
export function abstractToolCall(tool: string, input: Record<string, unknown>, workspace: string): string {
  const name = tool.toLowerCase();
  const str = (k: string) => (typeof input[k] === 'string' ? (input[k] as string) : '');
  if (name === 'bash') {
    const words = str('command')
      .trim()
      .replace(/^(?:(?:sudo|env|time|nice)\s+|[A-Z_][A-Z0-9_]*=\S*\s+)+/, '')
      .split(/\s+|&&|\|\||;|\|/)
      .filter(Boolean)
      .filter((w) => !w.startsWith('-') || w === '--')
      .slice(0, 2)
      .map((w) => (w.includes('/') ? w.split('/').pop()! : w));
    return words.length ? `bash:${words.join(' ')}` : 'bash';
  }
  const path = str('filePath') || str('path') || str('file_path');
  if (['edit', 'write', 'read', 'patch', 'multiedit'].includes(name) && path) return `${name}:${pathPattern(path, workspace)}`;
  return name;
}

/**
 * The tool sequence's 3-grams (each three calls in a row, joined by " > "); a sequence shorter than
 * three is one gram, itself. Duplicates removed: the Jaccard of two sets.
 */
export function toolGrams(tools: string[]): string[] {
  if (!tools.length) return [];
  if (tools.length < 3) return [tools.join(' > ')];
  const grams = new Set<string>();
  for (let i = 0; i + 3 <= tools.length; i++) grams.add(tools.slice(i, i + 3).join(' > '));
  return [...grams];
}

/** |A ∩ B| / |A ∪ B|; two empty sets are not similar (nothing to compare). */
export function jaccard(a: readonly string[], b: readonly string[]): number {
  if (!a.length && !b.length) return 0;
  const sa = new Set(a);
  const sb = new Set(b);
  let both = 0;
  for (const x of sa) if (sb.has(x)) both++;
  return both / (sa.size + sb.size - both);
}

export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

const STOPWORDS = new Set(
  (
    'the and for with that this from into onto then than there their they them what when where which who whom why how ' +
    'are was were been being have has had does did doing can could should would will shall may might must ' +
    'you your yours our ours its it\'s not but all any each some such only own same too very just also please ' +
    'let make sure about again after before over under more most other out off here now use using get got want need'
  ).split(' '),
);

/** A text's words that carry its meaning: lower-cased, at least 3 letters, no stop words, sorted, unique. */
export function lexicalSignature(text: string): string[] {
  const words = text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .split(/[^a-z0-9_]+/)
    .filter((w) => w.length >= 3 && !STOPWORDS.has(w) && !/^\d+$/.test(w));
  return [...new Set(words)].sort();
}

/** Whether a request asks for the same thing as the one before it (the person was not satisfied). */
export function isRedo(previous: string, request: string): boolean {
  const norm = (s: string) => s.toLowerCase().replace(/\s+/g, ' ').trim();
  if (norm(previous) === norm(request)) return true;
  return jaccard(lexicalSignature(previous), lexicalSignature(request)) >= REDO_JACCARD;
}
