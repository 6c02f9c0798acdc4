import { createHash, randomBytes } from 'node:crypto';
import { ValidationError } from '../../kernel/errors.js';
import { SCIM_TOKEN_MAX_DAYS_LIMIT } from '../tenants/tenant-settings-fns.js';

/**
 * The rules of SCIM 2.0 provisioning (RFC 7643 schemas, RFC 7644 protocol), pure: tokens, filters, PATCH
 * operations and the rendering of users and teams as SCIM resources. Written for what Entra ID and Okta
 * actually send, which is looser than the RFC (capitalised `op`s, booleans as "True"/"False", PATCH values
 * without a path, attribute names in any case).
 */

export const SCIM = {
  user: 'urn:ietf:params:scim:schemas:core:2.0:User',
  group: 'urn:ietf:params:scim:schemas:core:2.0:Group',
  enterpriseUser: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User',
  list: 'urn:ietf:params:scim:api:messages:2.0:ListResponse',
  patchOp: 'urn:ietf:params:scim:api:messages:2.0:PatchOp',
  error: 'urn:ietf:params:scim:api:messages:2.0:Error',
  serviceProviderConfig: 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig',
  resourceType: 'urn:ietf:params:scim:schemas:core:2.0:ResourceType',
  schema: 'urn:ietf:params:scim:schemas:core:2.0:Schema',
} as const;

/** RFC 7644 3.12 scimType values this service answers with. */
export type ScimType = 'invalidFilter' | 'invalidValue' | 'invalidPath' | 'invalidSyntax' | 'uniqueness' | 'mutability' | 'noTarget' | 'tooMany';
const SCIM_TYPES = new Set<string>(['invalidFilter', 'invalidValue', 'invalidPath', 'invalidSyntax', 'uniqueness', 'mutability', 'noTarget', 'tooMany']);

/** A 400 carrying its SCIM scimType as the error's code (the SCIM routes' error handler renders it). */
export const scimInvalid = (scimType: ScimType, detail: string) => new ValidationError(detail, { code: scimType });

/** The SCIM error body of RFC 7644 3.12 for a status and an error code (a scimType when it is one). */
export function scimErrorBody(status: number, code: string | undefined, detail: string) {
  return { schemas: [SCIM.error], status: String(status), ...(code && SCIM_TYPES.has(code) ? { scimType: code } : {}), detail };
}

// --- tokens ---------------------------------------------------------------------------------------

const SCIM_TOKEN_PREFIX = 'agentws_scim_';
/** A SCIM token: the prefix (so a leaked one is recognisable, and secret scanners can match it) and 32 random bytes. */
export const newScimToken = (): string => `${SCIM_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
/** What is stored of a SCIM token: its sha256, hex. */
export const scimTokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');
/** Whether a string has a SCIM token's shape (checked before the database is asked). */
export const looksLikeScimToken = (s: string): boolean => /^agentws_scim_[A-Za-z0-9_-]{43}$/.test(s);
/** Names of SCIM tokens (one per identity provider, or old and new while rotating). */
export const SCIM_TOKEN_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/**
 * A SCIM token's lifetime: every token expires, and an owner renews it by creating it again
 * under its name. Without a lifetime asked for: SCIM_TOKEN_DEFAULT_DAYS (at most the tenant's maximum).
 * The maximum is the tenant's `tokens.scimMaxDays` (default SCIM_TOKEN_MAX_DAYS_DEFAULT, at most
 * SCIM_TOKEN_MAX_DAYS_LIMIT): apart from personal tokens' `tokens.maxDays`, because an identity
 * provider's connection is rotated by hand and rarely, so a tenant that keeps people's script tokens to a
 * week should not have to re-enter its provider's secret every week.
 */
export const SCIM_TOKEN_DEFAULT_DAYS = 180;
const SCIM_TOKEN_MAX_DAYS_DEFAULT = 365;

/** The tenant's longest SCIM token lifetime in days: settings.tokens.scimMaxDays when set and valid, else the default. */
export function scimMaxDaysOf(settings: Record<string, unknown>): number {
  const v = (settings.tokens as { scimMaxDays?: unknown } | undefined)?.scimMaxDays;
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= SCIM_TOKEN_MAX_DAYS_LIMIT ? v : SCIM_TOKEN_MAX_DAYS_DEFAULT;
}

/** The lifetime of a token being created, in days: the one asked for (more than 0, at most `maxDays`) or the default. 400 naming `expiresInDays` otherwise. */
export function scimTokenDays(asked: unknown, maxDays: number): number {
  if (asked === undefined || asked === null) return Math.min(SCIM_TOKEN_DEFAULT_DAYS, maxDays);
  if (typeof asked !== 'number' || !Number.isFinite(asked) || asked <= 0 || asked > maxDays) {
    throw new ValidationError(`expiresInDays: more than 0 and at most ${maxDays} days (the tenant's maximum for SCIM tokens, settings.tokens.scimMaxDays)`, {
      details: { field: 'expiresInDays', maxDays },
    });
  }
  return asked;
}

