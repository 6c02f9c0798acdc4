import type { Queryable } from '../../db/database.js';
import type { LimitsStatus } from './host/runtime-host.js';

export interface AppliedState {
  defaultModel: string;
  providers: string[];
}

export interface RuntimeSettingsRow {
  tenantId: string;
  defaultModel: string | null;
  applied: AppliedState | null;
  appliedAt: Date | null;
  appliedBy: string | null;
  updatedAt: Date;
}

export interface RuntimeRow {
  userId: string;
  tenantId: string;
  /** The serve process hosting the runtime. */
  hostPid: number;
  pid: number;
  /** The Unix socket of a sandboxed runtime, or the loopback URL of an unsandboxed one. */
  socketPath: string;
  /** The runtime API's Authorization header value, sealed. */
  passwordSealed: string;
  sandboxed: boolean;
  configFingerprint: string | null;
  startedAt: Date;
  lastUsedAt: Date;
}

const RUNTIME = `user_id as "userId", tenant_id as "tenantId", host_pid as "hostPid", pid, socket_path as "socketPath", password_sealed as "passwordSealed",
  sandboxed, config_fingerprint as "configFingerprint", started_at as "startedAt", last_used_at as "lastUsedAt"`;

const SETTINGS = `tenant_id as "tenantId", default_model as "defaultModel", applied, applied_at as "appliedAt", applied_by as "appliedBy", updated_at as "updatedAt"`;

/** What a hosting process last reported about its runtimes (runtime_hosts). */
export interface RuntimeHostRow {
  hostname: string;
  hostPid: number;
  capacity: number;
  resident: number;
  frozen: number;
  /** Of the frozen, those paged out to swap. */
  pagedOut: number;
  starting: number;
  busy: number;
  runtimesMemoryBytes: number;
  memoryTotalBytes: number;
  memoryAvailableBytes: number;
  /** cgroup2 or cgroup1; null: idle runtimes cannot be frozen here. */
  freezer: string | null;
  /** Which limits hold on the host and why not the others (runtime-host.ts LimitsStatus); null: reported before they existed. */
  limits: (LimitsStatus & { freezer?: string | null; freezerUnavailable?: string | null }) | null;
  /** The data directory's filesystem; null: not read. */
  diskTotalBytes: number | null;
  diskFreeBytes: number | null;
  startedAt: Date;
  reportedAt: Date;
}
export type RuntimeHostReport = Omit<RuntimeHostRow, 'startedAt' | 'reportedAt'>;

const HOST = `hostname, host_pid as "hostPid", capacity, resident, frozen, paged_out as "pagedOut", starting, busy, runtimes_memory_bytes::float8 as "runtimesMemoryBytes",
  memory_total_bytes::float8 as "memoryTotalBytes", memory_available_bytes::float8 as "memoryAvailableBytes", freezer, limits,
  disk_total_bytes::float8 as "diskTotalBytes", disk_free_bytes::float8 as "diskFreeBytes", started_at as "startedAt", reported_at as "reportedAt"`;

/** One person's runtime against its limits, as its host last read it (runtime_usage). */
export interface RuntimeUsageRow {
  userId: string;
  tenantId: string;
  host: string;
  running: boolean;
  memoryBytes: number | null;
  memoryMaxBytes: number | null;
  pids: number | null;
  pidsMax: number | null;
  diskBytes: number | null;
  diskQuotaBytes: number | null;
  diskMeasuredAt: Date | null;
  oomKills: number;
  pidsRefused: number;
  updatedAt: Date;
}
export type RuntimeUsageReport = Omit<RuntimeUsageRow, 'tenantId' | 'host' | 'updatedAt' | 'diskMeasuredAt'> & { diskMeasuredAt: number | null };

