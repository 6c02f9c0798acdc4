/**
 * The git gateway's rules, pure: which path names which repository, who may reach it, what a push may
 * update, git's pkt-line framing, and the git config that points the sandbox's git at the gateway. Every
 * input here comes from the agent (paths, ref names, request bodies) or an admin, so everything is
 * checked against a narrow shape rather than cleaned.
 */

/** A git host's name in the gateway's path and on the command line. */
export const GIT_HOST_NAME_RE = /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/;
/** The gateway's path prefix on the gateway host: /git/<host name>/<owner>/<repo>[.git]/<service path>. */
export const GIT_GATEWAY_PREFIX = '/git/';
/** A repository path segment: what GitHub, GitLab and Gitea allow, and never `.` or `..`. */
const SEGMENT_RE = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;
/** At most this many segments (GitLab's nested groups); at least two (owner/repo). */
const MAX_SEGMENTS = 8;
/** The ref-update commands of a push must fit in this (they precede the pack). */
const MAX_COMMANDS_BYTES = 256 * 1024;

type GitService = 'git-upload-pack' | 'git-receive-pack';

export interface GitRequest {
  /** The repository as named, without a trailing `.git` (what access patterns match). */
  repo: string;
  /** The path to forward below the host's base URL (as the client named it, `.git` kept). */
  upstreamPath: string;
  service: GitService;
  /** `refs`: GET info/refs (the advertisement); `rpc`: POST of the service itself. */
  kind: 'refs' | 'rpc';
}

/**
 * Reads `<owner>/<repo>[.git]/info/refs?service=...` or `<owner>/<repo>[.git]/git-(upload|receive)-pack`
 * (the path after /git/<host>/). Only git's smart HTTP: no dumb-protocol files, no other endpoints of
 * the host (its API, its web pages) are reachable through the gateway.
 */
export function parseGitRequest(rest: string, method: string, query: URLSearchParams): GitRequest | { error: string } {
  let path = rest;
  let kind: GitRequest['kind'];
  let service: string | null;
  if (path.endsWith('/info/refs')) {
    if (method !== 'GET') return { error: 'info/refs is fetched with GET' };
    kind = 'refs';
    service = query.get('service');
    path = path.slice(0, -'/info/refs'.length);
  } else {
    const m = /\/(git-upload-pack|git-receive-pack)$/.exec(path);
    if (!m) return { error: 'only git smart HTTP is served here (info/refs, git-upload-pack, git-receive-pack)' };
    if (method !== 'POST') return { error: `${m[1]} is called with POST` };
    kind = 'rpc';
    service = m[1];
    path = path.slice(0, -m[0].length);
  }
  if (service !== 'git-upload-pack' && service !== 'git-receive-pack') return { error: 'service must be git-upload-pack or git-receive-pack (the dumb protocol is not served)' };
  const segments = path.split('/');
  if (segments.length < 2 || segments.length > MAX_SEGMENTS || !segments.every((s) => SEGMENT_RE.test(s))) {
    return { error: 'a repository is <owner>/<repo> (letters, digits, ".", "_", "-"; no "." or ".." segments)' };
  }
  const repo = path.replace(/\.git$/, '');
  if (repo.endsWith('/') || repo.split('/').some((s) => !s)) return { error: 'a repository is <owner>/<repo>' };
  return { repo, upstreamPath: path, service, kind };
}

/** An access rule: who (`role:<name>`, `team:<name>` or `*`) reaches which repositories (patterns). */
export interface GitAccessRule {
  who: string;
  repos: string[];
}

const PATTERN_RE = /^[A-Za-z0-9._*-]+(?:\/[A-Za-z0-9._*-]+)*$/;

