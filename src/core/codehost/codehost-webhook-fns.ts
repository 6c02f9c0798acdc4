import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { repoMatches } from '../connectors/git-fns.js';
import type { CodeHostKind, CodeHostTrigger, RefusalReason } from './codehost-contract.js';

/**
 * The webhook intake's pure half: how each host authenticates a delivery, names it and its
 * event, and what a delivery asks for. Everything here reads hostile input (anyone can POST to the webhook
 * URL; a verified delivery still carries text any user of the host wrote): nothing throws on any input,
 * every string taken on is bounded, and a payload that is not in the host's shape is "malformed", ignored.
 */

export type WebhookHeaders = Record<string, string | string[] | undefined>;

/** Per person and repository, and per repository, how many runs an hour may be queued (rateLimited). */
export const RATE_PER_PERSON_REPO_HOUR = 10;
export const RATE_PER_REPO_HOUR = 60;
export const RATE_WINDOW_MS = 60 * 60_000;

/** What is carried on from a payload at most (a host's own limits are about these: GitHub's comment is 65,536 characters). */
const MAX_TEXT = 65_536;
const MAX_TITLE = 1024;
const MAX_NAME = 255;
const MAX_URL = 2048;
const MAX_DELIVERY_ID = 200;
const MAX_EVENT = 100;

/** One header, whatever its case; a header sent more than once is not taken (which one would count?). */
export function headerOf(headers: WebhookHeaders, name: string): string | undefined {
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== want) continue;
    if (Array.isArray(v)) return v.length === 1 ? v[0] : undefined;
    return v;
  }
  return undefined;
}

const sha256 = (s: string | Buffer) => createHash('sha256').update(s).digest();

/** Compares a hex MAC given by the sender with the one expected; a malformed or other-length one is false. */
function macMatches(givenHex: string | undefined, expected: Buffer): boolean {
  if (givenHex === undefined || !/^[0-9a-fA-F]+$/.test(givenHex) || givenHex.length !== expected.length * 2) return false;
  // A MAC's length is public (it is the hash's); only its bytes must be compared in constant time.
  return timingSafeEqual(Buffer.from(givenHex, 'hex'), expected);
}

/**
 * Whether a delivery is the host's, by the host's rule: GitHub `X-Hub-Signature-256: sha256=<hex>` (HMAC-SHA256
 * of the raw body), Gitea `X-Gitea-Signature: <hex>` (the same MAC; its `X-Hub-Signature-256` is taken only when
 * `X-Gitea-Signature` is absent), GitLab `X-Gitlab-Token` equal to the secret. Constant time throughout.
 */
export function verifyDelivery(kind: CodeHostKind, headers: WebhookHeaders, rawBody: Buffer, secret: string): boolean {
  if (!secret) return false;
  if (kind === 'gitlab') {
    const token = headerOf(headers, 'x-gitlab-token');
    if (token === undefined) return false;
    // Hashing both first: equal lengths for timingSafeEqual, and the secret's length is not told by timing.
    return timingSafeEqual(sha256(token), sha256(secret));
  }
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  if (kind === 'gitea') {
    const gitea = headerOf(headers, 'x-gitea-signature');
    if (gitea !== undefined) return macMatches(gitea.trim(), expected);
  }
  const hub = headerOf(headers, 'x-hub-signature-256')?.trim();
  if (hub === undefined || !hub.toLowerCase().startsWith('sha256=')) return false;
  return macMatches(hub.slice('sha256='.length), expected);
}

/** A header value fit to store and compare: printable ASCII, bounded; else undefined. */
function token(v: string | undefined, max: number): string | undefined {
  const t = v?.trim();
  return t && t.length <= max && /^[\x21-\x7e]+$/.test(t) ? t : undefined;
}

/**
 * The delivery's id, by which a host's retry (and the same delivery reaching two serves) is known:
 * GitHub `X-GitHub-Delivery`, GitLab `Idempotency-Key` (the same across its retries) else
 * `X-Gitlab-Event-UUID`, Gitea `X-Gitea-Delivery`. Without one (or an unusable one), the body's hash: a
 * retry of the same body is the same delivery.
 */
export function deliveryIdOf(kind: CodeHostKind, headers: WebhookHeaders, rawBody: Buffer): string {
  const names = kind === 'github' ? ['x-github-delivery'] : kind === 'gitlab' ? ['idempotency-key', 'x-gitlab-event-uuid'] : ['x-gitea-delivery'];
  for (const n of names) {
    const id = token(headerOf(headers, n), MAX_DELIVERY_ID);
    if (id) return id;
  }
  return `sha256:${sha256(rawBody).toString('hex')}`;
}

