import { describe, expect, it } from 'vitest';
import { createTail } from '../../src/core/metrics/tail.js';

interface Row {
  id: string | null;
  at: Date | null;
  n: number;
}

/**
 * The tail behind the database-read counters of /metrics (model calls, pairing approvals): every row
 * stamped after the start is counted exactly once, including rows that commit up to the overlap late,
 * while each read asks only for what is new.
 */
describe('metrics tail', () => {
  function setup() {
    let now = 1_000_000;
    const table: Array<{ id: string; at: number; n: number }> = [];
    const reads: Array<{ from: number; settled: number; seen: string[] }> = [];
    // What the SQL does: sums of (from, settled] minus the seen ids, then each row after settled.
    const read = async (from: Date, settled: Date, seen: string[]): Promise<Row[]> => {
      reads.push({ from: from.getTime(), settled: settled.getTime(), seen });
      const settledRows = table.filter((r) => r.at > from.getTime() && r.at <= settled.getTime() && !seen.includes(r.id));
      const sum = settledRows.length ? [{ id: null, at: null, n: settledRows.reduce((a, r) => a + r.n, 0) }] : [];
      return [...sum, ...table.filter((r) => r.at > settled.getTime()).map((r) => ({ id: r.id, at: new Date(r.at), n: r.n }))];
    };
    const tail = createTail<Row>({ clock: { now: () => new Date(now) }, overlapMs: 60_000, read });
    let total = 0;
    return {
      reads,
      tick: (ms: number) => void (now += ms),
      insert: (id: string, atOffsetMs: number, n = 1) => void table.push({ id, at: now + atOffsetMs, n }),
      next: async () => {
        for (const r of await tail.next()) total += r.n;
        return total;
      },
    };
  }

  it('counts rows from the start on, each once, however often it reads', async () => {
    const s = setup();
    s.insert('before', -1, 100);
    expect(await s.next()).toBe(0);
    s.tick(1000);
    s.insert('a', 0);
    s.insert('b', 0);
    expect(await s.next()).toBe(2);
    expect(await s.next()).toBe(2);
    s.tick(5 * 60_000);
    // a and b are settled now: read as a sum, without themselves (already counted).
    expect(await s.next()).toBe(2);
    expect(s.reads.at(-1)!.seen.sort()).toEqual(['a', 'b']);
    expect(await s.next()).toBe(2);
    expect(s.reads.at(-1)!.seen).toEqual([]);
  });

  it('counts a row that commits after a read that its stamp precedes, up to the overlap', async () => {
    const s = setup();
    s.tick(10 * 60_000);
    expect(await s.next()).toBe(0);
    s.insert('late', -30_000, 5);
    s.insert('too-late', -90_000, 1000);
    expect(await s.next()).toBe(5);
    s.tick(2 * 60_000);
    expect(await s.next()).toBe(5);
  });

  it('counts rows it never read one by one (no read for a long time) as sums, once', async () => {
    const s = setup();
    s.tick(1000);
    for (let i = 0; i < 50; i++) s.insert(`r${i}`, 0, 2);
    s.tick(60 * 60_000);
    s.insert('fresh', 0, 1);
    expect(await s.next()).toBe(101);
    // The fresh row was read on its own, the 50 as one sum.
    expect(s.reads.at(-1)).toMatchObject({ seen: [] });
    s.tick(10 * 60_000);
    expect(await s.next()).toBe(101);
  });

  it('keeps its place when a read fails: the rows are counted at the next one', async () => {
    let fail = true;
    let now = 0;
    const rows: Row[] = [{ id: 'x', at: new Date(10), n: 1 }];
    const tail = createTail<Row>({
      clock: { now: () => new Date(now) },
      overlapMs: 60_000,
      read: async (_from, settled) => {
        if (fail) throw new Error('database down');
        return rows.filter((r) => r.at!.getTime() > settled.getTime());
      },
    });
    now = 20;
    await expect(tail.next()).rejects.toThrow('database down');
    fail = false;
    expect(await tail.next()).toEqual(rows);
    expect(await tail.next()).toEqual([]);
  });
});
