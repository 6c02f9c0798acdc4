import type { Database, Queryable } from '../../db/database.js';
import { systemCtx } from '../../kernel/context.js';
import { silentLogger, type Logger } from '../../kernel/logger.js';
import type { AuditService } from '../audit/audit.service.js';
import { AppError } from '../../kernel/errors.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { formatSize } from '../../lib/size.js';
import type { LimitsStatus, RuntimeOwner, RuntimeUsage } from './host/runtime-host.js';
import { effectiveQuotaBytes, overQuota, runtimeMemoryDefault, type LimitNotice } from './host/runtime-limits-fns.js';
import type { RuntimeRepo } from './runtime.repo.js';

/**
 * The control plane's side of the runtimes' limits: what every host is told to apply (each
 * runtime's memory and process limits, the size of its /tmp), each person's workspace quota (their
 * tenant's settings.workspace.quotaMb, else AGENTWS_WORKSPACE_QUOTA), the turns refused while a workspace
 * is past it, and what runner hosts report of their runtimes (written where status reads it).
 */

/** A turn refused: the person's files are past their quota (measured by the host that runs their agent). */
class WorkspaceQuotaError extends AppError {
  readonly status = 409;
  constructor(usedBytes: number, quotaBytes: number) {
    super(`your workspace uses ${formatSize(usedBytes)}, past its quota of ${formatSize(quotaBytes)}: new turns wait until it is under it`, 'workspace_quota_exceeded', {
      details: { usedBytes, quotaBytes },
      hint: 'An admin can raise the quota (settings.workspace.quotaMb: PATCH /v1/admin/tenant, or `npx aws tenant quota`); files an operator removes from the workspace count at its next measure (when the agent next starts).',
    });
  }
}

/** A tenant's settings.workspace, as stored. */
interface WorkspaceSettings {
  /** The quota of each of the tenant's people, in MiB (null or absent: the operator's default). */
  quotaMb?: number | null;
}

/** What a runner's sync answer says of its runtimes' limits (runner-agent.ts /sync). */
export interface RunnerLimitsReport {
  capacity: number;
  resident: number;
  frozen?: number;
  pagedOut?: number;
  starting?: number;
  busy: number;
  runtimesMemoryBytes?: number;
  memory?: { totalBytes: number; availableBytes: number };
  limits?: LimitsStatus & { freezer?: string | null; freezerUnavailable?: string | null };
  disk?: { totalBytes: number; freeBytes: number } | null;
  usage?: Array<Omit<RuntimeUsage, 'tenantId'>>;
}