/** The delivery's event name (`X-GitHub-Event`, `X-Gitlab-Event`, `X-Gitea-Event`); `unknown` when absent or unusable. */
export function eventOf(kind: CodeHostKind, headers: WebhookHeaders): string {
  const name = kind === 'github' ? 'x-github-event' : kind === 'gitlab' ? 'x-gitlab-event' : 'x-gitea-event';
  const v = headerOf(headers, name)?.trim();
  return v && v.length <= MAX_EVENT && /^[\x20-\x7e]+$/.test(v) ? v : 'unknown';
}

// ---------------------------------------------------------------------------------------------------------
// Reading payloads

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/**
 * What PostgreSQL cannot store goes: NUL (not in text, nor as \u0000 in jsonb, where the job and the audit
 * entry carry these strings) and lone surrogates (jsonb refuses their escapes) become U+FFFD. Without this
 * a signed body holding them would fail the delivery's transaction: a 5xx.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
export const storable = (v: string): string => v.replace(/\u0000/g, '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
/** A string, bounded (longer: cut, never refused: an issue body may be long); undefined when not a string. */
const text = (v: unknown, max: number): string | undefined => (typeof v === 'string' ? storable(v.length > max ? v.slice(0, max) : v) : undefined);
/** A short name that must be whole (a login, a branch): undefined when absent, empty, too long, or not storable as is. */
const name = (v: unknown, max = MAX_NAME): string | undefined =>
  typeof v === 'string' && v.length > 0 && v.length <= max && !/[\x00-\x1f\x7f]/.test(v) && storable(v) === v ? v : undefined;
/** An id the host gives as a number (or a string of digits). */
const idOf = (v: unknown): string | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? String(v) : typeof v === 'string' && /^\d{1,20}$/.test(v) ? v : undefined;
/** An issue's or pull request's number (GitLab: iid). */
const numberOf = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 && v <= 2_147_483_647 ? v : undefined);
/** Only web links (a link shown in the dashboard must not be `javascript:`). */
function urlOf(v: unknown): string | undefined {
  // No control characters or spaces at all (the URL parser would quietly drop or encode some; the raw string is what is kept).
  if (typeof v !== 'string' || v.length > MAX_URL || !/^[\x21-\x7e\u00a0-\uffff]+$/.test(v) || storable(v) !== v) return undefined;
  try {
    const u = new URL(v);
    return u.protocol === 'https:' || u.protocol === 'http:' ? v : undefined;
  } catch {
    return undefined;
  }
}
/** `owner/repo` (GitLab: with groups) as the git gateway names repositories: no `.`/`..` segments, no odd characters. */
function repoOf(v: unknown): string | undefined {
  if (typeof v !== 'string' || v.length > 500) return undefined;
  const segs = v.split('/');
  if (segs.length < 2 || segs.some((s) => !/^[A-Za-z0-9_.-]{1,100}$/.test(s) || s === '.' || s === '..' || s.endsWith('.git'))) return undefined;
  return v;
}
/** A branch name a payload names (validated again where it is used in git). */
const refOf = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 && v.length <= 255 && /^[\x21-\x7e]+$/.test(v) ? v : undefined);
const shaOf = (v: unknown): string | undefined => (typeof v === 'string' && /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(v) ? v : undefined);

/**
 * An email a host asserts for its user, when it is one: GitLab sends `[REDACTED]` (or nothing), Gitea a
 * `<login>@noreply.<domain>` placeholder for people who keep theirs private, GitHub none (its
 * `users.noreply.github.com` addresses appear in commits, not here): those are no email.
 */
export function usableEmail(v: unknown): string | null {
  if (typeof v !== 'string' || v.length > 254 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v)) return null;
  const domain = v.slice(v.lastIndexOf('@') + 1).toLowerCase();
  if (domain.startsWith('noreply.') || domain === 'users.noreply.github.com') return null;
  return v;
}

/**
 * Whether a comment asks the agent: its trimmed text starts with the mention (case-insensitive), followed by
 * white space or nothing (`@agents` is not `@agent`). Its text after the mention, trimmed; null: not asked.
 */
