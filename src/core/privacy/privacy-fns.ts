import { createHmac } from 'node:crypto';
import { SHARED_MEMORY_POLICIES, type PrivacySettings, type SharedMemoryPolicy } from '../tenants/tenant-settings-fns.js';

/**
 * The rules of a person's data on request, pure: the pseudonym an erased person is
 * kept under, how an audit entry is scrubbed of them, the tenant's policy for their shared memories,
 * and what the export archive holds (docs/admin/audit-and-data.md lists the same files).
 */

/** Who is being exported or erased, as the scrubbing rules need them. */
export interface Person {
  id: string;
  email: string;
  handle: string;
  displayName: string;
}

/**
 * The stable pseudonym of an erased person: `erased:<12 hex>`, an HMAC of the tenant and user id under
 * the appliance's encryption key. Stable (every entry about them carries the same one, so the audit log
 * still tells one person's actions together) but not recomputable from a user id someone kept
 * elsewhere without the appliance's key.
 */
export function pseudonymOf(key: string, tenantId: string, userId: string): string {
  return `erased:${digest(key, tenantId, userId).slice(0, 12)}`;
}

/**
 * The same person as a uuid (for uuid columns: usage records and monthly totals), so the organisation's
 * spend record still adds their usage up as one unnamed person. Shaped as an RFC 9562 version-8 uuid.
 */
