import type { Clock } from '../../lib/clock.js';
import type { TailRow } from './metrics.repo.js';

/**
 * Reads the rows an append-only table gains from now on, each counted once, at a cost that does not
 * grow with the table: the totals of /metrics counters such as model calls and cost, which any process
 * (serve, a worker, a command) may record.
 *
 * A row is placed by its timestamp, written by the recording process's clock just before a short
 * commit; one that commits after a later read was made is still found, because the last `overlapMs`
 * stay open and are read row by row (their ids remembered). Older rows are read once, as sums, and
 * never again. A row committed more than `overlapMs` after its timestamp (a transaction that long, or
 * hosts whose clocks differ by more) would not be counted.
 *
 * `read(from, settled, seen)` returns the sums of the rows in (from, settled] whose ids are not in
 * `seen` (id null), and every row after `settled` on its own (with its id and timestamp).
 */
export function createTail<R extends TailRow>(opts: { clock: Clock; overlapMs: number; read(from: Date, settled: Date, seen: string[]): Promise<R[]> }) {
  // Rows timestamped before the process started are not counted: counters start at zero.
  let from = opts.clock.now();
  /** Rows after `from`, already counted. */
  let seen = new Set<string>();
  return {
    /** The rows (and sums of rows) recorded since the last call: counted by the caller, exactly once. */
    async next(): Promise<R[]> {
      const settled = new Date(Math.max(from.getTime(), opts.clock.now().getTime() - opts.overlapMs));
      const rows = await opts.read(from, settled, [...seen]);
      const fresh: R[] = [];
      const nextSeen = new Set<string>();
      for (const r of rows) {
        if (r.id === null) fresh.push(r);
        else {
          nextSeen.add(r.id);
          if (!seen.has(r.id)) fresh.push(r);
        }
      }
      from = settled;
      seen = nextSeen;
      return fresh;
    },
  };
}