export function mentionedText(body: string, mention: string): string | null {
  if (!mention) return null;
  const t = body.trim();
  if (t.length < mention.length || t.slice(0, mention.length).toLowerCase() !== mention.toLowerCase()) return null;
  const next = t.charAt(mention.length);
  if (next !== '' && !/\s/.test(next)) return null;
  return t.slice(mention.length).trim();
}

const sameLabel = (a: unknown, label: string) => typeof a === 'string' && a.toLowerCase() === label.toLowerCase();

export type ParseResult = { trigger: CodeHostTrigger } | { ignored: string };

export interface ParseConfig {
  /** The host's mention (`@agent`). */
  mention: string;
  /** The host's trigger label (`agent`). */
  label: string;
}

/**
 * What a verified delivery asks for: a trigger (a comment starting with the mention, or the trigger label
 * added, on an issue or a pull/merge request), or why it is ignored (an event or action not acted on, no
 * mention, another label, a bot, a payload not in the host's shape: `malformed`). Never throws.
 */
export function parseDelivery(kind: CodeHostKind, event: string, rawBody: Buffer | string, cfg: ParseConfig, deliveryId = ''): ParseResult {
  let body: unknown;
  try {
    body = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
  } catch {
    return { ignored: 'malformed' };
  }
  const payload = obj(body);
  if (!payload) return { ignored: 'malformed' };
  try {
    const r = kind === 'github' ? github(event, payload, cfg) : kind === 'gitlab' ? gitlab(event, payload, cfg) : gitea(event, payload, cfg);
    return 'ignored' in r ? r : { trigger: { ...r.trigger, kind, deliveryId } };
  } catch {
    // The readers do not throw on any JSON; this is the guard that a delivery is never a 5xx all the same.
    return { ignored: 'malformed' };
  }
}

type Read = { trigger: Omit<CodeHostTrigger, 'kind' | 'deliveryId'> } | { ignored: string };
const MALFORMED = { ignored: 'malformed' } as const;

/** The trigger a reader ends with: the same shape for every host and way (a comment, or a label: no comment). */
function triggerOf(t: {
  repo: string;
  projectId: number | null;
  isPr: boolean;
  number: number;
  title: string;
  body: string;
  url: string;
  comment: CodeHostTrigger['comment'];
  actor: CodeHostTrigger['actor'];
  defaultBranch: string;
  /** A pull request's head, where the payload carries it (else the run reads it from the host). */
  pr: { head: { ref: string; sha: string }; fromFork: boolean } | undefined;
}): Read {
  return {
    trigger: {
      repo: t.repo,
      projectId: t.projectId,
      target: { type: t.isPr ? 'pull_request' : 'issue', number: t.number, title: t.title, body: t.body, url: t.url },
      via: t.comment ? 'comment' : 'label',
      comment: t.comment,
      actor: t.actor,
      defaultBranch: t.defaultBranch,
      head: t.pr?.head ?? null,
      fromFork: t.pr?.fromFork ?? false,
    },
  };
}

function actorOf(user: Json | undefined, loginKey: 'login' | 'username'): CodeHostTrigger['actor'] | undefined {
  const login = name(user?.[loginKey]);
  const id = idOf(user?.id);
  return login && id ? { login, id, email: usableEmail(user?.email) } : undefined;
}

