import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { AuditRepo } from '../audit/audit.repo.js';
import type { AuditService } from '../audit/audit.service.js';
import { requirePermission, requireSystem } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { NotFoundError } from '../../kernel/errors.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import type { SessionsService } from '../sessions/sessions.service.js';
import type { SkillsRepo } from '../skills/skills.repo.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { SpendingRepo } from '../usage/spending.repo.js';
import {
  addCounts,
  anyPeriod,
  changedPeriods,
  cutoffs,
  effectivePeriods,
  fullBatch,
  noCounts,
  storedPeriods,
  type RetentionCounts,
  type RetentionKind,
  type RetentionPeriods,
} from './retention-fns.js';

/** The daily job enforcing every tenant's periods, and when it is queued (UTC, a quiet hour). */
export const RETENTION_JOB = 'retention-enforce';
export const RETENTION_CRON = '17 3 * * *';

/** Rows of each kind one transaction removes at most: a first run on a big table never holds a huge one. */
const ROW_BATCH = 2000;
/** Sessions looked up at a time (each is removed on its own: its runtime is called). */
const SESSION_BATCH = 50;

export interface RetentionView {
  /** The tenant's periods in days; null: kept forever. */
  periods: RetentionPeriods;
  /** The operator's floor for the audit log's period (AGENTWS_AUDIT_RETENTION_FLOOR_DAYS). */
  auditFloorDays: number;
}

export interface RetentionRunResult {
  tenantId: string;
  dryRun: boolean;
  periods: RetentionPeriods;
  /** Per kind, the moment before which records went (would go, on a dry run); null: kept. */
  cutoffs: Record<RetentionKind, Date | null>;
  /** What was removed (on a dry run: what would be). */
  removed: RetentionCounts;
  /** Old sessions left for the next run: a turn in flight, or their runtime could not be reached. */
  sessionsLeft: number;
}