const usageCols = (t: string) =>
  `${t}.user_id as "userId", ${t}.tenant_id as "tenantId", ${t}.host, ${t}.running, ${t}.memory_bytes::float8 as "memoryBytes", ${t}.memory_max_bytes::float8 as "memoryMaxBytes",
  ${t}.pids, ${t}.pids_max as "pidsMax", ${t}.disk_bytes::float8 as "diskBytes", ${t}.disk_quota_bytes::float8 as "diskQuotaBytes", ${t}.disk_measured_at as "diskMeasuredAt",
  ${t}.oom_kills as "oomKills", ${t}.pids_refused as "pidsRefused", ${t}.updated_at as "updatedAt"`;

export function createRuntimeRepo() {
  return {
    async settings(q: Queryable, tenantId: string): Promise<RuntimeSettingsRow | null> {
      return (await q.query<RuntimeSettingsRow>(`select ${SETTINGS} from runtime_settings where tenant_id = $1`, [tenantId])).rows[0] ?? null;
    },
    async setDefaultModel(q: Queryable, tenantId: string, model: string | null): Promise<void> {
      await q.query(
        `insert into runtime_settings (tenant_id, default_model) values ($1, $2)
         on conflict (tenant_id) do update set default_model = excluded.default_model, updated_at = now()`,
        [tenantId, model],
      );
    },
    async setApplied(q: Queryable, tenantId: string, applied: AppliedState, by: string): Promise<void> {
      await q.query(
        `insert into runtime_settings (tenant_id, default_model, applied, applied_at, applied_by) values ($1, $2, $3, now(), $4)
         on conflict (tenant_id) do update set default_model = excluded.default_model, applied = excluded.applied, applied_at = now(), applied_by = excluded.applied_by, updated_at = now()`,
        [tenantId, applied.defaultModel, JSON.stringify(applied), by],
      );
    },
    /** Where a user's runtime answers while it runs (recorded by the serve hosting it). */
    async runtimeOf(q: Queryable, userId: string): Promise<RuntimeRow | null> {
      return (await q.query<RuntimeRow>(`select ${RUNTIME} from agent_runtimes where user_id = $1`, [userId])).rows[0] ?? null;
    },
    /** The tenant's running runtimes (an apply reconfigures them). */
    async runtimesOfTenant(q: Queryable, tenantId: string): Promise<RuntimeRow[]> {
      return (await q.query<RuntimeRow>(`select ${RUNTIME} from agent_runtimes where tenant_id = $1`, [tenantId])).rows;
    },
    async allRuntimes(q: Queryable): Promise<RuntimeRow[]> {
      return (await q.query<RuntimeRow>(`select ${RUNTIME} from agent_runtimes order by started_at`)).rows;
    },
    async recordRuntime(q: Queryable, r: Omit<RuntimeRow, 'startedAt' | 'lastUsedAt' | 'configFingerprint'>): Promise<void> {
      await q.query(
        `insert into agent_runtimes (user_id, tenant_id, host_pid, pid, socket_path, password_sealed, sandboxed, config_fingerprint, started_at, last_used_at)
         values ($1, $2, $3, $4, $5, $6, $7, null, now(), now())
         on conflict (user_id) do update set tenant_id = excluded.tenant_id, host_pid = excluded.host_pid, pid = excluded.pid, socket_path = excluded.socket_path,
           password_sealed = excluded.password_sealed, sandboxed = excluded.sandboxed, config_fingerprint = null, started_at = now(), last_used_at = now()`,
        [r.userId, r.tenantId, r.hostPid, r.pid, r.socketPath, r.passwordSealed, r.sandboxed],
      );
    },
    /** Forgets a runtime that stopped, unless another one has been recorded for the user since. */
    async forgetRuntime(q: Queryable, userId: string, pid: number): Promise<void> {
      await q.query(`delete from agent_runtimes where user_id = $1 and pid = $2`, [userId, pid]);
    },
    /** Forgets a runtime a runner hosted (`socket` is its runner's: runtime-records.ts); any pid when null. */
    async forgetRunnerRuntime(q: Queryable, userId: string, socket: string, pid: number | null): Promise<void> {
      await q.query(`delete from agent_runtimes where user_id = $1 and socket_path = $2 and ($3::int is null or pid = $3)`, [userId, socket, pid]);
    },
    /** Forgets every runtime a serve process recorded (at its start: the ones of a previous run are gone). */
    async forgetRuntimesOfHost(q: Queryable, hostPids: number[]): Promise<void> {
      await q.query(`delete from agent_runtimes where host_pid = any($1::int[])`, [hostPids]);
    },
    /** The host's latest report (one row per hosting process, replaced at each report). */
    async reportHost(q: Queryable, r: RuntimeHostReport): Promise<void> {
      await q.query(
        `insert into runtime_hosts (hostname, host_pid, capacity, resident, frozen, starting, busy, runtimes_memory_bytes, memory_total_bytes, memory_available_bytes, freezer, limits, disk_total_bytes, disk_free_bytes, paged_out, reported_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, now())
         on conflict (hostname, host_pid) do update set capacity = excluded.capacity, resident = excluded.resident, frozen = excluded.frozen, paged_out = excluded.paged_out, starting = excluded.starting,
           busy = excluded.busy, runtimes_memory_bytes = excluded.runtimes_memory_bytes, memory_total_bytes = excluded.memory_total_bytes,
           memory_available_bytes = excluded.memory_available_bytes, freezer = excluded.freezer, limits = excluded.limits,
           disk_total_bytes = excluded.disk_total_bytes, disk_free_bytes = excluded.disk_free_bytes, reported_at = now()`,
        [
          r.hostname, r.hostPid, r.capacity, r.resident, r.frozen, r.starting, r.busy, Math.round(r.runtimesMemoryBytes), Math.round(r.memoryTotalBytes), Math.round(r.memoryAvailableBytes), r.freezer,
          r.limits ? JSON.stringify(r.limits) : null, r.diskTotalBytes === null ? null : Math.round(r.diskTotalBytes), r.diskFreeBytes === null ? null : Math.round(r.diskFreeBytes),
          r.pagedOut,
        ],
      );
    },
    /**
     * What a host read of its runtimes' usage. The tenant is the user's own (a runner names users only);
     * `only` (a runner's report): rows of users placed on that runner now, the others dropped.
     */
    async reportUsage(q: Queryable, host: string, rows: RuntimeUsageReport[], only?: ReadonlySet<string>): Promise<void> {
      const mine = only ? rows.filter((r) => only.has(r.userId)) : rows;
      if (!mine.length) return;
      const col = <K extends keyof RuntimeUsageReport>(k: K) => mine.map((r) => r[k]);
      await q.query(
        `insert into runtime_usage (user_id, tenant_id, host, running, memory_bytes, memory_max_bytes, pids, pids_max, disk_bytes, disk_quota_bytes, disk_measured_at, oom_kills, pids_refused, updated_at)
         select u.id, u.tenant_id, $1, x.running, x.memory_bytes, x.memory_max_bytes, x.pids, x.pids_max, x.disk_bytes, x.disk_quota_bytes,
                case when x.disk_measured_at is null then null else to_timestamp(x.disk_measured_at / 1000.0) end, x.oom_kills, x.pids_refused, now()
           from unnest($2::uuid[], $3::boolean[], $4::bigint[], $5::bigint[], $6::int[], $7::int[], $8::bigint[], $9::bigint[], $10::float8[], $11::int[], $12::int[])
                as x(user_id, running, memory_bytes, memory_max_bytes, pids, pids_max, disk_bytes, disk_quota_bytes, disk_measured_at, oom_kills, pids_refused)
           join users u on u.id = x.user_id
         on conflict (user_id) do update set tenant_id = excluded.tenant_id, host = excluded.host, running = excluded.running,
           memory_bytes = excluded.memory_bytes, memory_max_bytes = excluded.memory_max_bytes, pids = excluded.pids, pids_max = excluded.pids_max,
           disk_bytes = coalesce(excluded.disk_bytes, runtime_usage.disk_bytes), disk_quota_bytes = excluded.disk_quota_bytes,
           disk_measured_at = coalesce(excluded.disk_measured_at, runtime_usage.disk_measured_at),
           oom_kills = excluded.oom_kills, pids_refused = excluded.pids_refused, updated_at = now()
         -- A host the person left (their runtime stopped there) does not overwrite the fresh row of the one
         -- that runs it now.
         where runtime_usage.host = excluded.host or excluded.running or not runtime_usage.running
            or runtime_usage.updated_at < now() - interval '90 seconds'`,
        [
          host,
          col('userId'),
          col('running'),
          mine.map((r) => (r.memoryBytes === null ? null : Math.round(r.memoryBytes))),
          mine.map((r) => (r.memoryMaxBytes === null ? null : Math.round(r.memoryMaxBytes))),
          col('pids'),
          col('pidsMax'),
          mine.map((r) => (r.diskBytes === null ? null : Math.round(r.diskBytes))),
          mine.map((r) => (r.diskQuotaBytes === null ? null : Math.round(r.diskQuotaBytes))),
          col('diskMeasuredAt'),
          col('oomKills'),
          col('pidsRefused'),
        ],
      );
    },
    /** A person's runtime against its limits as last read (null: never measured). */
    async usageOf(q: Queryable, tenantId: string, userId: string): Promise<RuntimeUsageRow | null> {
      return (await q.query<RuntimeUsageRow>(`select ${usageCols('r')} from runtime_usage r where r.tenant_id = $1 and r.user_id = $2`, [tenantId, userId])).rows[0] ?? null;
    },
    /** Every person measured within `withinMs`, every tenant (for /metrics, which only the operator reads). */
    async recentUsage(q: Queryable, withinMs: number): Promise<RuntimeUsageRow[]> {
      return (await q.query<RuntimeUsageRow>(`select ${usageCols('r')} from runtime_usage r where r.updated_at > now() - make_interval(secs => $1::float8 / 1000) order by r.tenant_id, r.user_id`, [withinMs])).rows;
    },
    /** The tenant's people against their limits (with their handle), nearest to a limit first. */
    async usageOfTenant(q: Queryable, tenantId: string): Promise<Array<RuntimeUsageRow & { handle: string }>> {
      return (
        await q.query<RuntimeUsageRow & { handle: string }>(
          `select ${usageCols('r')}, u.handle from runtime_usage r join users u on u.id = r.user_id and u.tenant_id = r.tenant_id
            where r.tenant_id = $1
            order by greatest(coalesce(r.disk_bytes::float8 / nullif(r.disk_quota_bytes, 0), 0), coalesce(r.memory_bytes::float8 / nullif(r.memory_max_bytes, 0), 0),
                              coalesce(r.pids::float8 / nullif(r.pids_max, 0), 0)) desc, r.user_id`,
          [tenantId],
        )
      ).rows;
    },
    /** Hosts that reported within `withinMs` (the others' processes are gone or stuck). */
    async liveHosts(q: Queryable, withinMs: number): Promise<RuntimeHostRow[]> {
      return (await q.query<RuntimeHostRow>(`select ${HOST} from runtime_hosts where reported_at > now() - make_interval(secs => $1::float8 / 1000) order by hostname, host_pid`, [withinMs])).rows;
    },
    /** Every hosting process of one machine that ever reported (to forget the ones gone). */
    async hostsOf(q: Queryable, hostname: string): Promise<RuntimeHostRow[]> {
      return (await q.query<RuntimeHostRow>(`select ${HOST} from runtime_hosts where hostname = $1`, [hostname])).rows;
    },
    /** Forgets hosting processes of this machine that are gone, and this one's row (at its start or stop). */
    async forgetHosts(q: Queryable, hostname: string, hostPids: number[]): Promise<void> {
      await q.query(`delete from runtime_hosts where hostname = $1 and host_pid = any($2::int[])`, [hostname, hostPids]);
    },
    async setConfigFingerprint(q: Queryable, userId: string, pid: number, fingerprint: string): Promise<void> {
      await q.query(`update agent_runtimes set config_fingerprint = $3 where user_id = $1 and pid = $2`, [userId, pid, fingerprint]);
    },
  };
}

export type RuntimeRepo = ReturnType<typeof createRuntimeRepo>;