// --- what an identity provider may do to an owner -----------------------------------------------------

/**
 * Why SCIM may not make this change to an owner of the tenant, or null when it may. Owners are managed by
 * owners: the tenant's SCIM token is held by its identity provider (and whoever can read the provider's
 * configuration), so it may not take an owner's access away (deactivate them; deleting is refused apart)
 * nor move it to someone else (change the userName: the email a first sign-in links an account by, so an
 * address the provider controls would sign in as an owner who never signed in yet; afterwards each of the
 * owner's own sign-ins writes it). It may keep what only describes them in step (display name, given and family name, externalId),
 * and reactivate one (that restores an owner's own access, and grants nobody else anything). A change of
 * case alone is not a rename.
 */
export function ownerChangeRefusal(before: ScimUserState, next: ScimUserState, who: string): string | null {
  if (next.userName.toLowerCase() !== before.userName.toLowerCase()) {
    return `${who} is an owner of the tenant: owners are managed by owners, so the identity provider cannot change their userName (the email their first sign-in is linked by; later their own sign-in keeps it up to date).`;
  }
  if (before.active && !next.active) {
    return `${who} is an owner of the tenant: owners are managed by owners, so the identity provider cannot deactivate them. Another owner can take the owner role away first (\`aws role revoke\`).`;
  }
  return null;
}

// --- the user and group as SCIM changes them -----------------------------------------------------------

/** What SCIM can set on a user. `userName` is the user's email (the sign-in identity). */
export interface ScimUserState {
  userName: string;
  displayName: string;
  givenName: string;
  familyName: string;
  externalId: string | null;
  active: boolean;
}

/** What SCIM can set on a group (a team): members by user id. */
export interface ScimGroupState {
  displayName: string;
  externalId: string | null;
  members: string[];
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const MAX_TEXT = 256;

/** Strips the core schema's URN from an attribute path (`urn:...:core:2.0:User:userName` is `userName`). */
function stripCoreUrn(path: string): string {
  for (const urn of [SCIM.user, SCIM.group]) {
    if (path.toLowerCase().startsWith(`${urn.toLowerCase()}:`)) return path.slice(urn.length + 1);
  }
  return path;
}

function text(attr: string, v: unknown, { allowEmpty = true } = {}): string {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'string') throw scimInvalid('invalidValue', `${attr} must be a string`);
  const s = v.trim();
  if (!allowEmpty && !s) throw scimInvalid('invalidValue', `${attr} must not be empty`);
  if (s.length > MAX_TEXT) throw scimInvalid('invalidValue', `${attr} must be at most ${MAX_TEXT} characters`);
  if (/\p{Cc}/u.test(s)) throw scimInvalid('invalidValue', `${attr} must be printable text`);
  return s;
}

function userName(v: unknown): string {
  const s = text('userName', v, { allowEmpty: false });
  if (!EMAIL.test(s)) throw scimInvalid('invalidValue', 'userName must be an email address (it is the user\'s sign-in email)');
  return s.toLowerCase();
}

