import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { constants, zstdCompressSync } from 'node:zlib';

const PAGE = 4096;

/**
 * What a process's anonymous memory would take in a compressed swap other than the one this host has:
 * each resident anonymous page read from /proc/<pid>/mem (the process frozen, so it holds still) and
 * compressed alone, as zram compresses a page, with zstd at `level`. Zero-filled pages count nothing (zram
 * keeps them as "same pages"); a page that does not shrink counts whole. The allocator's own overhead
 * (zsmalloc) is not counted: compare with zram's compr_data_size, not its mem_used_total. `every`: one
 * resident page in that many is read (the figures scaled back), for a process that must not stay frozen
 * long. Root only (the pagemap's frame bits and another process's memory).
 */
export function zstdEstimate(pids: readonly number[], levels: readonly number[], every = 1): { pages: number; zeroPages: number; storedBytes: number; compressedBytes: Record<number, number> } {
  const compressedBytes: Record<number, number> = Object.fromEntries(levels.map((l) => [l, 0]));
  let pages = 0;
  let zeroPages = 0;
  let seen = 0;
  const page = Buffer.alloc(PAGE);
  const entry = Buffer.alloc(8);
  for (const pid of pids) {
    let mem: number;
    let pagemap: number;
    try {
      mem = openSync(`/proc/${pid}/mem`, 'r');
      pagemap = openSync(`/proc/${pid}/pagemap`, 'r');
    } catch {
      continue;
    }
    try {
      for (const [start, end] of anonRanges(pid)) {
        for (let addr = start; addr < end; addr += PAGE) {
          // pagemap: one 64-bit entry per page, bit 63 set when the page is in RAM.
          if (readSync(pagemap, entry, 0, 8, (addr / PAGE) * 8) !== 8 || !(entry.readBigUInt64LE() >> 63n)) continue;
          if (seen++ % every !== 0) continue;
          try {
            if (readSync(mem, page, 0, PAGE, addr) !== PAGE) continue;
          } catch {
            continue;
          }
          pages++;
          if (page.every((b) => b === 0)) {
            zeroPages++;
            continue;
          }
          for (const l of levels) compressedBytes[l] += Math.min(PAGE, zstdCompressSync(page, { params: { [constants.ZSTD_c_compressionLevel]: l } }).length);
        }
      }
    } finally {
      closeSync(mem);
      closeSync(pagemap);
    }
  }
  for (const l of levels) compressedBytes[l] *= every;
  return { pages: pages * every, zeroPages: zeroPages * every, storedBytes: pages * every * PAGE, compressedBytes };
}

/** The process's private anonymous mappings with resident anonymous memory (from smaps). */
function anonRanges(pid: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let current: [number, number] | null = null;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      current = [parseInt(head[1], 16), parseInt(head[2], 16)];
      continue;
    }
    const anon = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (anon && current && Number(anon[1]) > 0) out.push(current);
  }
  return out;
}
