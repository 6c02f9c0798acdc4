import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { JobQueueStats, QueueStats } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { HOST_REPORT_FRESH_MS, type LimitsStatus } from '../runtime/host/runtime-host.js';
import { usageAsOf } from '../runtime/host/runtime-limits-fns.js';
import type { RuntimeUsageRow } from '../runtime/runtime.repo.js';
import { createMetricsRepo, type MetricsRepo } from './metrics.repo.js';
import { createTail } from './tail.js';

/** People measured within this long are in /metrics (a person whose agent has not run for an hour drops out). */
const USAGE_WITHIN_MS = 3600_000;
/** How long a recorded row stays open to late commits (see tail.ts). */
const TAIL_OVERLAP_MS = 60_000;

/** Model calls, tokens and cost recorded since this process started, per provider, model and channel. */
export interface ModelUsageTotal {
  provider: string;
  model: string;
  channel: string;
  calls: number;
  tokens: { input: number; output: number; reasoning: number; cacheRead: number; cacheWrite: number };
  costUsd: number;
}

/** What /metrics reports beyond the HTTP layer's own counters: plain numbers, read at one moment. */
export interface MetricsSnapshot {
  /** Whether the database answered this read; when not, the jobs and pending codes are left out. */
  databaseUp: boolean;
  jobs: QueueStats | null;
  /** The agent runtimes this process hosts (only `aws serve` hosts any). */
  runtimes: {
    starting: number;
    ready: number;
    /** Frozen and resident (paged-out ones are counted apart). */
    frozen: number;
    pagedOut: number;
    busy: number;
    max: number;
    available: boolean;
    /** Private resident memory of the runtimes' processes (0 when this process hosts none). */
    memoryBytes: number;
    /** The host's memory, as the pool weighs it (its cgroup limit inside a container). */
    hostMemoryTotalBytes: number;
    hostMemoryAvailableBytes: number;
  };
  pendingPairingCodes: number | null;
  /**
   * The runtimes' limits: which hold on this process's host (null: it hosts none), its data directory's
   * filesystem, and every person any host measured in the last hour, against their limits (from the
   * database, so runner hosts' people too; memory and processes only while their runtime runs).
   */
  limits: {
    mechanisms: LimitsStatus | null;
    dataDisk: { totalBytes: number; freeBytes: number } | null;
    people: Array<Pick<RuntimeUsageRow, 'tenantId' | 'userId' | 'host' | 'running' | 'memoryBytes' | 'memoryMaxBytes' | 'pids' | 'pidsMax' | 'diskBytes' | 'diskQuotaBytes' | 'oomKills' | 'pidsRefused'>>;
  };
  /** Counters since this process started, from the database: whichever process recorded the rows. */
  modelUsage: ModelUsageTotal[];
  pairingApprovals: Array<{ platform: string; count: number }>;
}

/**
 * The numbers behind /metrics, read from where they are already true (the job queue's tables, usage
 * records, pairing codes, the runtime pool) rather than counted along the way, so they include what
 * workers and commands did. Not tenant-scoped: the caller (the /metrics route) admits only the
 * service's own credentials.
 */
