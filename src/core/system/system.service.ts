import type { Database } from '../../db/database.js';
import type { Migrator } from '../../db/migrator.js';

export interface Readiness {
  ready: boolean;
  database: 'ok' | 'unreachable';
  migrations: 'current' | 'pending' | 'unknown';
  pending: string[];
  /**
   * Whether agents can run on this host: `sandbox` on or off (off: unsandboxed, single-user trials only),
   * and why not when they cannot (no sandbox can start). Does not make the API unready: it still serves.
   */
  agents: {
    sandbox: 'on' | 'off';
    available: boolean;
    problem?: string;
    warning?: string;
    /**
     * Which limits hold each runtime this process hosts (memory, processes, cpu: cgroup2 or cgroup1, or
     * null; disk: measured or null) and, in `unavailable`, why one does not and what the disk quota does
     * not cover. Absent when this process hosts no runtime.
     */
    limits?: { memory: string | null; processes: string | null; cpu: string | null; disk: string | null; paging?: string | null; unavailable: Record<string, string> };
  };
}

/** Health of the appliance itself, for /readyz and `aws status`-style checks. */
export function createSystemService(deps: { db: Database; migrator: Migrator; agents: () => Readiness['agents'] }) {
  // Migrations only move forward while a process runs, so once current they stay current: skip the query.
  let knownCurrent = false;
  return {
    /** Whether this process can serve: database reachable and every migration applied. */
    async readiness(): Promise<Readiness> {
      try {
        await deps.db.query('select 1');
      } catch {
        return { ready: false, database: 'unreachable', migrations: 'unknown', pending: [], agents: deps.agents() };
      }
      if (knownCurrent) return { ready: true, database: 'ok', migrations: 'current', pending: [], agents: deps.agents() };
      const pending = await deps.migrator.pending();
      knownCurrent = pending.length === 0;
      return { ready: knownCurrent, database: 'ok', migrations: knownCurrent ? 'current' : 'pending', pending, agents: deps.agents() };
    },
  };
}
