import { existsSync } from 'node:fs';
import type { Database } from '../../db/database.js';
import { isProcessAlive } from '../../lib/process-state.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { RuntimeHandle } from './host/runtime-transport.js';
import type { RuntimeRecords } from './runtime-pool.js';
import { workspaceDir } from '../../lib/data-paths.js';
import type { RuntimeOwner } from './host/runtime-host.js';
import type { LimitNotice } from './host/runtime-limits-fns.js';
import type { RuntimeRepo, RuntimeRow } from './runtime.repo.js';
import { SANDBOX_PATHS } from './host/sandbox.js';

/**
 * A runtime on a runner host is recorded with this in place of a socket path: `runner:<runner id>`.
 * Its host is not a process of this machine, so none of the local liveness checks apply to it.
 */
const RUNNER_SOCKET = /^runner:(.+)$/;
export const runnerSocket = (runnerId: string) => `runner:${runnerId}`;
export const runnerOfRow = (row: Pick<RuntimeRow, 'socketPath'>): string | null => RUNNER_SOCKET.exec(row.socketPath)?.[1] ?? null;

/** Where a recorded runtime answers (for processes that did not start it). */
export function handleOfRow(row: RuntimeRow, box: SecretBox, dataDir: string): RuntimeHandle {
  const authorization = box.open(row.passwordSealed);
  const runnerId = runnerOfRow(row);
  if (runnerId) return { endpoint: { tunnel: { runnerId, userId: row.userId }, authorization }, directory: SANDBOX_PATHS.workspace };
  return row.sandboxed
    ? { endpoint: { socketPath: row.socketPath, authorization }, directory: SANDBOX_PATHS.workspace }
    : { endpoint: { url: row.socketPath, authorization }, directory: workspaceDir(dataDir, row) };
}

/** The control plane's records of what a serve hosts: agent_runtimes and runtime_hosts. */
export function createDbRuntimeRecords(deps: {
  db: Database;
  repo: RuntimeRepo;
  box: SecretBox;
  dataDir: string;
  /**
   * A runtime went away (stopped, exited, or its host died): turns it had in flight are lost (`idle`: it
   * was stopped running nothing, so none was cut).
   */
  lost?: (owner: RuntimeOwner, reason: string, o?: { idle?: boolean }) => Promise<void> | void;
  /** A runtime met one of its limits: the person is told (turn-runner.ts limitReached). */
  limit?: (owner: RuntimeOwner, notice: LimitNotice) => Promise<void> | void;
}): RuntimeRecords {
  const { db, repo, box } = deps;
  return {
    async started(owner, launched, sandboxed) {
      await repo.recordRuntime(db, {
        userId: owner.userId,
        tenantId: owner.tenantId,
        hostPid: process.pid,
        pid: launched.pid,
        socketPath: launched.endpoint.socketPath ?? launched.endpoint.url!,
        passwordSealed: box.seal(launched.endpoint.authorization),
        sandboxed,
      });
    },
    async stopped(owner, pid, o) {
      await repo.forgetRuntime(db, owner.userId, pid);
      const reason = !o ? 'it exited unexpectedly' : o.why === 'shutdown' ? 'the service was shut down' : `it was stopped: ${o.why}`;
      await deps.lost?.(owner, reason, { idle: o?.idle });
    },
    async elsewhere(owner) {
      const row = await repo.runtimeOf(db, owner.userId);
      if (!row || row.tenantId !== owner.tenantId) return null;
      if (runnerOfRow(row)) return handleOfRow(row, box, deps.dataDir);
      if (!isProcessAlive(row.hostPid) || !isProcessAlive(row.pid)) return null;
      if (row.sandboxed && !existsSync(row.socketPath)) return null;
      return handleOfRow(row, box, deps.dataDir);
    },
    async hostStarting(hostname) {
      // Rows of runners are the runners' (their channel says when they stop): only local hosts' are checked.
      const rows = (await repo.allRuntimes(db)).filter((r) => !runnerOfRow(r));
      const dead = [...new Set(rows.filter((r) => r.hostPid === process.pid || !isProcessAlive(r.hostPid)).map((r) => r.hostPid))];
      if (dead.length) {
        await repo.forgetRuntimesOfHost(db, dead);
        // Their serve died (killed, crashed): the runtimes died with it, and any turn they ran.
        for (const r of rows.filter((x) => dead.includes(x.hostPid))) await deps.lost?.(r, 'the service hosting it stopped');
      }
      const hosts = (await repo.hostsOf(db, hostname)).filter((h) => h.hostPid === process.pid || !isProcessAlive(h.hostPid));
      if (hosts.length) await repo.forgetHosts(db, hostname, hosts.map((h) => h.hostPid));
    },
    async report(hostname, s) {
      await repo.reportHost(db, {
        hostname,
        hostPid: process.pid,
        capacity: s.capacity,
        resident: s.resident,
        frozen: s.frozen,
        pagedOut: s.pagedOut,
        starting: s.starting,
        busy: s.busy,
        runtimesMemoryBytes: s.runtimesMemoryBytes,
        memoryTotalBytes: s.memory.totalBytes,
        memoryAvailableBytes: s.memory.availableBytes,
        freezer: s.freezer,
        limits: { ...s.limits, freezer: s.freezer, freezerUnavailable: s.freezerUnavailable },
        diskTotalBytes: s.disk?.totalBytes ?? null,
        diskFreeBytes: s.disk?.freeBytes ?? null,
      });
      await repo.reportUsage(db, hostname, s.usage);
    },
    async limit(owner, notice) {
      await deps.limit?.(owner, notice);
    },
    async hostStopped(hostname) {
      await repo.forgetHosts(db, hostname, [process.pid]);
    },
  };
}

export type { RuntimeOwner };
