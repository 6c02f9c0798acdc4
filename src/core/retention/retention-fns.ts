import { ValidationError } from '../../kernel/errors.js';

/**
 * The rules of retention, pure: what a tenant's periods are, which are allowed, and the
 * moment before which each kind of record goes. A period is a whole number of days; null (or absent)
 * keeps the records forever, as the appliance always did.
 */

export const RETENTION_KINDS = ['sessions', 'usage', 'trajectories', 'audit'] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];
export type RetentionPeriods = Record<RetentionKind, number | null>;
export type RetentionCounts = Record<RetentionKind, number>;

/** Longest period that may be set (a hundred years): beyond it "keep" says the same thing. */
export const MAX_RETENTION_DAYS = 36_500;
const DAY_MS = 86_400_000;

export const keepEverything = (): RetentionPeriods => ({ sessions: null, usage: null, trajectories: null, audit: null });
export const noCounts = (): RetentionCounts => ({ sessions: 0, usage: 0, trajectories: 0, audit: 0 });

/** The periods stored in a tenant's settings (settings.retention); anything unreadable keeps forever. */
export function storedPeriods(settings: Record<string, unknown> | null | undefined): RetentionPeriods {
  const raw = (settings?.retention ?? {}) as Record<string, unknown>;
  const out = keepEverything();
  for (const k of RETENTION_KINDS) {
    const v = raw[k];
    if (typeof v === 'number' && Number.isInteger(v) && v >= 1) out[k] = v;
  }
  return out;
}

/**
 * A change of periods checked (400 naming the field): whole days from 1 to MAX_RETENTION_DAYS, or null
 * to keep forever; the audit log's period not under the operator's floor. Keys left out keep their value.
 */
export function changedPeriods(current: RetentionPeriods, change: Partial<Record<RetentionKind, number | null>>, auditFloorDays: number): RetentionPeriods {
  const out = { ...current };
  for (const [k, v] of Object.entries(change)) {
    if (!(RETENTION_KINDS as readonly string[]).includes(k)) throw new ValidationError(`${k}: not a retention period (one of ${RETENTION_KINDS.join(', ')})`, { details: { field: k } });
    if (v === undefined) continue;
    const kind = k as RetentionKind;
    if (v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_RETENTION_DAYS)) {
      throw new ValidationError(`${kind}: a whole number of days from 1 to ${MAX_RETENTION_DAYS}, or null to keep forever`, { details: { field: kind } });
    }
    if (kind === 'audit' && v !== null && v < auditFloorDays) {
      throw new ValidationError(`audit: ${v} days is under this appliance's floor for the audit log, ${auditFloorDays} days`, {
        details: { field: 'audit', floorDays: auditFloorDays },
        hint: 'The floor is the operator\'s (AGENTWS_AUDIT_RETENTION_FLOOR_DAYS); choose at least that many days, or keep the audit log forever.',
      });
    }
    out[kind] = v;
  }
  return out;
}

/**
 * The periods the job applies: the stored ones, except that an audit period stored under a floor the
 * operator raised since is taken as the floor (never less).
 */
export function effectivePeriods(p: RetentionPeriods, auditFloorDays: number): RetentionPeriods {
  return { ...p, audit: p.audit === null ? null : Math.max(p.audit, auditFloorDays) };
}

/** Per kind, the moment before which records go (last activity for sessions, the record's time otherwise); null: kept. */
export function cutoffs(now: Date, p: RetentionPeriods): Record<RetentionKind, Date | null> {
  const at = (days: number | null) => (days === null ? null : new Date(now.getTime() - days * DAY_MS));
  return { sessions: at(p.sessions), usage: at(p.usage), trajectories: at(p.trajectories), audit: at(p.audit) };
}

/** Whether any kind has a period (a tenant with none is skipped by the job). */
export const anyPeriod = (p: RetentionPeriods): boolean => RETENTION_KINDS.some((k) => p[k] !== null);

/**
 * A period as written on the command line: `90d` or `90` (days), `12w` (weeks), `2y` (365-day years), or
 * `keep` / `forever` (null). Throws a ValidationError naming the flag.
 */
export function parsePeriod(text: string, field: string): number | null {
  const t = text.trim().toLowerCase();
  if (t === 'keep' || t === 'forever') return null;
  const m = /^(\d{1,6})\s*([dwy]?)$/.exec(t);
  if (!m) throw new ValidationError(`${field}: "${text}" is not a period (e.g. 90d, 12w, 2y, or keep)`, { details: { field } });
  const n = Number(m[1]) * (m[2] === 'w' ? 7 : m[2] === 'y' ? 365 : 1);
  if (n < 1 || n > MAX_RETENTION_DAYS) throw new ValidationError(`${field}: from 1 day to ${MAX_RETENTION_DAYS} days, or keep`, { details: { field } });
  return n;
}

/** A period for people: `90 days`, or `kept forever`. */
export const describePeriod = (days: number | null): string => (days === null ? 'kept forever' : `${days} day${days === 1 ? '' : 's'}`);

export function addCounts(a: RetentionCounts, b: Partial<RetentionCounts>): RetentionCounts {
  const out = { ...a };
  for (const k of RETENTION_KINDS) out[k] += b[k] ?? 0;
  return out;
}

/** Whether a round of bounded deletes may have left more behind (it removed a full batch of some kind). */
export const fullBatch = (removed: Partial<RetentionCounts>, batch: number): boolean => RETENTION_KINDS.some((k) => (removed[k] ?? 0) >= batch);