/** Checks an admin's access rules; the message names the field. */
export function checkAccessRules(rules: unknown): GitAccessRule[] {
  if (!Array.isArray(rules)) throw new Error('access must be a list of {who, repos}');
  if (rules.length > 200) throw new Error('access has at most 200 rules');
  return rules.map((r, i) => {
    const rule = r as Partial<GitAccessRule>;
    if (typeof rule?.who !== 'string' || !/^(\*|role:[^\s]{1,100}|team:[^\n]{1,100})$/.test(rule.who)) throw new Error(`access[${i}].who must be "*", "role:<name>" or "team:<name>"`);
    if (!Array.isArray(rule.repos) || !rule.repos.length || rule.repos.length > 100) throw new Error(`access[${i}].repos must list 1 to 100 patterns such as "org/*"`);
    for (const p of rule.repos) if (typeof p !== 'string' || !PATTERN_RE.test(p) || p.split('/').some((s) => s === '.' || s === '..')) throw new Error(`access[${i}].repos: "${String(p)}" is not a pattern like "org/*" or "org/repo"`);
    return { who: rule.who, repos: rule.repos.map((p) => p.replace(/\.git$/, '')) };
  });
}

/**
 * Whether a repository matches a pattern: `*` stands for any characters within one segment, `**` for
 * any number of segments. Case is ignored (GitHub, GitLab and Gitea name repositories case-insensitively).
 */
export function repoMatches(pattern: string, repo: string): boolean {
  const re = pattern
    .toLowerCase()
    .split('/')
    .map((seg) => (seg === '**' ? '.*' : seg.replace(/[.+?^${}()|[\]\\-]/g, '\\$&').replace(/\*/g, '[^/]*')))
    .join('/');
  return new RegExp(`^${re}$`).test(repo.toLowerCase());
}

/** Whether a user (their role and team names) reaches a repository under a host's rules. */
export function canReach(rules: readonly GitAccessRule[], who: { roles: readonly string[]; teams: readonly string[] }, repo: string): boolean {
  const roles = new Set(who.roles);
  const teams = new Set(who.teams.map((t) => t.toLowerCase()));
  return rules.some((r) => {
    const applies = r.who === '*' || (r.who.startsWith('role:') && roles.has(r.who.slice(5))) || (r.who.startsWith('team:') && teams.has(r.who.slice(5).toLowerCase()));
    return applies && r.repos.some((p) => repoMatches(p, repo));
  });
}

// ---------------------------------------------------------------------------------------------------
// pkt-lines (gitprotocol-common: four hex digits of length including themselves, 0000 = flush)

export function pkt(data: string | Buffer): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data) : data;
  if (body.length + 4 > 65520) throw new Error('pkt-line too long');
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0')), body]);
}
const FLUSH = Buffer.from('0000');

export interface RefUpdate {
  oldId: string;
  newId: string;
  ref: string;
}

export type CommandsParse =
  | { state: 'more' }
  | { state: 'error'; error: string }
  | { state: 'done'; commands: RefUpdate[]; capabilities: string[]; options: string[] | null; length: number };

const ZERO_ID = /^0+$/;
/** Push options one push may carry, and the length of one (git itself bounds neither beyond a pkt-line). */
const MAX_PUSH_OPTIONS = 100;
const MAX_PUSH_OPTION_LENGTH = 4096;

/**
 * Whether the client asked for push options. git's receive-pack finds a capability after any whitespace,
 * with or without a value (`push-options=x` counts), on any command line: the gateway reads the lists the
 * same way, or options it did not see would reach the host.
 */
function requestsPushOptions(capabilities: readonly string[]): boolean {
  return capabilities.some((c) => c === 'push-options' || c.startsWith('push-options='));
}

/**
 * The start of a receive-pack request, up to the pack: after `shallow <id>` lines from a shallow clone,
 * the ref-update commands (`<old> <new> <ref>\0<capabilities>`, then `<old> <new> <ref>` lines, then a
 * flush) and, when the client asked for push options (`push-options` among the capabilities), one option
 * per pkt-line up to a second flush (`options` is null when it did not ask). `more`: the buffer ends
 * before that. A push certificate (`push-cert`) or anything else is an error: the gateway forwards only
 * what it has checked.
 */