export function createRuntimeLimits(deps: {
  db: Database;
  repo: RuntimeRepo;
  /** A tenant's settings (tenants.repo.ts findById: described here, as the tenants' settings use the runtime host's egress rules). */
  tenants: { findById(q: Queryable, id: string): Promise<{ settings: Record<string, unknown> } | null> };
  config: {
    memoryMax: number | 'auto' | null;
    pidsMax: number | null;
    tmpBytes: number;
    workspaceQuotaBytes: number | null;
  };
  /** The host's memory (bytes): what auto sizes each runtime's memory limit from. */
  hostMemoryBytes: number;
  /** Audits a limit met (its tenant's admins see it), if given. */
  audit?: Pick<AuditService, 'record'>;
  /** Tells the person (turn-runner.ts limitReached: the streams of their turns). */
  tell?: (owner: RuntimeOwner, notice: LimitNotice) => Promise<unknown>;
  log?: Logger;
}) {
  const { db, repo } = deps;
  const quotas = createPromiseCache<number | null>({ ttlMs: 5000, max: 10_000 });
  /** When each person's limit of each kind was last audited. */
  const audited = new Map<string, number>();

  /** A person's workspace quota (bytes; null: none): their tenant's setting, else the operator's default. */
  function quotaOf(owner: RuntimeOwner): Promise<number | null> {
    return quotas.get(owner.tenantId, async () => {
      const tenant = await deps.tenants.findById(db, owner.tenantId);
      const workspace = (tenant?.settings?.workspace ?? null) as WorkspaceSettings | null;
      return effectiveQuotaBytes(workspace?.quotaMb, deps.config.workspaceQuotaBytes);
    });
  }

  return {
    /** What each runtime of a host is held to (runtime-host.ts deps.limits). */
    host: {
      memoryMaxBytes: deps.config.memoryMax === 'auto' ? runtimeMemoryDefault(deps.hostMemoryBytes) : deps.config.memoryMax,
      pidsMax: deps.config.pidsMax,
      tmpBytes: deps.config.tmpBytes,
    },

    /** Null when there is no quota at all (AGENTWS_WORKSPACE_QUOTA=off and no tenant setting can apply). */
    quotaOf,

    /**
     * A runtime met one of its limits (its host says so: this serve's own, or a runner's notice for a user
     * it holds): the person is told on their turn's stream, and it is audited (`runtime.limit_reached`,
     * at most once a minute per person and kind: a fork bomb meets its limit again and again).
     */
    async reached(owner: RuntimeOwner, notice: LimitNotice): Promise<void> {
      const key = `${owner.userId}:${notice.kind}`;
      const now = Date.now();
      if (deps.audit && (audited.get(key) ?? 0) < now - 60_000) {
        audited.set(key, now);
        if (audited.size > 10_000) audited.clear();
        const ctx = systemCtx(deps.log ?? silentLogger, { name: 'runtime-limits', tenantId: owner.tenantId, channel: 'agent' });
        await db
          .transaction((tx) => deps.audit!.record(tx, ctx, { action: 'runtime.limit_reached', target: `user:${owner.userId}`, userId: owner.userId, details: { ...notice } }))
          .catch((err) => deps.log?.error({ err: (err as Error).message }, 'could not audit a runtime limit'));
      }
      await deps.tell?.(owner, notice);
    },

    /** A tenant's quota setting changed: the next start or measure sees it at once. */
    forget(tenantId: string): void {
      quotas.delete(tenantId);
    },

    /**
     * Before a turn: refused (WorkspaceQuotaError) while the person's files, as their host last measured
     * them, are past their quota now. A quota raised since lets the turn through at once; files deleted
     * count from the next measure (their runtime measures them when it starts and every 30 s awake).
     */
    async checkTurn(owner: RuntimeOwner): Promise<void> {
      const quota = await quotaOf(owner);
      if (quota === null) return;
      const row = await repo.usageOf(db, owner.tenantId, owner.userId);
      if (row && overQuota(row.diskBytes, quota)) throw new WorkspaceQuotaError(row.diskBytes!, quota);
    },

    /**
     * What a runner reported of its runtimes at a sync: its host row (`runner <name>`, beside the serves')
     * and the usage of the users placed on it now (the tenant each is written under is the user's own).
     */
    async runnerReport(runner: { name: string }, placed: ReadonlySet<string>, r: RunnerLimitsReport): Promise<void> {
      if (!r || typeof r !== 'object') return;
      const hostname = `runner ${runner.name}`;
      const limits = sanitizeLimits(r.limits);
      await repo.reportHost(db, {
        hostname,
        hostPid: 0,
        capacity: int(r.capacity),
        resident: int(r.resident),
        frozen: int(r.frozen),
        pagedOut: int(r.pagedOut),
        starting: int(r.starting),
        busy: int(r.busy),
        runtimesMemoryBytes: num(r.runtimesMemoryBytes) ?? 0,
        memoryTotalBytes: num(r.memory?.totalBytes) ?? 0,
        memoryAvailableBytes: num(r.memory?.availableBytes) ?? 0,
        freezer: limits?.freezer ?? null,
        limits,
        diskTotalBytes: num(r.disk?.totalBytes),
        diskFreeBytes: num(r.disk?.freeBytes),
      });
      if (Array.isArray(r.usage)) await repo.reportUsage(db, hostname, r.usage.filter((u) => typeof u?.userId === 'string').map(sanitize), placed);
    },
  };
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
const int = (v: unknown): number => Math.min(2 ** 31 - 1, Math.round(num(v) ?? 0));
const KINDS = new Set(['cgroup1', 'cgroup2', 'measured']);
const kind = (v: unknown): string | null => (typeof v === 'string' && KINDS.has(v) ? v : null);
const text = (v: unknown): string | null => (typeof v === 'string' ? v.slice(0, 300) : null);

/**
 * What a runner says holds its runtimes, as admins will read it: the known fields only, each a mechanism
 * the service names, a number or a short text (a compromised runner may say anything; it says no more).
 */
function sanitizeLimits(l: unknown): (LimitsStatus & { freezer: string | null; freezerUnavailable: string | null }) | null {
  if (!l || typeof l !== 'object') return null;
  const x = l as Record<string, unknown>;
  const unavailable: Record<string, string> = {};
  const u = x.unavailable && typeof x.unavailable === 'object' ? (x.unavailable as Record<string, unknown>) : {};
  for (const k of ['memory', 'processes', 'cpu', 'disk', 'paging']) if (text(u[k])) unavailable[k] = text(u[k])!;
  const sw = x.swap && typeof x.swap === 'object' ? (x.swap as Record<string, unknown>) : null;
  return {
    memory: kind(x.memory) as LimitsStatus['memory'],
    memoryMaxBytes: num(x.memoryMaxBytes),
    processes: kind(x.processes) as LimitsStatus['processes'],
    processesMax: num(x.processesMax),
    cpu: kind(x.cpu) as LimitsStatus['cpu'],
    tmpBytes: num(x.tmpBytes),
    disk: x.disk === 'measured' ? 'measured' : null,
    paging: kind(x.paging) as LimitsStatus['paging'],
    pageOutAfterMs: num(x.pageOutAfterMs),
    swap: sw ? { totalBytes: num(sw.totalBytes) ?? 0, freeBytes: num(sw.freeBytes) ?? 0, compressedStoredBytes: num(sw.compressedStoredBytes), compressedUsedBytes: num(sw.compressedUsedBytes) } : null,
    unavailable,
    freezer: kind(x.freezer),
    freezerUnavailable: text(x.freezerUnavailable),
  };
}

/** A runner's usage row, numbers checked (it is the runner's word: bounded to figures, for status only). */
function sanitize(u: Omit<RuntimeUsage, 'tenantId'>): Omit<RuntimeUsage, 'tenantId'> {
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
  return {
    userId: u.userId,
    running: u.running === true,
    memoryBytes: n(u.memoryBytes),
    memoryMaxBytes: n(u.memoryMaxBytes),
    pids: n(u.pids) === null ? null : Math.min(2 ** 31 - 1, Math.round(n(u.pids)!)),
    pidsMax: n(u.pidsMax) === null ? null : Math.min(2 ** 31 - 1, Math.round(n(u.pidsMax)!)),
    diskBytes: n(u.diskBytes),
    diskQuotaBytes: n(u.diskQuotaBytes),
    diskMeasuredAt: n(u.diskMeasuredAt),
    oomKills: Math.min(2 ** 31 - 1, Math.round(n(u.oomKills) ?? 0)),
    pidsRefused: Math.min(2 ** 31 - 1, Math.round(n(u.pidsRefused) ?? 0)),
  };
}