export function createRetentionService(deps: {
  db: Database;
  tenants: TenantsRepo;
  sessionsRepo: SessionsRepo;
  /** The sessions capability's own removal, the same a person's erasure uses. */
  sessions: Pick<SessionsService, 'purge'>;
  skills: SkillsRepo;
  spending: SpendingRepo;
  auditRepo: AuditRepo;
  audit: AuditService;
  clock: Clock;
  auditFloorDays: number;
  /** Rows per transaction (tests make it small to see the batches). */
  rowBatch?: number;
}) {
  const { db, audit, clock, auditFloorDays } = deps;
  const rowBatch = deps.rowBatch ?? ROW_BATCH;

  async function tenantOrFail(tenantId: string) {
    const t = await deps.tenants.findById(db, tenantId);
    if (!t) throw new NotFoundError('tenant not found');
    return t;
  }

  /** Old sessions removed one by one; the owners whose runtime failed are not called again this run. */
  async function removeSessions(ctx: Ctx, tenantId: string, before: Date): Promise<{ removed: number; left: number }> {
    const seen = new Set<string>();
    const unreachable = new Set<string>();
    let removed = 0;
    let left = 0;
    for (;;) {
      const batch = (await deps.sessionsRepo.inactiveSince(db, tenantId, before, SESSION_BATCH + seen.size)).filter((s) => !seen.has(s.id));
      if (!batch.length) break;
      for (const s of batch) {
        seen.add(s.id);
        if (unreachable.has(s.ownerId)) {
          left++;
          continue;
        }
        try {
          const r = await deps.sessions.purge(ctx, { tenantId, id: s.id, reason: 'retention' });
          if (r === 'removed') removed++;
          else if (r === 'running') left++;
        } catch (err) {
          unreachable.add(s.ownerId);
          left++;
          ctx.log.warn({ err: (err as Error).message, sessionId: s.id }, 'retention could not remove a session from its runtime; the next run tries again');
        }
      }
    }
    return { removed, left };
  }

  const service = {
    /** The tenant's retention periods and the audit log's floor (admin.manage_tenant). */
    async show(ctx: Ctx): Promise<RetentionView> {
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      return { periods: storedPeriods((await tenantOrFail(tenantId)).settings), auditFloorDays };
    },

    /**
     * Changes the tenant's periods (admin.manage_tenant): days, or null to keep forever; keys left out keep
     * their value. An audit period under the operator's floor is refused (400 naming `audit` and the floor).
     * Stored in settings.retention; audited `retention.update` with the periods before and after.
     */
    async set(ctx: Ctx, change: Partial<Record<RetentionKind, number | null>>): Promise<RetentionView> {
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      return db.transaction(async (tx) => {
        const tenant = await deps.tenants.findById(tx, tenantId);
        if (!tenant) throw new NotFoundError('tenant not found');
        const before = storedPeriods(tenant.settings);
        const periods = changedPeriods(before, change, auditFloorDays);
        await deps.tenants.setSetting(tx, tenantId, 'retention', periods);
        await audit.record(tx, { ...ctx, tenantId }, { action: 'retention.update', target: `tenant:${tenantId}`, details: { before, after: periods } });
        return { periods, auditFloorDays };
      });
    },

    /**
     * Enforces the tenant's periods now (admin.manage_tenant; the daily job runs it for every tenant):
     * sessions inactive for longer than theirs are removed one by one with sessions.purge (rows, runtime
     * store, each audited on its own), then usage records, trajectories and audit entries older than
     * theirs in rounds of bounded deletes. Each round is one transaction holding its deletes and its own
     * `retention.run` audit entry with what it removed per kind (the first round's counts the sessions
     * removed just before). A dry run counts what would go and removes nothing (and is not audited).
     */
    async run(ctx: Ctx, input: { dryRun?: boolean } = {}): Promise<RetentionRunResult> {
      const tenantId = requirePermission(ctx, 'admin.manage_tenant');
      const tenant = await tenantOrFail(tenantId);
      const periods = effectivePeriods(storedPeriods(tenant.settings), auditFloorDays);
      const cut = cutoffs(clock.now(), periods);
      const base = { tenantId, periods, cutoffs: cut };
      if (input.dryRun) {
        const [sessions, usage, trajectories, auditN] = await Promise.all([
          cut.sessions ? deps.sessionsRepo.countInactiveSince(db, tenantId, cut.sessions) : 0,
          cut.usage ? deps.spending.countUsageBefore(db, tenantId, cut.usage) : 0,
          cut.trajectories ? deps.skills.countTrajectoriesBefore(db, tenantId, cut.trajectories) : 0,
          cut.audit ? deps.auditRepo.countBefore(db, tenantId, cut.audit) : 0,
        ]);
        return { ...base, dryRun: true, removed: { sessions, usage, trajectories, audit: auditN }, sessionsLeft: 0 };
      }
      const tctx = { ...ctx, tenantId };
      const s = cut.sessions ? await removeSessions(tctx, tenantId, cut.sessions) : { removed: 0, left: 0 };
      let total = noCounts();
      let round = 0;
      let more = true;
      while (more) {
        round++;
        const removed = await db.transaction(async (tx) => {
          const r: RetentionCounts = {
            sessions: round === 1 ? s.removed : 0,
            usage: cut.usage ? await deps.spending.removeUsageBefore(tx, tenantId, cut.usage, rowBatch) : 0,
            trajectories: cut.trajectories ? await deps.skills.removeTrajectoriesBefore(tx, tenantId, cut.trajectories, rowBatch) : 0,
            audit: cut.audit ? await deps.auditRepo.removeBefore(tx, tenantId, cut.audit, rowBatch) : 0,
          };
          await audit.record(tx, tctx, {
            action: 'retention.run',
            target: `tenant:${tenantId}`,
            details: { removed: r, round, periods, cutoffs: cut, ...(round === 1 && s.left ? { sessionsLeft: s.left } : {}) },
          });
          return r;
        });
        total = addCounts(total, removed);
        more = fullBatch({ ...removed, sessions: 0 }, rowBatch);
      }
      ctx.log.info({ tenantId, removed: total, sessionsLeft: s.left, rounds: round }, 'retention enforced');
      return { ...base, dryRun: false, removed: total, sessionsLeft: s.left };
    },

    /**
     * The daily job: every tenant with a period set, one after another; a tenant that fails is logged and
     * the others still run. Returns what was removed per tenant and in all (the job's logged result).
     */
    async runAll(ctx: Ctx): Promise<{ tenants: Array<{ tenantId: string; slug: string; removed: RetentionCounts; sessionsLeft: number } | { tenantId: string; slug: string; error: string }>; removed: RetentionCounts }> {
      requireSystem(ctx, 'enforcing every tenant\'s retention');
      const out: Array<{ tenantId: string; slug: string; removed: RetentionCounts; sessionsLeft: number } | { tenantId: string; slug: string; error: string }> = [];
      let total = noCounts();
      for (const t of await deps.tenants.withRetention(db)) {
        if (!anyPeriod(storedPeriods(t.settings))) continue;
        try {
          const r = await service.run({ ...ctx, tenantId: t.id });
          out.push({ tenantId: t.id, slug: t.slug, removed: r.removed, sessionsLeft: r.sessionsLeft });
          total = addCounts(total, r.removed);
        } catch (err) {
          ctx.log.error({ err: (err as Error).message, tenantId: t.id }, 'retention failed for a tenant');
          out.push({ tenantId: t.id, slug: t.slug, error: (err as Error).message });
        }
      }
      return { tenants: out, removed: total };
    },
  };
  return service;
}
