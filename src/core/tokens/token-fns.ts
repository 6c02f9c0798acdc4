import { createHash, randomBytes } from 'node:crypto';
import type { RbacPermissions } from '../../kernel/permissions.js';
import { TOKEN_MAX_DAYS_LIMIT } from '../tenants/tenant-settings-fns.js';

/**
 * Personal access tokens' pure rules: their format, their scopes and what the scopes leave of a person's
 * permissions. The service and authentication (auth.service.ts) apply them.
 */

/** Every personal access token starts with this, so authentication routes it without trying it as a JWT. */
const PAT_PREFIX = 'agentws_pat_';
/** How much of a token lists show (the fixed prefix and six random characters): enough to recognise it. */
const PAT_DISPLAY_CHARS = PAT_PREFIX.length + 6;

export const TOKEN_SCOPES = ['read', 'sessions', 'memories', 'admin'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/** Tenant setting `tokens.maxDays`: the longest lifetime a token may be created with (at most TOKEN_MAX_DAYS_LIMIT). */
const TOKEN_MAX_DAYS_DEFAULT = 90;
export const TOKEN_NAME_MAX = 100;

/** A new token: the value (shown once), its hash (stored) and its display prefix. */
export function newPersonalToken(): { token: string; hash: string; prefix: string } {
  const token = PAT_PREFIX + randomBytes(32).toString('base64url');
  return { token, hash: hashToken(token), prefix: token.slice(0, PAT_DISPLAY_CHARS) };
}

export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export const isPersonalToken = (token: string) => token.startsWith(PAT_PREFIX);

// No method said: not safe (the narrower answer; every HTTP request says its method).
export const isSafeMethod = (method: string | undefined) => method === 'GET' || method === 'HEAD';

/** The tenant's maximum lifetime in days: settings.tokens.maxDays when set and valid, else 90. */
export function maxDaysOf(settings: Record<string, unknown>): number {
  const v = (settings.tokens as { maxDays?: unknown } | undefined)?.maxDays;
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= TOKEN_MAX_DAYS_LIMIT ? v : TOKEN_MAX_DAYS_DEFAULT;
}

const anyTrue = (group: Record<string, unknown>) => Object.values(group).some((v) => v === true);

/**
 * Whether a person with these permissions holds a scope: `read` everyone (their own sessions and what
 * their roles let them read), the others when any permission of their group is held.
 */
function holdsScope(p: RbacPermissions, scope: TokenScope): boolean {
  switch (scope) {
    case 'read':
      return true;
    case 'sessions':
      return anyTrue(p.agents);
    case 'memories':
      return anyTrue(p.memory);
    case 'admin':
      return anyTrue(p.admin);
  }
}

/** The scopes of the list a person does not hold (empty: they may create the token). */
export const scopesBeyond = (p: RbacPermissions, scopes: readonly TokenScope[]) => scopes.filter((s) => !holdsScope(p, s));

/**
 * What a token may do in one request: the person's current permissions, kept only where the scopes
 * reach. `read` keeps everything for GET and HEAD (any read the person may make) and nothing else;
 * `sessions` keeps agents.* and the tool lists (what an agent runs), `memories` memory.*, `admin`
 * admin.*, for any method. Cost limits always stay: they restrict, they do not grant.
 */
export function maskPermissions(p: RbacPermissions, scopes: readonly TokenScope[], safe: boolean): RbacPermissions {
  if (safe && scopes.includes('read')) return p;
  const keep = (scope: TokenScope) => scopes.includes(scope);
  const off = <G extends Record<string, unknown>>(g: G): G => Object.fromEntries(Object.entries(g).map(([k, v]) => [k, typeof v === 'boolean' ? false : v])) as G;
  return {
    agents: keep('sessions') ? p.agents : { ...off(p.agents), use_templates: [] },
    memory: keep('memories') ? p.memory : off(p.memory),
    tools: keep('sessions') ? p.tools : { allowed: [], denied: p.tools.denied },
    models: keep('sessions') ? p.models : { allowed: [] },
    admin: keep('admin') ? p.admin : off(p.admin),
    cost: p.cost,
  };
}

/** Whether a request's method is refused outright: a token with only `read` makes GET and HEAD requests only. */
export const refusesMethod = (scopes: readonly TokenScope[], method: string | undefined) => !isSafeMethod(method) && scopes.every((s) => s === 'read');

/** The hour a moment falls in (token use is summarised per hour). */
export const hourOf = (d: Date) => new Date(Math.floor(d.getTime() / 3_600_000) * 3_600_000);
