/**
 * How many runtimes a host holds, and when memory runs short: pure rules over the host's memory figures
 * (read by lib/host-memory.ts), so they are tested on any size of host.
 */

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * What one idle runtime costs the host, its sandbox's processes included (PSS, after its first turn),
 * with room for a turn's growth: the runtime-pool benchmark measures it (README, Performance). The
 * default capacity divides the host's memory by it.
 */
export const RUNTIME_BUDGET_BYTES = 400 * MiB;

/** Most runtimes one host process runs, whatever its memory (the sweeps and event streams scale to it). */
export const MAX_CAPACITY = 500;

/** Memory kept for everything else on the host (the service, PostgreSQL, the OS): a tenth, at least 1 GiB. */
export function hostReserveBytes(totalBytes: number): number {
  return Math.max(GiB, totalBytes / 10);
}

/** The default number of resident runtimes: the host's memory less its reserve, in runtime budgets. */
export function runtimeCapacity(o: { totalBytes: number; runtimeBytes?: number }): number {
  const usable = o.totalBytes - hostReserveBytes(o.totalBytes);
  return Math.min(MAX_CAPACITY, Math.max(1, Math.floor(usable / (o.runtimeBytes ?? RUNTIME_BUDGET_BYTES))));
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

/**
 * Which runtimes to stop under memory pressure: as many as bring the available memory back to the floor
 * (each counted at its measured size, else the budget), least recently used first, only idle ones
 * (no turn running, not starting). Never a busy one, even if that leaves the host short.
 */
export function pressureVictims<T extends { lastUsed: number; idle: boolean; bytes?: number }>(
  m: { totalBytes: number; availableBytes: number },
  runtimes: readonly T[],
  runtimeBytes = RUNTIME_BUDGET_BYTES,
): T[] {
  let short = pressureFloorBytes(m.totalBytes) - m.availableBytes;
  if (short <= 0) return [];
  const out: T[] = [];
  for (const r of [...runtimes].filter((x) => x.idle).sort((a, b) => a.lastUsed - b.lastUsed)) {
    if (short <= 0) break;
    out.push(r);
    short -= r.bytes || runtimeBytes;
  }
  return out;
}
