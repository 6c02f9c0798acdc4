import type { Queryable, Tx } from '../../db/database.js';
import { actorString, type Ctx } from '../../kernel/context.js';
import type { EventBus } from '../../kernel/events.js';
import { isUuid } from '../../lib/ids.js';
import { requirePermission } from '../../kernel/authz.js';
import { ValidationError } from '../../kernel/errors.js';
import type { AuditEntry, AuditRepo } from './audit.repo.js';

export const AUDIT_LIMIT_DEFAULT = 50;
export const AUDIT_LIMIT_MAX = 500;

export interface AuditQueryInput {
  action?: string;
  userId?: string;
  /** A person by id, email, handle or display name (whole values, any case): entries by them or about them. */
  user?: string;
  since?: string | Date;
  until?: string | Date;
  limit?: number;
  /** Only entries written after this entry (by its stored time), oldest first. */
  afterId?: string;
}

export const AUDIT_CHANNEL = 'audit.appended';

export interface AuditInput {
  action: string;
  target: string;
  sessionId?: string | null;
  durationMs?: number | null;
  details?: Record<string, unknown>;
  /** Defaults to ctx.tenantId; set when the action creates the tenant it belongs to. */
  tenantId?: string | null;
  /** Defaults to the acting user; set when the system records something a user's agent did. */
  userId?: string | null;
}

/**
 * Writes audit entries. Callers pass the transaction of the action they record, so an entry exists if
 * and only if the action committed. Subscribers (e.g. `aws audit tail --follow`) hear of new entries
 * after commit through the event bus.
 */
/** A person an entry names (its actor or its target), as the dashboard shows them. */
export interface AuditPerson {
  id: string;
  name: string;
  email: string;
}
export type NamedAuditEntry = AuditEntry & { actorPerson: AuditPerson | null; targetPerson: AuditPerson | null };

/** The people of a tenant, as the audit log names them (the users repo's). */
export interface AuditPeople {
  namesOf(q: Queryable, tenantId: string, ids: string[]): Promise<Array<{ id: string; handle: string; email: string; displayName: string }>>;
  matching(q: Queryable, tenantId: string, text: string): Promise<string[]>;
}

const USER_REF = /^user:([0-9a-f-]{36})$/i;

export function createAuditService(deps: { repo: AuditRepo; bus: EventBus; db: Queryable; people?: AuditPeople }) {
  /** Each entry's actor and target, when a person of the entry's tenant, by name and email. */
  async function named(entries: AuditEntry[]): Promise<NamedAuditEntry[]> {
    const byTenant = new Map<string, Set<string>>();
    for (const e of entries) {
      if (!e.tenantId) continue;
      const ids = byTenant.get(e.tenantId) ?? new Set<string>();
      for (const ref of [e.actor, e.target]) {
        const m = USER_REF.exec(ref);
        if (m) ids.add(m[1].toLowerCase());
      }
      byTenant.set(e.tenantId, ids);
    }
    const people = new Map<string, AuditPerson>();
    for (const [tenantId, ids] of byTenant) {
      if (!ids.size || !deps.people) continue;
      // Only people of the entry's own tenant: an id of another tenant stays an id.
      for (const u of await deps.people.namesOf(deps.db, tenantId, [...ids])) people.set(`${tenantId}:${u.id}`, { id: u.id, name: u.displayName || u.handle, email: u.email });
    }
    const of = (e: AuditEntry, ref: string) => {
      const m = USER_REF.exec(ref);
      return (m && e.tenantId && people.get(`${e.tenantId}:${m[1].toLowerCase()}`)) || null;
    };
    return entries.map((e) => ({ ...e, actorPerson: of(e, e.actor), targetPerson: of(e, e.target) }));
  }


  return {
    /**
     * Audit entries of the caller's tenant, newest first (admin.view_audit_log). The operator may omit
     * the tenant to read every tenant's entries. `count` is the number of entries returned.
     */
    async query(ctx: Ctx, input: AuditQueryInput): Promise<{ entries: NamedAuditEntry[]; count: number }> {
      const tenantId = ctx.actor.kind === 'system' && !ctx.tenantId ? null : requirePermission(ctx, 'admin.view_audit_log');
      const limit = input.limit ?? AUDIT_LIMIT_DEFAULT;
      const problems: string[] = [];
      if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_LIMIT_MAX) problems.push(`limit must be a whole number from 1 to ${AUDIT_LIMIT_MAX}`);
      const since = toDate(input.since, 'since', problems);
      const until = toDate(input.until, 'until', problems);
      if (input.userId !== undefined && !isUuid(input.userId)) problems.push('userId must be a UUID');
      if (input.afterId !== undefined && !isUuid(input.afterId)) problems.push('afterId must be a UUID');
      if (since && until && since > until) problems.push('since must not be after until');
      if (problems.length) throw new ValidationError(problems.join('; '), { details: { problems } });
      let people: string[] | undefined;
      if (input.user?.trim()) {
        if (!tenantId || !deps.people) throw new ValidationError('user: name a tenant to find a person in', { details: { field: 'user' } });
        people = await deps.people.matching(deps.db, tenantId, input.user);
        if (!people.length) throw new ValidationError(`user: no one in this workspace has the id, email, handle or name "${input.user.trim()}"`, { details: { field: 'user' } });
      }
      const entries = await deps.repo.query(deps.db, { tenantId, action: input.action || undefined, userId: input.userId, people, since, until, afterId: input.afterId, limit });
      return { entries: await named(entries), count: entries.length };
    },

    /**
     * How many distinct values `details.<field>` took in the entries the caller (ctx's actor) wrote for an
     * action and target since a moment: e.g. the distinct wrong pairing codes a caller tried on a gateway.
     */
    async distinctDetailCount(q: Queryable, ctx: Ctx, f: { tenantId: string; action: string; target: string; field: string; since: Date }): Promise<number> {
      return deps.repo.countDistinctDetail(q, { ...f, actor: actorString(ctx.actor) });
    },

    /** Records one action in the caller's transaction. */
    async record(tx: Tx, ctx: Ctx, input: AuditInput): Promise<string> {
      const tenantId = input.tenantId === undefined ? ctx.tenantId : input.tenantId;
      const { id } = await deps.repo.insert(tx, {
        tenantId,
        userId: input.userId !== undefined ? input.userId : ctx.actor.kind === 'user' ? ctx.actor.userId : null,
        actor: actorString(ctx.actor),
        action: input.action,
        target: input.target,
        sessionId: input.sessionId,
        channel: ctx.channel,
        durationMs: input.durationMs,
        details: { requestId: ctx.requestId, ...input.details },
      });
      await deps.bus.publish(AUDIT_CHANNEL, { id, tenantId }, tx);
      return id;
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;

function toDate(value: string | Date | undefined, name: string, problems: string[]): Date | undefined {
  if (value === undefined || value === '') return undefined;
  if (value instanceof Date) return value;
  // ISO 8601 only: a date (2026-01-31) or a date-time with an offset or Z.
  const ok = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(value);
  const d = new Date(value);
  if (!ok || Number.isNaN(d.getTime())) {
    problems.push(`${name} must be an ISO 8601 date or date-time, got "${value}"`);
    return undefined;
  }
  return d;
}