export function parseReceivePackCommands(buf: Buffer): CommandsParse {
  const commands: RefUpdate[] = [];
  let capabilities: string[] = [];
  let options: string[] | null = null;
  let at = 0;
  for (;;) {
    if (buf.length < at + 4) return buf.length > MAX_COMMANDS_BYTES ? { state: 'error', error: 'too many ref updates in one push' } : { state: 'more' };
    const lenText = buf.subarray(at, at + 4).toString('latin1');
    if (!/^[0-9a-f]{4}$/.test(lenText)) return { state: 'error', error: 'the push is not in git pkt-line format' };
    const len = parseInt(lenText, 16);
    if (len === 0) {
      // No commands at all is git's probe before a large push (a lone flush): it updates nothing.
      if (options !== null || !commands.length || !requestsPushOptions(capabilities)) return { state: 'done', commands, capabilities, options, length: at + 4 };
      // The commands' flush; the push options follow, up to their own.
      options = [];
      at += 4;
      continue;
    }
    if (len < 4) return { state: 'error', error: 'the push is not in git pkt-line format' };
    if (at + len > MAX_COMMANDS_BYTES) return { state: 'error', error: options ? 'the push options are too long' : 'too many ref updates in one push' };
    if (buf.length < at + len) return { state: 'more' };
    let line = buf.subarray(at + 4, at + len).toString('utf8');
    at += len;
    if (line.endsWith('\n')) line = line.slice(0, -1);
    if (options) {
      if (options.length >= MAX_PUSH_OPTIONS) return { state: 'error', error: `a push carries at most ${MAX_PUSH_OPTIONS} push options` };
      if (line.length > MAX_PUSH_OPTION_LENGTH || /[\x00-\x1f\x7f]/.test(line)) return { state: 'error', error: 'a push option is malformed (a control character, or too long)' };
      options.push(line);
      continue;
    }
    // A push from a shallow clone names its shallow commits first: not ref updates.
    if (!commands.length && /^shallow [0-9a-f]{40,64}$/.test(line)) continue;
    // git reads capabilities after a NUL on any command line, not only the first (and its own client sends
    // them on the first): all of them count here too. Split at any whitespace, as git's reading of the list is.
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      capabilities = [...capabilities, ...line.slice(nul + 1).split(/[\t\n\v\f\r ]+/).filter(Boolean)];
      line = line.slice(0, nul);
    }
    const m = /^([0-9a-f]{40}|[0-9a-f]{64}) ([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/.exec(line);
    if (!m) return { state: 'error', error: line.startsWith('push-cert') ? 'signed pushes are not supported through the gateway' : 'the push has a malformed ref update' };
    commands.push({ oldId: m[1], newId: m[2], ref: m[3] });
  }
}

/** Whether a ref name is well formed (git check-ref-format, the parts an attacker could abuse). */
export function validRefName(ref: string): boolean {
  return (
    ref.startsWith('refs/') &&
    ref.length <= 1000 &&
    !/[\x00-\x20\x7f~^:?*[\\]/.test(ref) &&
    !ref.includes('..') &&
    !ref.includes('//') &&
    !ref.includes('@{') &&
    !ref.endsWith('/') &&
    !ref.endsWith('.') &&
    !ref.endsWith('.lock') &&
    !ref.split('/').some((s) => s.startsWith('.'))
  );
}

export interface PushRules {
  /** Exact ref names, or prefixes ending in `*`. */
  protectedRefs: readonly string[];
  /** The host's default branch (its HEAD), when it is protected too. */
  defaultRef: string | null;
  /** Branch prefix template; `{handle}` is the user's handle. */
  branchPrefix: string;
  handle: string;
}

/** The agent's own branch namespace as a ref prefix: `refs/heads/agent/<handle>/`. */
export function agentRefPrefix(rules: Pick<PushRules, 'branchPrefix' | 'handle'>): string {
  return `refs/heads/${rules.branchPrefix.replaceAll('{handle}', rules.handle)}`;
}

/** Why each refused ref update is refused (empty: the push may go on). */
export function checkPush(commands: readonly RefUpdate[], rules: PushRules): Array<{ ref: string; reason: string }> {
  const prefix = agentRefPrefix(rules);
  const refused: Array<{ ref: string; reason: string }> = [];
  for (const c of commands) {
    if (!validRefName(c.ref)) refused.push({ ref: c.ref, reason: 'not a valid ref name' });
    else if (c.ref === rules.defaultRef || rules.protectedRefs.some((p) => (p.endsWith('*') ? c.ref.startsWith(p.slice(0, -1)) : c.ref === p))) refused.push({ ref: c.ref, reason: 'protected ref: agents may not push to it' });
    else if (!c.ref.startsWith(prefix) || c.ref.length === prefix.length) refused.push({ ref: c.ref, reason: `agents push only to branches under ${prefix.slice('refs/heads/'.length)}` });
  }
  return refused;
}

/**
 * Push options (`git push -o <option>`) are instructions to the host, not data: GitLab's
 * `merge_request.create`, `merge_request.merge_when_pipeline_succeeds`, `ci.skip` and `ci.variable="K=V"`
 * open merge requests, merge them, skip pipelines or set their variables; Gitea's `repo.private=false`
 * makes the repository public. None passes unless the host's
 * admin lists it. An entry is an option's key (`ci.skip`: any value, or none), a key prefix ending in `*`
 * (`merge_request.*`), or `key=value` for exactly that option. Keys are compared exactly (a host that
 * ignored case would see fewer options pass, never more).
 */
const PUSH_OPTION_KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const MAX_PUSH_OPTION_RULES = 50;

/** An option's key: the part before its first `=`. */
export function pushOptionKey(option: string): string {
  const eq = option.indexOf('=');
  return eq < 0 ? option : option.slice(0, eq);
}

/** Checks an admin's list of allowed push options; the message names the entry. */
export function checkPushOptionRules(rules: unknown): string[] {
  if (!Array.isArray(rules)) throw new Error('pushOptions must be a list such as ["merge_request.create", "merge_request.*"]');
  if (rules.length > MAX_PUSH_OPTION_RULES) throw new Error(`pushOptions has at most ${MAX_PUSH_OPTION_RULES} entries`);
  return rules.map((r, i) => {
    if (typeof r !== 'string') throw new Error(`pushOptions[${i}] must be a string`);
    const eq = r.indexOf('=');
    const key = eq < 0 ? r : r.slice(0, eq);
    const keyOk = key.endsWith('*') && eq < 0 ? PUSH_OPTION_KEY.test(key.slice(0, -1)) : PUSH_OPTION_KEY.test(key);
    if (!keyOk || r.length > 300 || /[\x00-\x1f\x7f]/.test(r)) {
      throw new Error(`pushOptions[${i}]: "${r.slice(0, 60)}" is not an option key (ci.skip), a prefix (merge_request.*) or key=value`);
    }
    return r;
  });
}

/** Whether one push option passes the host's list. */
export function pushOptionAllowed(option: string, allowed: readonly string[]): boolean {
  const key = pushOptionKey(option);
  return allowed.some((a) => (a.includes('=') ? a === option : a.endsWith('*') ? key.startsWith(a.slice(0, -1)) : a === key));
}

/** The push options the host's list refuses (empty: all pass). */
export function refusedPushOptions(options: readonly string[], allowed: readonly string[]): string[] {
  return options.filter((o) => !pushOptionAllowed(o, allowed));
}

/** A push's ref updates for the audit log: `create`, `update` or `delete` of each ref. */
export function describeUpdates(commands: readonly RefUpdate[]): Array<{ ref: string; op: 'create' | 'update' | 'delete'; newId: string }> {
  return commands.map((c) => ({ ref: c.ref, op: ZERO_ID.test(c.oldId) ? 'create' : ZERO_ID.test(c.newId) ? 'delete' : 'update', newId: c.newId }));
}

/**
 * The receive-pack answer refusing a push, in git's protocol, so `git push` shows each ref as
 * `! [remote rejected] <ref> (<reason>)` and the message as `remote: ...`: the report-status (wrapped in
 * side-band 1 when the client asked for side-band) with a side-band 2 message before it.
 */
export function refusePushResponse(commands: readonly RefUpdate[], refused: ReadonlyArray<{ ref: string; reason: string }>, capabilities: readonly string[], message: string): Buffer {
  const reasons = new Map(refused.map((r) => [r.ref, r.reason]));
  const report = Buffer.concat([
    pkt('unpack ok\n'),
    // Bounded, so each fits a pkt-line whatever the agent named (a ref can be as long as a pkt-line).
    ...commands.map((c) => pkt(`ng ${c.ref.slice(0, 1000).replace(/[\x00-\x1f\x7f]/g, '?')} ${(reasons.get(c.ref) ?? 'refused with the rest of this push').slice(0, 500).replace(/[\x00-\x1f\x7f]/g, ' ')}\n`)),
    FLUSH,
  ]);
  if (!capabilities.includes('side-band-64k') && !capabilities.includes('side-band')) return report;
  const max = capabilities.includes('side-band-64k') ? 65515 : 995;
  // One side-band packet (at most 1000 bytes with plain side-band): a push of many refused refs, or a
  // long reason, is cut rather than made into a packet git cannot take (or pkt() refuses to build).
  const said = Buffer.from(`agentws: ${message.replace(/[\x00-\x1f\x7f]/g, ' ')}`);
  const text = said.length > 900 ? Buffer.concat([said.subarray(0, 900), Buffer.from('…')]) : said;
  const parts: Buffer[] = [pkt(Buffer.concat([Buffer.from([2]), text, Buffer.from('\n')]))];
  for (let i = 0; i < report.length; i += max) parts.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(i, i + max)])));
  parts.push(FLUSH);
  return Buffer.concat(parts);
}

