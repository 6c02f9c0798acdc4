import type { Queryable } from '../../db/database.js';

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
  starting: number;
  busy: number;
  runtimesMemoryBytes: number;
  memoryTotalBytes: number;
  memoryAvailableBytes: number;
  /** cgroup2 or cgroup1; null: idle runtimes cannot be frozen here. */
  freezer: string | null;
  startedAt: Date;
  reportedAt: Date;
}
export type RuntimeHostReport = Omit<RuntimeHostRow, 'startedAt' | 'reportedAt'>;

const HOST = `hostname, host_pid as "hostPid", capacity, resident, frozen, starting, busy, runtimes_memory_bytes::float8 as "runtimesMemoryBytes",
  memory_total_bytes::float8 as "memoryTotalBytes", memory_available_bytes::float8 as "memoryAvailableBytes", freezer, started_at as "startedAt", reported_at as "reportedAt"`;

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
        `insert into runtime_hosts (hostname, host_pid, capacity, resident, frozen, starting, busy, runtimes_memory_bytes, memory_total_bytes, memory_available_bytes, freezer, reported_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
         on conflict (hostname, host_pid) do update set capacity = excluded.capacity, resident = excluded.resident, frozen = excluded.frozen, starting = excluded.starting,
           busy = excluded.busy, runtimes_memory_bytes = excluded.runtimes_memory_bytes, memory_total_bytes = excluded.memory_total_bytes,
           memory_available_bytes = excluded.memory_available_bytes, freezer = excluded.freezer, reported_at = now()`,
        [r.hostname, r.hostPid, r.capacity, r.resident, r.frozen, r.starting, r.busy, Math.round(r.runtimesMemoryBytes), Math.round(r.memoryTotalBytes), Math.round(r.memoryAvailableBytes), r.freezer],
      );
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
