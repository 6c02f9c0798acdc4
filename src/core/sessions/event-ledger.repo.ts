import type { Queryable } from '../../db/database.js';

/**
 * The facts taken from runtimes' events that must be acted on once across processes (runtime_event_ledger):
 * an analytics record, a chat reply, a code host's answer.
 */
export function createEventLedgerRepo() {
  return {
    /** Records a fact from the runtime's events once; false when some process recorded it already. */
    async claimLedgerKey(q: Queryable, key: string): Promise<boolean> {
      const { rows } = await q.query(`insert into runtime_event_ledger (key) values ($1) on conflict do nothing returning key`, [key]);
      return rows.length > 0;
    },
  };
}

export type EventLedgerRepo = ReturnType<typeof createEventLedgerRepo>;