/**
 * The host's default branch from an upload-pack advertisement (`symref=HEAD:refs/heads/main` among
 * the first ref's capabilities), or null when it does not say.
 */
export function defaultRefOf(advertisement: Buffer): string | null {
  const text = advertisement.subarray(0, 64 * 1024).toString('latin1');
  const m = /\0[^\n]*\bsymref=HEAD:(refs\/heads\/[^\s\0]+)/.exec(text);
  return m ? m[1] : null;
}

/** Checks an admin's base URL: http(s), no credentials, no query or fragment. Returns it without a trailing slash. */
export function normaliseBaseUrl(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`baseUrl "${text}" is not a URL`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('baseUrl must be an http or https URL');
  if (u.username || u.password) throw new Error('baseUrl must not carry credentials: pass the token as token');
  if (u.search || u.hash) throw new Error('baseUrl must not have a query or fragment');
  if (/["\\\s]/.test(u.href)) throw new Error('baseUrl must not contain quotes, backslashes or spaces');
  return u.href.replace(/\/+$/, '');
}

/** Quotes a value for a git config file. */
const quote = (v: string) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/**
 * The sandbox's git config (its GIT_CONFIG_SYSTEM, written by the control plane, read-only inside):
 * each host's URL rewritten to the gateway (`url.<gateway>.insteadOf`), and the runtime's own gateway
 * credential sent to the gateway only (it is worthless outside this sandbox; the host's credential is
 * added by the gateway and never appears here).
 */
export function sandboxGitConfig(hosts: ReadonlyArray<{ name: string; baseUrl: string }>, gatewayHost: string, credential: string): string {
  if (!hosts.length) return '';
  const gateway = `http://${gatewayHost}${GIT_GATEWAY_PREFIX}`;
  const lines = ['# Written by agentws: git hosts of the tenant, reached through the git gateway.'];
  for (const h of hosts) {
    // insteadOf applies to pushes too (no pushInsteadOf is set).
    lines.push(`[url ${quote(`${gateway}${h.name}/`)}]`, `\tinsteadOf = ${quote(`${h.baseUrl}/`)}`);
  }
  lines.push(`[http ${quote(gateway)}]`, `\textraHeader = ${quote(`Authorization: Bearer ${credential}`)}`);
  return `${lines.join('\n')}\n`;
}
