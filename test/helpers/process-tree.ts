import { readdirSync, readFileSync } from 'node:fs';
import { processDescendants, processStatFields } from '../../src/lib/process-state.js';

/**
 * What a process tree costs the host, read from /proc: who is whose child, CPU time used, and memory
 * (RSS and PSS). Shared by the tests that catch a regression (an idle runtime burning CPU) and the
 * benchmarks that report the figures, so both measure the same thing the same way.
 */

/** Every live process's children (by parent pid), read from /proc once. */
export function processTree(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const fields = processStatFields(Number(name));
    if (!fields) continue; // exited meanwhile
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  return children;
}

/**
 * Every live descendant of a process (children, grandchildren...): from a tree already read (processTree,
 * for a bench sampling many processes at one instant), else process-state's own walk of the process's
 * children, as the service reads them.
 */
export function descendantsOf(pid: number, tree?: Map<number, number[]>): number[] {
  if (!tree) return processDescendants(pid);
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of tree.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** CPU time (user + system, ms) one process has used so far; 0 once it is gone. */
export function cpuMs(pid: number): number {
  const f = processStatFields(pid);
  return f ? ((Number(f[11]) + Number(f[12])) * 1000) / 100 : 0; // utime, stime in clock ticks (USER_HZ = 100)
}

/** CPU time (ms) a process and its live descendants have used so far. */
export function treeCpuMs(pid: number, tree?: Map<number, number[]>): number {
  return [pid, ...descendantsOf(pid, tree)].reduce((sum, p) => sum + cpuMs(p), 0);
}

/**
 * The share of one core (0..1 per core) a process tree used over `ms`, sampled from its CPU time at the
 * start and the end. The tree is read at the start: processes started meanwhile are not counted.
 */
export async function treeCpuShare(pid: number, ms: number): Promise<number> {
  const pids = [pid, ...descendantsOf(pid)];
  const sum = () => pids.reduce((total, p) => total + cpuMs(p), 0);
  const before = sum();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const after = sum();
  return (after - before) / (performance.now() - t0);
}

/**
 * Memory of a process and all its descendants (kB): resident (RSS, shared pages counted in every
 * process that maps them) and proportional (PSS, shared pages divided among those processes: what a
 * process tree really costs the host when several run the same binary), and what of it is in swap
 * (Swap, and SwapPss: swapped pages divided the same way), from /proc/<pid>/smaps_rollup. Reading it
 * does not bring swapped pages back.
 */
export function treeMemoryKb(pid: number, tree?: Map<number, number[]>): { rss: number; pss: number; swap: number; swapPss: number; processes: number } {
  let rss = 0;
  let pss = 0;
  let swap = 0;
  let swapPss = 0;
  let processes = 0;
  for (const p of [pid, ...descendantsOf(pid, tree)]) {
    let text: string;
    try {
      text = readFileSync(`/proc/${p}/smaps_rollup`, 'utf8');
    } catch {
      continue;
    }
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    rss += kb('Rss');
    pss += kb('Pss');
    swap += kb('Swap');
    swapPss += kb('SwapPss');
    processes++;
  }
  return { rss, pss, swap, swapPss, processes };
}
