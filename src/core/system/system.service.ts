import type { Database } from '../../db/database.js';
import type { Migrator } from '../../db/migrator.js';

export interface Readiness {
  ready: boolean;
  database: 'ok' | 'unreachable';
  migrations: 'current' | 'pending' | 'unknown';
  pending: string[];
}

/** Health of the appliance itself, for /readyz and `aws status`-style checks. */
export function createSystemService(deps: { db: Database; migrator: Migrator }) {
  // Migrations only move forward while a process runs, so once current they stay current: skip the query.
  let knownCurrent = false;
  return {
    /** Whether this process can serve: database reachable and every migration applied. */
    async readiness(): Promise<Readiness> {
      try {
        await deps.db.query('select 1');
      } catch {
        return { ready: false, database: 'unreachable', migrations: 'unknown', pending: [] };
      }
      if (knownCurrent) return { ready: true, database: 'ok', migrations: 'current', pending: [] };
      const pending = await deps.migrator.pending();
      knownCurrent = pending.length === 0;
      return { ready: knownCurrent, database: 'ok', migrations: knownCurrent ? 'current' : 'pending', pending };
    },
  };
}

export type SystemService = ReturnType<typeof createSystemService>;