/** SCIM booleans, and the strings Entra ID sends for them ("True", "False"). */
function bool(attr: string, v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string' && /^(true|false)$/i.test(v)) return v.toLowerCase() === 'true';
  throw scimInvalid('invalidValue', `${attr} must be true or false`);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Case-insensitive attribute lookup (RFC 7643 2.1: attribute names are case-insensitive). */
function get(o: Record<string, unknown>, name: string): unknown {
  const key = Object.keys(o).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : o[key];
}

/**
 * The user a POST or PUT body describes (RFC 7644 3.3, 3.5.1). Attributes this service does not keep
 * (phone numbers, the enterprise extension, passwords Okta may send) are ignored; `emails` is accepted
 * but the user's email is `userName`.
 */
export function userFromScim(body: unknown): ScimUserState {
  if (!isObject(body)) throw scimInvalid('invalidSyntax', 'the body must be a JSON object');
  const name = get(body, 'name');
  if (name !== undefined && name !== null && !isObject(name)) throw scimInvalid('invalidValue', 'name must be an object');
  const given = name ? text('name.givenName', get(name, 'givenName')) : '';
  const family = name ? text('name.familyName', get(name, 'familyName')) : '';
  const formatted = name ? text('name.formatted', get(name, 'formatted')) : '';
  const un = userName(get(body, 'userName'));
  const active = get(body, 'active');
  const externalId = text('externalId', get(body, 'externalId'));
  return {
    userName: un,
    displayName: text('displayName', get(body, 'displayName')) || formatted || [given, family].filter(Boolean).join(' ') || un,
    givenName: given,
    familyName: family,
    externalId: externalId || null,
    active: active === undefined || active === null ? true : bool('active', active),
  };
}

/** The group a POST or PUT body describes; members by id (their `value`). */
export function groupFromScim(body: unknown): ScimGroupState {
  if (!isObject(body)) throw scimInvalid('invalidSyntax', 'the body must be a JSON object');
  const externalId = text('externalId', get(body, 'externalId'));
  return { displayName: text('displayName', get(body, 'displayName'), { allowEmpty: false }), externalId: externalId || null, members: memberIds(get(body, 'members') ?? []) };
}

function memberIds(v: unknown): string[] {
  const list = Array.isArray(v) ? v : [v];
  return list.map((m) => {
    const id = isObject(m) ? get(m, 'value') : m;
    if (typeof id !== 'string' || !id) throw scimInvalid('invalidValue', 'members must be a list of {"value": "<user id>"}');
    return id;
  });
}

// --- filters ---------------------------------------------------------------------------------------

/** One comparison of a filter (RFC 7644 3.4.2.2); `attr` is lower-case, sub-attribute after a dot. */
interface Comparison {
  attr: string;
  op: 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'pr';
  value?: string | boolean | null;
}
/** A filter: comparisons that must all hold (`and`). Entra ID and Okta send one `eq`; `or` and grouping are refused. */
export type Filter = Comparison[];

const TOKEN = /\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|([^\s()"]+))/y;

/**
 * Parses a filter such as `userName eq "alice@acme.example"`, `externalId eq "8f1..."`,
 * `emails[type eq "work"].value eq "a@b"`, `displayName eq "Ops" and externalId pr`. Attribute names
 * are case-insensitive, operators too. Unsupported forms are 400 invalidFilter.
 */
export function parseFilter(raw: string): Filter {
  const words: string[] = [];
  const s = raw.trim();
  for (let at = 0; at < s.length; ) {
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(s);
    if (!m) throw scimInvalid('invalidFilter', `cannot parse filter (an unterminated string?): ${raw}`);
    words.push(m[0].trim());
    at = TOKEN.lastIndex;
  }
  const out: Filter = [];
  let i = 0;
  while (i < words.length) {
    let attr = words[i++];
    // emails[type eq "work"].value: the bracket's own words were split apart; put them back together.
    if (attr.includes('[') && !attr.includes(']')) {
      while (i < words.length && !attr.includes(']')) attr += ` ${words[i++]}`;
    }
    if (!attr || attr === '(' || attr === ')') throw scimInvalid('invalidFilter', 'grouping with parentheses is not supported');
    const op = words[i++]?.toLowerCase();
    if (!op || !['eq', 'ne', 'co', 'sw', 'ew', 'pr'].includes(op)) throw scimInvalid('invalidFilter', `unsupported or missing operator in filter: ${raw}`);
    const c: Comparison = { attr: normaliseAttr(attr), op: op as Comparison['op'] };
    if (op !== 'pr') {
      const v = words[i++];
      if (v === undefined) throw scimInvalid('invalidFilter', `missing value in filter: ${raw}`);
      c.value = literal(v);
    }
    out.push(c);
    if (i < words.length) {
      const join = words[i++].toLowerCase();
      if (join !== 'and') throw scimInvalid('invalidFilter', `only "and" joins comparisons here (got "${join}")`);
      if (i >= words.length) throw scimInvalid('invalidFilter', `filter ends after "and": ${raw}`);
    }
  }
  if (!out.length) throw scimInvalid('invalidFilter', 'the filter is empty');
  return out;
}

function literal(v: string): string | boolean | null {
  if (v.startsWith('"')) {
    try {
      return JSON.parse(v) as string;
    } catch {
      throw scimInvalid('invalidFilter', `bad string literal ${v}`);
    }
  }
  if (/^(true|false)$/i.test(v)) return v.toLowerCase() === 'true';
  if (v.toLowerCase() === 'null') return null;
  throw scimInvalid('invalidFilter', `values are quoted strings, true, false or null (got ${v})`);
}

/** `Emails[Type eq "work"].Value` and `emails.value` both mean the user's email here (there is one). */
function normaliseAttr(attr: string): string {
  const a = stripCoreUrn(attr).toLowerCase();
  if (/^emails(\[.*\])?(\.value)?$/.test(a)) return 'emails.value';
  if (/^members(\[.*\])?(\.value)?$/.test(a)) return 'members.value';
  return a;
}

/** The attribute values a filter compares, per resource: lower-case names to values (lists for multi-valued). */
export type Filterable = Record<string, string | boolean | null | string[]>;

/** Whether a resource passes a filter. Strings compare ignoring case (userName, emails and displayName are caseExact false). */
export function matchesFilter(resource: Filterable, filter: Filter): boolean {
  return filter.every((c) => {
    if (!(c.attr in resource)) throw scimInvalid('invalidFilter', `cannot filter on ${c.attr}`);
    const got = resource[c.attr];
    const values = Array.isArray(got) ? got : [got];
    if (c.op === 'pr') return values.some((v) => v !== null && v !== '');
    const want = typeof c.value === 'string' ? c.value.toLowerCase() : c.value;
    const test = (v: string | boolean | null) => {
      const have = typeof v === 'string' ? v.toLowerCase() : v;
      if (c.op === 'eq') return have === want;
      if (c.op === 'ne') return have !== want;
      if (typeof have !== 'string' || typeof want !== 'string') return false;
      return c.op === 'co' ? have.includes(want) : c.op === 'sw' ? have.startsWith(want) : have.endsWith(want);
    };
    return c.op === 'ne' ? values.every(test) : values.some(test);
  });
}

/** RFC 7644 3.4.2.4 paging: startIndex is 1-based (less than 1 means 1), count at most `max` (negative: 0). */
export function paging(q: { startIndex?: unknown; count?: unknown }, max = 200): { start: number; count: number } {
  const int = (v: unknown, name: string): number | undefined => {
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n)) throw scimInvalid('invalidValue', `${name} must be an integer`);
    return n;
  };
  const start = Math.max(1, int(q.startIndex, 'startIndex') ?? 1);
  const count = Math.min(max, Math.max(0, int(q.count, 'count') ?? max));
  return { start, count };
}

// --- PATCH -------------------------------------------------------------------------------------------

export interface PatchOperation {
  op: 'add' | 'replace' | 'remove';
  path: string | null;
  value: unknown;
}

/** The operations of a PATCH body (RFC 7644 3.5.2); `op` in any case, as Entra ID capitalises it. */
export function parsePatch(body: unknown): PatchOperation[] {
  if (!isObject(body)) throw scimInvalid('invalidSyntax', 'the body must be a JSON object');
  const ops = get(body, 'Operations');
  if (!Array.isArray(ops) || !ops.length) throw scimInvalid('invalidSyntax', 'Operations must be a non-empty list');
  return ops.map((o, i) => {
    if (!isObject(o)) throw scimInvalid('invalidSyntax', `Operations[${i}] must be an object`);
    const op = String(get(o, 'op') ?? '').toLowerCase();
    if (op !== 'add' && op !== 'replace' && op !== 'remove') throw scimInvalid('invalidSyntax', `Operations[${i}].op must be add, replace or remove`);
    const path = get(o, 'path');
    if (path !== undefined && path !== null && typeof path !== 'string') throw scimInvalid('invalidPath', `Operations[${i}].path must be a string`);
    if (op === 'remove' && !path) throw scimInvalid('noTarget', `Operations[${i}]: remove needs a path`);
    return { op, path: path ? stripCoreUrn(path.trim()) : null, value: get(o, 'value') };
  });
}

/**
 * Applies PATCH operations to a user. Paths this service keeps: userName, displayName, externalId,
 * active, name(.givenName|.familyName|.formatted), emails (the email is userName: emails operations are
 * accepted and change nothing). Operations on attributes it does not keep (the enterprise extension,
 * phone numbers, title) are ignored, so an identity provider's default attribute mappings do not fail.
 */
export function applyUserPatch(state: ScimUserState, ops: PatchOperation[]): ScimUserState {
  const next = { ...state };
  const set = (path: string, value: unknown, op: PatchOperation['op']) => {
    const p = path.toLowerCase();
    const removing = op === 'remove';
    switch (p) {
      case 'username':
        if (removing) throw scimInvalid('mutability', 'userName cannot be removed');
        next.userName = userName(value);
        return;
      case 'displayname':
        next.displayName = removing ? '' : text('displayName', value);
        return;
      case 'externalid':
        next.externalId = removing ? null : text('externalId', value) || null;
        return;
      case 'active':
        if (removing) throw scimInvalid('mutability', 'active cannot be removed');
        next.active = bool('active', value);
        return;
      case 'name.givenname':
        next.givenName = removing ? '' : text('name.givenName', value);
        return;
      case 'name.familyname':
        next.familyName = removing ? '' : text('name.familyName', value);
        return;
      case 'name.formatted':
        if (!removing && text('name.formatted', value)) next.displayName = text('name.formatted', value);
        return;
      case 'name':
        if (removing) {
          next.givenName = next.familyName = '';
          return;
        }
        if (!isObject(value)) throw scimInvalid('invalidValue', 'name must be an object');
        for (const [k, v] of Object.entries(value)) set(`name.${k}`, v, op);
        return;
      default:
        // emails and everything not kept: accepted, ignored (see the doc comment).
        return;
    }
  };
  for (const o of ops) {
    if (o.path) {
      if (/[[\]]/.test(o.path) && !/^emails\[/i.test(o.path)) throw scimInvalid('invalidPath', `unsupported path ${o.path}`);
      set(o.path, o.value, o.op);
    } else {
      // No path: the value is an object of attributes (Okta's {"active": false}); dotted keys are paths.
      if (!isObject(o.value)) throw scimInvalid('invalidValue', 'an operation without a path needs an object value');
      for (const [k, v] of Object.entries(o.value)) set(stripCoreUrn(k), v, o.op);
    }
  }
  if (!next.displayName) next.displayName = [next.givenName, next.familyName].filter(Boolean).join(' ') || next.userName;
  return next;
}

/**
 * Applies PATCH operations to a group: displayName, externalId, and members (add a list, remove
 * `members[value eq "<id>"]` or a list, replace the whole list, remove all).
 */
export function applyGroupPatch(state: ScimGroupState, ops: PatchOperation[]): ScimGroupState {
  const next = { ...state, members: [...state.members] };
  const addMembers = (ids: string[]) => {
    for (const id of ids) if (!next.members.includes(id)) next.members.push(id);
  };
  const set = (path: string, value: unknown, op: PatchOperation['op']) => {
    const p = path.toLowerCase();
    if (p === 'displayname') {
      if (op === 'remove') throw scimInvalid('mutability', 'displayName cannot be removed');
      next.displayName = text('displayName', value, { allowEmpty: false });
    } else if (p === 'externalid') {
      next.externalId = op === 'remove' ? null : text('externalId', value) || null;
    } else if (p === 'members') {
      if (op === 'add') addMembers(memberIds(value));
      else if (op === 'replace') next.members = [...new Set(memberIds(value ?? []))];
      else if (value === undefined || value === null) next.members = [];
      else {
        const gone = new Set(memberIds(value));
        next.members = next.members.filter((m) => !gone.has(m));
      }
    } else if (p.startsWith('members[')) {
      const f = /^members\[\s*value\s+eq\s+"([^"]+)"\s*\]$/i.exec(path);
      if (!f) throw scimInvalid('invalidPath', `unsupported path ${path}`);
      if (op === 'remove') next.members = next.members.filter((m) => m !== f[1]);
      else addMembers([f[1]]);
    } else if (p !== 'id') {
      // Attributes a team does not keep are ignored (Okta sends {"id", "displayName"} as a replace value).
    }
  };
  for (const o of ops) {
    if (o.path) set(o.path, o.value, o.op);
    else {
      if (!isObject(o.value)) throw scimInvalid('invalidValue', 'an operation without a path needs an object value');
      for (const [k, v] of Object.entries(o.value)) set(stripCoreUrn(k), v, o.op);
    }
  }
  return next;
}

// --- rendering ---------------------------------------------------------------------------------------

export interface UserForScim {
  id: string;
  email: string;
  displayName: string;
  givenName: string;
  familyName: string;
  scimExternalId: string | null;
  deactivatedAt: Date | null;
  createdAt: Date;
  updatedAt?: Date | null;
}

export interface TeamForScim {
  id: string;
  name: string;
  scimExternalId: string | null;
  createdAt: Date;
  members: Array<{ userId: string; email: string }>;
}

/** A user as a SCIM User resource (RFC 7643 4.1); `base` is the SCIM root URL (…/scim/v2). */
export function renderUser(u: UserForScim, base: string) {
  return {
    schemas: [SCIM.user],
    id: u.id,
    ...(u.scimExternalId ? { externalId: u.scimExternalId } : {}),
    userName: u.email,
    displayName: u.displayName,
    name: { givenName: u.givenName, familyName: u.familyName, formatted: u.displayName },
    emails: [{ value: u.email, type: 'work', primary: true }],
    active: u.deactivatedAt === null,
    meta: { resourceType: 'User', created: u.createdAt.toISOString(), lastModified: (u.updatedAt ?? u.createdAt).toISOString(), location: `${base}/Users/${u.id}` },
  };
}

/** A team as a SCIM Group resource (RFC 7643 4.2); members left out when asked (Entra's excludedAttributes=members). */
export function renderGroup(t: TeamForScim, base: string, options: { members?: boolean } = {}) {
  return {
    schemas: [SCIM.group],
    id: t.id,
    ...(t.scimExternalId ? { externalId: t.scimExternalId } : {}),
    displayName: t.name,
    ...(options.members === false ? {} : { members: t.members.map((m) => ({ value: m.userId, display: m.email, $ref: `${base}/Users/${m.userId}` })) }),
    meta: { resourceType: 'Group', created: t.createdAt.toISOString(), lastModified: t.createdAt.toISOString(), location: `${base}/Groups/${t.id}` },
  };
}

/** What filters compare on a user. */
export const userFilterable = (u: UserForScim): Filterable => ({
  id: u.id,
  username: u.email,
  externalid: u.scimExternalId,
  displayname: u.displayName,
  'emails.value': [u.email],
  active: u.deactivatedAt === null,
  'name.givenname': u.givenName,
  'name.familyname': u.familyName,
});

/** What filters compare on a group. */
export const groupFilterable = (t: TeamForScim): Filterable => ({
  id: t.id,
  displayname: t.name,
  externalid: t.scimExternalId,
  'members.value': t.members.map((m) => m.userId),
});

/** Whether `excludedAttributes` (comma-separated) leaves out members. */
export const excludesMembers = (excluded: unknown): boolean =>
  typeof excluded === 'string' && excluded.split(',').some((a) => a.trim().toLowerCase() === 'members');

/** A ListResponse (RFC 7644 3.4.2) of one page of resources. */
export function listResponse<T>(all: T[], page: { start: number; count: number }) {
  const items = all.slice(page.start - 1, page.start - 1 + page.count);
  return { schemas: [SCIM.list], totalResults: all.length, startIndex: page.start, itemsPerPage: items.length, Resources: items };
}

/** The handle of a provisioned user: the email's local part, lower-case, the way sign-in derives it. */
export const handleBase = (email: string): string =>
  (email.split('@')[0].toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '') || 'user').slice(0, 56);