export function pseudonymousUuid(key: string, tenantId: string, userId: string): string {
  const h = digest(key, tenantId, userId).slice(0, 32).split('');
  h[12] = '8';
  h[16] = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  const s = h.join('');
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20, 32)}`;
}

function digest(key: string, tenantId: string, userId: string): string {
  return createHmac('sha256', key).update(`person-erasure\0${tenantId}\0${userId}`).digest('hex');
}

/** The part of an audit entry that can name a person. */
export interface AuditPersonFields {
  userId: string | null;
  actor: string;
  target: string;
  details: Record<string, unknown>;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Where an email address is a whole token in text: not preceded by a character an address's local part
 * may hold (`val@x` is not `al@x`, nor is `sal+al@x`), and not followed by more of a domain (`al@x.test`
 * is not in `al@x.test.evil`, `al@x.testing` or `al@x.test-corp`; a full stop ending a sentence is not
 * part of it). Case-insensitive, as addresses are compared everywhere here.
 */
const emailToken = (email: string) => new RegExp(`(?<![A-Za-z0-9._%+\\-])${escape(email)}(?![A-Za-z0-9_\\-]|\\.[A-Za-z0-9_\\-])`, 'gi');
/** Where a uuid is a whole id in text: not inside a longer run of letters, digits and dashes. */
const idToken = (id: string) => new RegExp(`(?<![0-9A-Za-z-])${escape(id)}(?![0-9A-Za-z-])`, 'gi');

/**
 * An audit entry with the person replaced by their pseudonym: `user_id` cleared (a uuid column cannot hold
 * the pseudonym; `actor` carries it), `actor`/`target` `user:<id>` -> the pseudonym, their id and email
 * replaced where they occur as whole tokens in a string (an email in any case; never inside another
 * address or id: erasing `al@acme.test` leaves `val@acme.test` and `al@acme.test.evil` as they are), and
 * strings that are exactly their handle or display name replaced (only exact values: a short handle such
 * as `al` inside other words is not them). Object keys are scrubbed alike (maps keyed by user id).
 * `changed` says whether anything was.
 */
export function scrubAuditEntry(e: AuditPersonFields, p: Person, pseudonym: string): AuditPersonFields & { changed: boolean } {
  const patterns = [...(p.id ? [idToken(p.id)] : []), ...(p.email ? [emailToken(p.email)] : [])];
  const exact = new Set([p.handle, p.displayName, p.email].filter((s) => s.trim().length > 0).map((s) => s.toLowerCase()));
  const scrub = (s: string): string => {
    if (s === `user:${p.id}`) return pseudonym;
    if (exact.has(s.toLowerCase())) return pseudonym;
    let out = s;
    for (const re of patterns) out = out.replace(re, pseudonym);
    return out;
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrub(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [scrub(k), walk(x)]));
    return v;
  };
  const out = {
    userId: e.userId === p.id ? null : e.userId,
    actor: scrub(e.actor),
    target: scrub(e.target),
    details: walk(e.details) as Record<string, unknown>,
  };
  const changed = out.userId !== e.userId || out.actor !== e.actor || out.target !== e.target || JSON.stringify(out.details) !== JSON.stringify(e.details);
  return { ...out, changed };
}

/**
 * Whether an audit entry is about the person: recorded as theirs, acted by them, or naming them as
 * erasure would rewrite (their id or email as a whole token, their handle or name as a whole value).
 * One rule for both: an export carries exactly the entries an erasure rewrites. The database's
 * candidates (audit.repo.ts aboutPerson) are matched loosely and decided here.
 */
export function isAboutPerson(e: AuditPersonFields, p: Person): boolean {
  return e.userId === p.id || scrubAuditEntry(e, p, '\u0000').changed;
}

/** What erasure does with shared memories unless the tenant says otherwise (tenants/tenant-settings-fns.ts SHARED_MEMORY_POLICIES). */
export const DEFAULT_SHARED_MEMORY_POLICY: SharedMemoryPolicy = 'remove';

/** The policy a tenant's stored settings name (the default when unset or unknown). */
export function sharedMemoryPolicy(settings: Record<string, unknown>): SharedMemoryPolicy {
  const p = (settings.privacy as PrivacySettings | undefined)?.sharedMemoriesOnErase;
  return p && SHARED_MEMORY_POLICIES.includes(p) ? p : DEFAULT_SHARED_MEMORY_POLICY;
}

/** The placeholder user who keeps an erased person's shared memories under `keep-anonymous`. */
export function placeholderUser(pseudonym: string): { handle: string; email: string; displayName: string } {
  const tag = pseudonym.slice('erased:'.length);
  return { handle: `erased-${tag}`, email: `erased-${tag}@erased.invalid`, displayName: `Erased person (${pseudonym})` };
}

/** The export archive's format; a reader checks it. */
const EXPORT_FORMAT = 1;

/**
 * Every file of the export archive and what it holds (manifest.json repeats these with counts; 
 * docs/admin/audit-and-data.md, "A person's data", lists the same). Session transcripts are one file per session.
 */
export const EXPORT_FILES = {
  'profile.json': 'The person: id, handle, email, display name, identity-provider subject, created; their tenant.',
  'roles.json': 'Their role names.',
  'teams.json': 'The teams they are a member of.',
  'sessions.json': 'Their agent sessions (also deleted ones still held): title, template, model, channel, times.',
  'sessions/<id>.json': "One session's transcript, as GET /v1/sessions/:id/messages shows it.",
  'memories.json': 'Memories they wrote, private and shared, with visibility and status.',
  'trajectories.json': 'Their recorded turns (request, answer, abstract tool sequence, outcome) that learned skills are built from.',
  'skills.json': "Skills learnt from their trajectories: each version whose sources include theirs, with its text.",
  'git-connections.json': 'Their connected git accounts: host, account name, scopes, when (never tokens).',
  'usage.json': 'Their model usage records: model, tokens, cost, time.',
  'audit.json': 'Audit entries about them: as the actor, as the user recorded, or naming them as the target.',
} as const;

export type ExportCounts = Record<keyof typeof EXPORT_FILES, number>;

/** The manifest of an export archive (the archive writer adds each entry's size and sha256). */
export function exportManifest(input: { createdAt: Date; appVersion: string; tenant: { id: string; slug: string }; userId: string; counts: ExportCounts; warnings: string[] }) {
  return {
    format: EXPORT_FORMAT,
    kind: 'agentws-person-export',
    createdAt: input.createdAt.toISOString(),
    appVersion: input.appVersion,
    tenant: input.tenant,
    userId: input.userId,
    files: Object.fromEntries(Object.entries(EXPORT_FILES).map(([name, description]) => [name, { description, count: input.counts[name as keyof ExportCounts] }])),
    warnings: input.warnings,
  };
}