// GitHub: issue_comment, pull_request_review_comment, issues/pull_request `labeled`.
function github(event: string, p: Json, cfg: ParseConfig): Read {
  if (event === 'ping') return { ignored: 'ping' };
  if (!['issue_comment', 'pull_request_review_comment', 'issues', 'pull_request'].includes(event)) return { ignored: `event:${event}` };
  const action = name(p.action, 50);
  const repository = obj(p.repository);
  const repo = repoOf(repository?.full_name);
  const defaultBranch = refOf(repository?.default_branch);
  const sender = obj(p.sender);
  if (!repo || !defaultBranch) return MALFORMED;
  // The service's own answers never start with the mention; an app's (or any bot's) comments are never a person's request.
  if (sender?.type === 'Bot') return { ignored: 'bot' };
  const pullHead = (pr: Json | undefined) => {
    const head = obj(pr?.head);
    const ref = refOf(head?.ref);
    const sha = shaOf(head?.sha);
    if (!ref || !sha) return undefined;
    const headRepo = obj(head?.repo);
    // A head in another repository, or in one since deleted (null), is a fork's.
    const fromFork = !headRepo || typeof headRepo.full_name !== 'string' || headRepo.full_name.toLowerCase() !== repo.toLowerCase();
    return { head: { ref, sha }, fromFork };
  };
  if (event === 'issue_comment' || event === 'pull_request_review_comment') {
    if (action !== 'created') return { ignored: `action:${action ?? 'none'}` };
    const comment = obj(p.comment);
    const commentBody = text(comment?.body, MAX_TEXT);
    if (commentBody === undefined) return MALFORMED;
    const asked = mentionedText(commentBody, cfg.mention);
    if (asked === null) return { ignored: 'no_mention' };
    if (obj(comment?.user)?.type === 'Bot') return { ignored: 'bot' };
    const actor = actorOf(obj(comment?.user) ?? sender, 'login');
    const commentId = idOf(comment?.id);
    const commentUrl = urlOf(comment?.html_url);
    const item = event === 'issue_comment' ? obj(p.issue) : obj(p.pull_request);
    const number = numberOf(item?.number);
    const title = text(item?.title, MAX_TITLE);
    const url = urlOf(item?.html_url);
    if (!actor || !commentId || !commentUrl || !number || title === undefined || !url) return MALFORMED;
    const isPr = event === 'pull_request_review_comment' || obj(item?.pull_request) !== undefined;
    // issue_comment on a pull request carries no head (only pull_request_review_comment does): the run reads it from the host.
    const pr = event === 'pull_request_review_comment' ? pullHead(item) : undefined;
    if (event === 'pull_request_review_comment' && !pr) return MALFORMED;
    return triggerOf({ repo, projectId: null, isPr, number, title, body: text(item?.body, MAX_TEXT) ?? '', url, comment: { id: commentId, body: asked, url: commentUrl }, actor, defaultBranch, pr });
  }
  // issues / pull_request
  if (action !== 'labeled') return { ignored: `action:${action ?? 'none'}` };
  if (!sameLabel(obj(p.label)?.name, cfg.label)) return { ignored: 'other_label' };
  const isPr = event === 'pull_request';
  const item = isPr ? obj(p.pull_request) : obj(p.issue);
  const number = numberOf(item?.number);
  const title = text(item?.title, MAX_TITLE);
  const url = urlOf(item?.html_url);
  const actor = actorOf(sender, 'login');
  const pr = isPr ? pullHead(item) : undefined;
  if (!number || title === undefined || !url || !actor || (isPr && !pr)) return MALFORMED;
  return triggerOf({ repo, projectId: null, isPr, number, title, body: text(item?.body, MAX_TEXT) ?? '', url, comment: null, actor, defaultBranch, pr });
}