export function createMetricsService(deps: {
  db: Database;
  repo?: MetricsRepo;
  queue: JobQueueStats;
  pool: Pick<RuntimePool, 'status' | 'hosting' | 'refusal'>;
  /** People against their limits, as their hosts last reported (runtime.repo.ts recentUsage). */
  runtimeUsage?: (withinMs: number) => Promise<RuntimeUsageRow[]>;
  maxRuntimes: number;
  clock: Clock;
  log: Logger;
}) {
  const { db, clock } = deps;
  const repo = deps.repo ?? createMetricsRepo();
  const usage = new Map<string, ModelUsageTotal>();
  const approvals = new Map<string, number>();
  const usageTail = createTail({ clock, overlapMs: TAIL_OVERLAP_MS, read: (from, settled, seen) => repo.usageTail(db, from, settled, seen) });
  const approvalsTail = createTail({ clock, overlapMs: TAIL_OVERLAP_MS, read: (from, settled, seen) => repo.approvalsTail(db, from, settled, seen) });
  let inFlight: Promise<MetricsSnapshot> | null = null;

  async function read(): Promise<MetricsSnapshot> {
    let databaseUp = true;
    const failed = (what: string) => (err: unknown) => {
      databaseUp = false;
      deps.log.warn({ err: (err as Error).message }, `metrics: could not read ${what}`);
      return null;
    };
    // One after another: on the embedded database every query waits for the one before anyway.
    const jobs = await deps.queue.stats().catch(failed('the job queue'));
    const pendingPairingCodes = await repo.pendingPairingCodes(db, clock.now()).catch(failed('pairing codes'));
    // A tail that fails keeps its place: its rows are counted at the next read.
    for (const r of (await usageTail.next().catch(failed('usage records'))) ?? []) {
      const key = JSON.stringify([r.provider, r.model, r.channel]);
      let t = usage.get(key);
      if (!t) usage.set(key, (t = { provider: r.provider, model: r.model, channel: r.channel, calls: 0, tokens: { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: 0 }));
      t.calls += r.calls;
      t.tokens.input += r.input;
      t.tokens.output += r.output;
      t.tokens.reasoning += r.reasoning;
      t.tokens.cacheRead += r.cacheRead;
      t.tokens.cacheWrite += r.cacheWrite;
      t.costUsd += r.costUsd;
    }
    for (const r of (await approvalsTail.next().catch(failed('pairing approvals'))) ?? []) {
      approvals.set(r.platform, (approvals.get(r.platform) ?? 0) + r.count);
    }
    const pool = deps.pool.status();
    const usageRows = (await deps.runtimeUsage?.(USAGE_WITHIN_MS).catch(failed('runtime usage'))) ?? [];
    return {
      databaseUp,
      jobs,
      runtimes: {
        starting: pool.starting,
        ready: pool.ready,
        frozen: pool.frozen - pool.pagedOut,
        pagedOut: pool.pagedOut,
        busy: pool.busy,
        max: deps.maxRuntimes,
        available: deps.pool.hosting && !deps.pool.refusal,
        memoryBytes: pool.runtimesMemoryBytes,
        hostMemoryTotalBytes: pool.memory.totalBytes,
        hostMemoryAvailableBytes: pool.memory.availableBytes,
      },
      pendingPairingCodes,
      limits: {
        mechanisms: deps.pool.hosting && !deps.pool.refusal ? pool.limits : null,
        dataDisk: pool.disk ? { totalBytes: pool.disk.totalBytes, freeBytes: pool.disk.freeBytes } : null,
        people: usageRows.map((row) => {
          const u = usageAsOf(row, clock.now().getTime(), HOST_REPORT_FRESH_MS);
          return {
            tenantId: u.tenantId,
            userId: u.userId,
            host: u.host,
            running: u.running,
            memoryBytes: u.memoryBytes,
            memoryMaxBytes: u.memoryMaxBytes,
            pids: u.pids,
            pidsMax: u.pidsMax,
            diskBytes: u.diskBytes,
            diskQuotaBytes: u.diskQuotaBytes,
            oomKills: u.oomKills,
            pidsRefused: u.pidsRefused,
          };
        }),
      },
      modelUsage: [...usage.values()].map((t) => ({ ...t, tokens: { ...t.tokens } })),
      pairingApprovals: [...approvals].map(([platform, count]) => ({ platform, count })),
    };
  }

  return {
    /** The numbers as of now. Scrapes that overlap share one read (the tails must not run twice at once). */
    snapshot(): Promise<MetricsSnapshot> {
      return (inFlight ??= read().finally(() => {
        inFlight = null;
      }));
    },
  };
}
