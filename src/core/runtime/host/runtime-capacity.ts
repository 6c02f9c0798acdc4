/**
 * How many runtimes a host holds, and when memory runs short: pure rules over the host's memory figures
 * (read by lib/host-memory.ts), so they are tested on any size of host.
 */

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * What one idle runtime costs the host, its sandbox's processes included (PSS, after its first turn),
 * with room for a turn's growth: the runtime-pool benchmark measures it (docs/developing/performance.md). The
 * default capacity divides the host's memory by it.
 */
export const RUNTIME_BUDGET_BYTES = 400 * MiB;

/**
 * What a paged-out runtime costs (runtime-pageout bench, docs/developing/performance.md): in RAM, what stays
 * resident and its share of the compressed pool, with room; in swap space, its memory uncompressed.
 */
export const PAGED_HELD_BYTES = 100 * MiB;
export const PAGED_SWAP_BYTES = 300 * MiB;
/**
 * What a runtime still holds of the RAM once paged out, when deciding how many to page out: its budget
 * (measured 77-87 MB: ~8-18 MB resident, the rest its share of the compressed pool).
 */
const PAGED_RESIDUE_BYTES = PAGED_HELD_BYTES;

/** Most runtimes one host process runs, whatever its memory (the sweeps and event streams scale to it). */
const MAX_CAPACITY = 500;

/** Memory kept for everything else on the host (the service, PostgreSQL, the OS): a tenth, at least 1 GiB. */
export function hostReserveBytes(totalBytes: number): number {
  return Math.max(GiB, totalBytes / 10);
}

/**
 * The default number of resident runtimes: the host's memory less its reserve, in runtime budgets; where
 * idle runtimes are paged out to swap (`swapBytes`: the host's swap, when paging is on), as many more as
 * the swap holds paged out, within what their residue takes of the memory. Which of them are awake,
 * frozen or paged out follows the memory held at each moment (relief below), not this count.
 */
export function runtimeCapacity(o: { totalBytes: number; runtimeBytes?: number; swapBytes?: number }): number {
  const usable = o.totalBytes - hostReserveBytes(o.totalBytes);
  const resident = Math.floor(usable / (o.runtimeBytes ?? RUNTIME_BUDGET_BYTES));
  const paged = o.swapBytes ? Math.min(Math.floor(usable / PAGED_HELD_BYTES), resident + Math.floor(o.swapBytes / PAGED_SWAP_BYTES)) : resident;
  return Math.min(MAX_CAPACITY, Math.max(1, paged));
}

/**
 * Below this much available memory the host is under pressure: half its reserve. Idle runtimes are then
 * stopped, least recently used first, and no new one starts without stopping one.
 */
export function pressureFloorBytes(totalBytes: number): number {
  return hostReserveBytes(totalBytes) / 2;
}

/** Whether one more runtime fits in the memory available now without going under the floor. */
export function roomForOneMore(m: { totalBytes: number; availableBytes: number }, runtimeBytes = RUNTIME_BUDGET_BYTES): boolean {
  return m.availableBytes - runtimeBytes >= pressureFloorBytes(m.totalBytes);
}

/** One runtime as the pressure rules see it. */
export interface HeldRuntime {
  lastUsed: number;
  /** No turn running, not starting, not used in the last seconds. */
  idle: boolean;
  /** Memory it holds now (its share of a compressed pool included), when measured. */
  bytes?: number;
  /** Its memory is in swap already (or cannot be put there: a page-out of it failed). */
  pagedOut?: boolean;
  /**
   * A page-out of it is under way: what it frees counts as freed already (the kernel's available figure
   * shows it only once the page-out is done, a second or so later), and it is neither paged out again nor
   * stopped in the middle.
   */
  pagingNow?: boolean;
}

/**
 * What brings a host under pressure back to its floor: first idle runtimes paged out, least recently used
 * first (each then frees what it holds less what stays resident, while the swap has room for it), and
 * only when that is not enough, idle runtimes stopped, least recently used first (paged-out ones too:
 * stopping one frees what it still holds). Never a busy one, even if that leaves the host short.
 * `swapFreeBytes`: 0 or absent when nothing can be paged out here.
 */
export function relief<T extends HeldRuntime>(
  m: { totalBytes: number; availableBytes: number; swapFreeBytes?: number },
  runtimes: readonly T[],
  runtimeBytes = RUNTIME_BUDGET_BYTES,
): { pageOut: T[]; stop: T[] } {
  let short = pressureFloorBytes(m.totalBytes) - m.availableBytes;
  for (const r of runtimes) if (r.pagingNow) short -= Math.max(0, (r.bytes || runtimeBytes) - PAGED_RESIDUE_BYTES);
  if (short <= 0) return { pageOut: [], stop: [] };
  const idle = [...runtimes].filter((x) => x.idle && !x.pagingNow).sort((a, b) => a.lastUsed - b.lastUsed);
  const pageOut: T[] = [];
  let swapFree = m.swapFreeBytes ?? 0;
  for (const r of idle) {
    if (short <= 0) break;
    const bytes = r.bytes || runtimeBytes;
    if (r.pagedOut || bytes <= PAGED_RESIDUE_BYTES || swapFree < bytes) continue;
    pageOut.push(r);
    swapFree -= bytes;
    short -= bytes - PAGED_RESIDUE_BYTES;
  }
  const stop: T[] = [];
  for (const r of idle) {
    if (short <= 0) break;
    if (pageOut.includes(r)) continue;
    stop.push(r);
    short -= r.bytes || runtimeBytes;
  }
  return { pageOut, stop };
}
