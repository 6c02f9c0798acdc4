import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { totalmem } from 'node:os';

/** The memory this process's host can give, in bytes: all of it, and what can be had without swapping. */
export interface HostMemory {
  totalBytes: number;
  availableBytes: number;
}

const read = (file: string): string | null => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

/** A /proc/meminfo-style field in bytes ("MemAvailable:  123 kB"), or null. */
const meminfoField = (text: string, name: string): number | null => {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) * 1024 : null;
};

/**
 * The memory limit of this process's own cgroup and what it uses that cannot be reclaimed, when a limit
 * is set (a container, a systemd MemoryMax): cgroup v2's memory.max / memory.current less inactive file
 * pages, else v1's memory.limit_in_bytes / usage_in_bytes less total_inactive_file. Null: no limit.
 */
function cgroupLimit(): { limit: number; used: number } | null {
  const own = read('/proc/self/cgroup') ?? '';
  const mounts = (read('/proc/self/mountinfo') ?? '').split('\n').map((l) => l.split(' - '));
  const v2Path = own.split('\n').find((l) => l.startsWith('0::'))?.slice(3);
  const v2Mount = mounts.find(([, t]) => t?.startsWith('cgroup2 '))?.[0].split(' ')[4];
  if (v2Path !== undefined && v2Mount) {
    // The nearest group with a limit, from this process's own up: a service that moved itself into a leaf
    // of its cgroup (runtime-cgroups.ts, so that its runtimes get limits beside it) is held by its parent's.
    for (let dir = join(v2Mount, v2Path); dir.startsWith(v2Mount) && dir.length >= v2Mount.length; dir = dirname(dir)) {
      const max = read(join(dir, 'memory.max'))?.trim();
      const current = Number(read(join(dir, 'memory.current')) ?? NaN);
      if (max && max !== 'max' && Number.isFinite(current)) {
        const inactive = Number(/^inactive_file (\d+)/m.exec(read(join(dir, 'memory.stat')) ?? '')?.[1] ?? 0);
        return { limit: Number(max), used: current - inactive };
      }
      if (dir === v2Mount) break;
    }
  }
  const v1Line = own.split('\n').find((l) => l.split(':')[1]?.split(',').includes('memory'));
  const v1Mount = mounts.find(([, t]) => t?.startsWith('cgroup ') && t.split(' ')[2]?.split(',').includes('memory'))?.[0].split(' ')[4];
  if (v1Line && v1Mount) {
    const dir = join(v1Mount, v1Line.slice(v1Line.indexOf(':', v1Line.indexOf(':') + 1) + 1));
    const limit = Number(read(join(dir, 'memory.limit_in_bytes')) ?? NaN);
    const usage = Number(read(join(dir, 'memory.usage_in_bytes')) ?? NaN);
    // "No limit" is a huge number (PAGE_COUNTER_MAX pages): anything at or above the host's RAM.
    if (Number.isFinite(limit) && Number.isFinite(usage) && limit < totalmem()) {
      const inactive = Number(/^total_inactive_file (\d+)/m.exec(read(join(dir, 'memory.stat')) ?? '')?.[1] ?? 0);
      return { limit, used: usage - inactive };
    }
  }
  return null;
}

/**
 * The host's memory as the kernel reports it (MemTotal, MemAvailable), narrowed to this process's cgroup
 * limit when one is set: inside a container the container's limit is the host that matters.
 */
export function readHostMemory(): HostMemory {
  const meminfo = read('/proc/meminfo') ?? '';
  let totalBytes = meminfoField(meminfo, 'MemTotal') ?? totalmem();
  let availableBytes = meminfoField(meminfo, 'MemAvailable') ?? totalBytes;
  const cg = cgroupLimit();
  if (cg && cg.limit < totalBytes) {
    totalBytes = cg.limit;
    availableBytes = Math.min(availableBytes, Math.max(0, cg.limit - cg.used));
  }
  return { totalBytes, availableBytes };
}

/**
 * The host's swap: how much there is and is free (/proc/meminfo), and, when it is compressed in memory
 * (zram devices listed in /proc/swaps), how much the pool stores and what that costs in RAM: a page in
 * zram is not free memory, it holds its compressed size (mm_stat's mem_used_total), so what a paged-out
 * runtime really holds is its swapped bytes times `usedBytes / storedBytes`. Swap on a disk costs no RAM.
 */
export interface SwapInfo {
  totalBytes: number;
  freeBytes: number;
  /** The zram devices swapped to: bytes stored (uncompressed) and the RAM they use; null: no zram swap. */
  zram: { storedBytes: number; usedBytes: number } | null;
}

export function readSwap(): SwapInfo {
  const meminfo = read('/proc/meminfo') ?? '';
  const totalBytes = meminfoField(meminfo, 'SwapTotal') ?? 0;
  const freeBytes = meminfoField(meminfo, 'SwapFree') ?? 0;
  let stored = 0;
  let used = 0;
  let anyZram = false;
  for (const line of (read('/proc/swaps') ?? '').split('\n').slice(1)) {
    const dev = /^\/dev\/(zram\d+)\s/.exec(line)?.[1];
    if (!dev) continue;
    // mm_stat: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages ...
    const f = (read(`/sys/block/${dev}/mm_stat`) ?? '').trim().split(/\s+/).map(Number);
    if (f.length < 3 || !f.every(Number.isFinite)) continue;
    anyZram = true;
    stored += f[0];
    used += f[2];
  }
  return { totalBytes, freeBytes, zram: anyZram ? { storedBytes: stored, usedBytes: used } : null };
}

/** The RAM that `swappedBytes` of a process's memory holds in the host's swap (its share of a zram pool; 0 on disk swap). */
export function swapHeldBytes(swappedBytes: number, swap: SwapInfo): number {
  if (!swap.zram || swap.zram.storedBytes <= 0) return 0;
  return Math.round((swappedBytes * swap.zram.usedBytes) / swap.zram.storedBytes);
}