// GitLab: Note Hook (on an issue or merge request), Issue Hook / Merge Request Hook gaining the label.
function gitlab(event: string, p: Json, cfg: ParseConfig): Read {
  // A confidential issue's hooks have their own names; the same rules apply to them.
  const ev = event.replace(/^Confidential /, '');
  if (!['Note Hook', 'Issue Hook', 'Merge Request Hook'].includes(ev)) return { ignored: `event:${event}` };
  const project = obj(p.project);
  const repo = repoOf(project?.path_with_namespace);
  const projectIdStr = idOf(project?.id);
  const projectId = projectIdStr !== undefined && Number.isSafeInteger(Number(projectIdStr)) ? Number(projectIdStr) : undefined;
  const defaultBranch = refOf(project?.default_branch);
  const actor = actorOf(obj(p.user), 'username');
  const attrs = obj(p.object_attributes);
  if (!repo || projectId === undefined || !defaultBranch || !actor || !attrs) return MALFORMED;
  if (obj(p.user)?.bot === true) return { ignored: 'bot' };
  const projectUrl = urlOf(project?.web_url);
  const itemUrl = (item: Json | undefined, isPr: boolean, number: number) =>
    urlOf(item?.url) ?? (projectUrl ? urlOf(`${projectUrl.replace(/\/+$/, '')}/-/${isPr ? 'merge_requests' : 'issues'}/${number}`) : undefined);
  const mrHead = (mr: Json | undefined) => {
    const ref = refOf(mr?.source_branch);
    const sha = shaOf(obj(mr?.last_commit)?.id);
    if (!ref || !sha) return undefined;
    const source = idOf(mr?.source_project_id);
    return { head: { ref, sha }, fromFork: source === undefined || source !== (idOf(mr?.target_project_id) ?? projectIdStr) };
  };
  if (ev === 'Note Hook') {
    const type = attrs.noteable_type;
    if (type !== 'Issue' && type !== 'MergeRequest') return { ignored: `noteable:${name(type, 40) ?? 'other'}` };
    // Edits of a note come as Note Hooks too (with action `update`, GitLab 16+); system notes are GitLab's own.
    if (attrs.action !== undefined && attrs.action !== 'create') return { ignored: `action:${name(attrs.action, 50) ?? 'other'}` };
    if (attrs.system === true) return { ignored: 'system_note' };
    const note = text(attrs.note, MAX_TEXT);
    if (note === undefined) return MALFORMED;
    const asked = mentionedText(note, cfg.mention);
    if (asked === null) return { ignored: 'no_mention' };
    const isPr = type === 'MergeRequest';
    const item = isPr ? obj(p.merge_request) : obj(p.issue);
    const number = numberOf(item?.iid);
    const title = text(item?.title, MAX_TITLE);
    const commentId = idOf(attrs.id);
    const commentUrl = urlOf(attrs.url);
    const url = number ? itemUrl(item, isPr, number) : undefined;
    const pr = isPr ? mrHead(item) : undefined;
    if (!number || title === undefined || !commentId || !commentUrl || !url || (isPr && !pr)) return MALFORMED;
    return triggerOf({ repo, projectId: projectId, isPr, number, title, body: text(item?.description, MAX_TEXT) ?? '', url, comment: { id: commentId, body: asked, url: commentUrl }, actor, defaultBranch, pr });
  }
  // Issue Hook / Merge Request Hook: the label must be among the current labels and not among the previous.
  const labels = obj(obj(p.changes)?.labels);
  if (!labels) return { ignored: 'no_label_change' };
  const had = arr(labels.previous).some((l) => sameLabel(obj(l)?.title, cfg.label));
  const has = arr(labels.current).some((l) => sameLabel(obj(l)?.title, cfg.label));
  if (!has || had) return { ignored: 'other_label' };
  const isPr = ev === 'Merge Request Hook';
  const number = numberOf(attrs.iid);
  const title = text(attrs.title, MAX_TITLE);
  const url = number ? itemUrl(attrs, isPr, number) : undefined;
  const pr = isPr ? mrHead(attrs) : undefined;
  if (!number || title === undefined || !url || (isPr && !pr)) return MALFORMED;
  return triggerOf({ repo, projectId: projectId, isPr, number, title, body: text(attrs.description, MAX_TEXT) ?? '', url, comment: null, actor, defaultBranch, pr });
}

// Gitea: issue_comment (is_pull for a pull request; pull_request_comment accepted too), issues/pull_request `label_updated`.
function gitea(event: string, p: Json, cfg: ParseConfig): Read {
  if (!['issue_comment', 'pull_request_comment', 'issues', 'pull_request'].includes(event)) return { ignored: `event:${event}` };
  const action = name(p.action, 50);
  const repository = obj(p.repository);
  const repo = repoOf(repository?.full_name);
  const defaultBranch = refOf(repository?.default_branch);
  const sender = obj(p.sender);
  if (!repo || !defaultBranch) return MALFORMED;
  if (event === 'issue_comment' || event === 'pull_request_comment') {
    if (action !== 'created') return { ignored: `action:${action ?? 'none'}` };
    const comment = obj(p.comment);
    const commentBody = text(comment?.body, MAX_TEXT);
    if (commentBody === undefined) return MALFORMED;
    const asked = mentionedText(commentBody, cfg.mention);
    if (asked === null) return { ignored: 'no_mention' };
    const issue = obj(p.issue);
    const isPr = p.is_pull === true || event === 'pull_request_comment' || obj(issue?.pull_request) !== undefined;
    const actor = actorOf(obj(comment?.user) ?? sender, 'login');
    const commentId = idOf(comment?.id);
    const commentUrl = urlOf(comment?.html_url);
    const number = numberOf(issue?.number);
    const title = text(issue?.title, MAX_TITLE);
    const url = urlOf(issue?.html_url);
    if (!actor || !commentId || !commentUrl || !number || title === undefined || !url) return MALFORMED;
    // As GitHub's issue_comment: no head in the payload; the run reads it from the host.
    return triggerOf({ repo, projectId: null, isPr, number, title, body: text(issue?.body, MAX_TEXT) ?? '', url, comment: { id: commentId, body: asked, url: commentUrl }, actor, defaultBranch, pr: undefined });
  }
  // issues / pull_request: Gitea says `label_updated` with the labels as they are now (not which was added).
  if (action !== 'label_updated') return { ignored: `action:${action ?? 'none'}` };
  const isPr = event === 'pull_request';
  const item = isPr ? obj(p.pull_request) : obj(p.issue);
  if (!arr(item?.labels).some((l) => sameLabel(obj(l)?.name, cfg.label))) return { ignored: 'other_label' };
  const number = numberOf(item?.number);
  const title = text(item?.title, MAX_TITLE);
  const url = urlOf(item?.html_url);
  const actor = actorOf(sender, 'login');
  let pr: { head: { ref: string; sha: string }; fromFork: boolean } | undefined;
  if (isPr) {
    const head = obj(item?.head);
    const base = obj(item?.base);
    const ref = refOf(head?.ref);
    const sha = shaOf(head?.sha);
    const headRepo = idOf(head?.repo_id) ?? idOf(obj(head?.repo)?.id);
    const baseRepo = idOf(base?.repo_id) ?? idOf(obj(base?.repo)?.id) ?? idOf(repository?.id);
    if (ref && sha) pr = { head: { ref, sha }, fromFork: headRepo === undefined || headRepo !== baseRepo };
  }
  if (!number || title === undefined || !url || !actor || (isPr && !pr)) return MALFORMED;
  return triggerOf({ repo, projectId: null, isPr, number, title, body: text(item?.body, MAX_TEXT) ?? '', url, comment: null, actor, defaultBranch, pr });
}

// ---------------------------------------------------------------------------------------------------------
// Decisions

/** Whether a repository is in the host's webhook allow list (patterns as the host's access rules; empty: none). */
export function repoAllowed(patterns: readonly string[], repo: string): boolean {
  return patterns.some((p) => repoMatches(p, repo));
}

/** Whether another run would pass the hour's limit of the person on the repository, or of the repository. */
export function rateLimited(countPersonHour: number, countRepoHour: number): boolean {
  return countPersonHour >= RATE_PER_PERSON_REPO_HOUR || countRepoHour >= RATE_PER_REPO_HOUR;
}

/**
 * The one polite answer on the issue to a trigger refused at intake: what happened and what fixes it.
 * Never starts with a mention (so it cannot trigger anything itself); names the host account, never a
 * person of the tenant (the issue may be public).
 */
export function refusalText(reason: Exclude<RefusalReason, 'not_allowed_repo' | 'cost_limit'>, t: { login: string; mention: string; label: string }): string {
  const who = `@${t.login}`;
  switch (reason) {
    case 'unmapped':
      return `Sorry, I can't take this on: the account ${who} is not linked to a person of this workspace. Connect your account to this git host in the workspace's dashboard (Settings, Git connections), then ask again.`;
    case 'deactivated':
      // Said without telling the public issue whose account in the workspace it is, or that it was deactivated.
      return `Sorry, I can't take this on: ${who} cannot hand work to the agents of this workspace. An administrator of the workspace can tell why.`;
    case 'no_permission':
      return `Sorry, I can't take this on: ${who}'s role in the workspace does not allow handing issues to an agent (it needs agents.create and agents.code_host). An administrator of the workspace can grant it.`;
    case 'rate_limited':
      return `Sorry, I can't take this on right now: too many runs were asked of this repository (or by ${who}) in the last hour. Please ask again later.`;
    case 'fork':
      return `Sorry, I can't work on a pull request from a fork: its branch is not in this repository. Push the branch to this repository and ask again.`;
  }
}

/**
 * The headers of the service's own test delivery (an event `ping` the parser ignores), signed with the
 * host's secret the way the host itself signs, so the test exercises the same verification.
 */
export function testDeliveryHeaders(kind: CodeHostKind, secret: string, rawBody: Buffer, deliveryId: string): Record<string, string> {
  const mac = createHmac('sha256', secret).update(rawBody).digest('hex');
  const common = { 'content-type': 'application/json', 'user-agent': 'agentws-test-delivery' };
  if (kind === 'github') return { ...common, 'x-github-event': 'ping', 'x-github-delivery': deliveryId, 'x-hub-signature-256': `sha256=${mac}` };
  if (kind === 'gitlab') return { ...common, 'x-gitlab-event': 'ping', 'x-gitlab-event-uuid': deliveryId, 'x-gitlab-token': secret };
  return { ...common, 'x-gitea-event': 'ping', 'x-gitea-delivery': deliveryId, 'x-gitea-signature': mac };
}
