import { describe, expect, it } from 'vitest';
import { hostReserveBytes, pressureFloorBytes, PAGED_HELD_BYTES, PAGED_SWAP_BYTES, relief, roomForOneMore, runtimeCapacity, RUNTIME_BUDGET_BYTES } from '../../src/core/runtime/host/runtime-capacity.js';

const GiB = 1024 ** 3;

describe('runtimeCapacity: how many runtimes a host holds by default', () => {
  it('divides the host\'s memory, less a tenth (at least 1 GiB) for everything else, by a runtime\'s budget', () => {
    expect(hostReserveBytes(24 * GiB)).toBeCloseTo(2.4 * GiB);
    expect(hostReserveBytes(4 * GiB)).toBe(GiB);
    expect(runtimeCapacity({ totalBytes: 24 * GiB })).toBe(Math.floor((24 - 2.4) * GiB / RUNTIME_BUDGET_BYTES));
    expect(runtimeCapacity({ totalBytes: 64 * GiB, runtimeBytes: GiB / 2 })).toBe(115);
    // A larger host holds more; what is left over is never a runtime.
    expect(runtimeCapacity({ totalBytes: 64 * GiB })).toBeGreaterThan(runtimeCapacity({ totalBytes: 24 * GiB }));
    expect(runtimeCapacity({ totalBytes: 8 * GiB, runtimeBytes: GiB })).toBe(7);
  });
  it('with swap to page idle runtimes out to, holds as many more as the swap takes, within what their residue leaves of the memory', () => {
    const resident = runtimeCapacity({ totalBytes: 24 * GiB });
    // 12 GiB of swap: 40 more paged out.
    expect(runtimeCapacity({ totalBytes: 24 * GiB, swapBytes: 12 * GiB })).toBe(resident + Math.floor((12 * GiB) / PAGED_SWAP_BYTES));
    // Swap without end: the memory each paged-out runtime still holds is the bound (216 on 24 GB).
    expect(runtimeCapacity({ totalBytes: 24 * GiB, swapBytes: 1024 * GiB })).toBe(Math.floor(((24 - 2.4) * GiB) / PAGED_HELD_BYTES));
    expect(runtimeCapacity({ totalBytes: 24 * GiB, swapBytes: 1024 * GiB })).toBeGreaterThanOrEqual(150);
    expect(runtimeCapacity({ totalBytes: 24 * GiB, swapBytes: 0 })).toBe(resident);
  });
  it('holds at least one runtime on a tiny host and at most 500 on a huge one', () => {
    expect(runtimeCapacity({ totalBytes: 512 * 1024 ** 2 })).toBe(1);
    expect(runtimeCapacity({ totalBytes: 4096 * GiB })).toBe(500);
  });
});

describe('memory pressure', () => {
  const host = { totalBytes: 24 * GiB };
  /** What relief stops on a host with no swap (nothing can be paged out). */
  const stops = <T extends Parameters<typeof relief>[1][number]>(m: { totalBytes: number; availableBytes: number }, rts: T[]) => {
    const r = relief(m, rts);
    expect(r.pageOut).toEqual([]);
    return r.stop;
  };
  const floor = pressureFloorBytes(host.totalBytes);

  it('has room for one more runtime only while starting it leaves the floor available', () => {
    expect(roomForOneMore({ ...host, availableBytes: floor + RUNTIME_BUDGET_BYTES })).toBe(true);
    expect(roomForOneMore({ ...host, availableBytes: floor + RUNTIME_BUDGET_BYTES - 1 })).toBe(false);
  });

  it('stops nothing above the floor', () => {
    expect(stops({ ...host, availableBytes: floor }, [{ lastUsed: 1, idle: true }])).toEqual([]);
  });

  it('under the floor, stops idle runtimes least recently used first until the shortfall is covered, never a busy one', () => {
    const rts = [
      { name: 'busy-oldest', lastUsed: 1, idle: false, bytes: GiB },
      { name: 'idle-new', lastUsed: 50, idle: true, bytes: GiB },
      { name: 'idle-old', lastUsed: 10, idle: true, bytes: GiB },
      { name: 'idle-mid', lastUsed: 20, idle: true, bytes: GiB },
    ];
    // 1.5 GiB short: two runtimes of 1 GiB each cover it.
    expect(stops({ ...host, availableBytes: floor - 1.5 * GiB }, rts).map((r) => r.name)).toEqual(['idle-old', 'idle-mid']);
    // Shorter than every idle runtime together: all idle ones go, the busy one stays.
    const small = rts.map((r) => ({ ...r, bytes: GiB / 4 }));
    expect(stops({ ...host, availableBytes: 0 }, small).map((r) => r.name)).toEqual(['idle-old', 'idle-mid', 'idle-new']);
    // Nothing idle: nothing to stop, whatever the shortfall.
    expect(stops({ ...host, availableBytes: 0 }, [rts[0]])).toEqual([]);
  });

  it('counts a runtime whose memory is not yet measured at the budget', () => {
    const rts = [
      { lastUsed: 1, idle: true, bytes: 0 },
      { lastUsed: 2, idle: true, bytes: 0 },
    ];
    expect(stops({ ...host, availableBytes: floor - RUNTIME_BUDGET_BYTES / 2 }, rts)).toHaveLength(1);
  });
});

describe('memory pressure with swap: paging out before stopping', () => {
  const host = { totalBytes: 24 * GiB };
  const floor = pressureFloorBytes(host.totalBytes);
  const rts = [
    { name: 'busy-oldest', lastUsed: 1, idle: false, bytes: GiB },
    { name: 'paged-old', lastUsed: 5, idle: true, bytes: 80 * 1024 ** 2, pagedOut: true },
    { name: 'idle-new', lastUsed: 50, idle: true, bytes: GiB },
    { name: 'idle-old', lastUsed: 10, idle: true, bytes: GiB },
    { name: 'idle-mid', lastUsed: 20, idle: true, bytes: GiB },
  ];
  const names = (r: ReturnType<typeof relief<(typeof rts)[number]>>) => ({ pageOut: r.pageOut.map((x) => x.name), stop: r.stop.map((x) => x.name) });

  it('pages out idle runtimes least recently used first, stopping none, while paging covers the shortfall', () => {
    expect(names(relief({ ...host, availableBytes: floor - 1.5 * GiB, swapFreeBytes: 8 * GiB }, rts))).toEqual({ pageOut: ['idle-old', 'idle-mid'], stop: [] });
  });

  it('stops idle runtimes, least recently used first, only for what paging every one cannot cover; never a busy one', () => {
    expect(names(relief({ ...host, availableBytes: floor - 4 * GiB, swapFreeBytes: 8 * GiB }, rts))).toEqual({ pageOut: ['idle-old', 'idle-mid', 'idle-new'], stop: ['paged-old'] });
    expect(names(relief({ ...host, availableBytes: 0, swapFreeBytes: 8 * GiB }, rts)).stop).not.toContain('busy-oldest');
  });

  it('pages out only what the swap has room for', () => {
    // Room for one: the rest is stopped, least recently used first (the paged-out one frees only what it still holds).
    expect(names(relief({ ...host, availableBytes: floor - 1.5 * GiB, swapFreeBytes: 1.5 * GiB }, rts))).toEqual({ pageOut: ['idle-old'], stop: ['paged-old', 'idle-mid'] });
  });

  it('does nothing above the floor', () => {
    expect(relief({ ...host, availableBytes: floor, swapFreeBytes: 8 * GiB }, rts)).toEqual({ pageOut: [], stop: [] });
  });

  it('counts a page-out under way as memory freed, and neither pages out nor stops that runtime meanwhile', () => {
    const underWay = rts.map((r) => (r.name === 'idle-old' ? { ...r, pagingNow: true } : r));
    // The kernel does not show what idle-old's page-out frees yet: nothing more is done for it.
    expect(names(relief({ ...host, availableBytes: floor - 0.5 * GiB, swapFreeBytes: 8 * GiB }, underWay))).toEqual({ pageOut: [], stop: [] });
    // Shorter than it frees: the next least recently used is paged out, idle-old is left to finish.
    expect(names(relief({ ...host, availableBytes: floor - 1.5 * GiB, swapFreeBytes: 8 * GiB }, underWay))).toEqual({ pageOut: ['idle-mid'], stop: [] });
    expect(names(relief({ ...host, availableBytes: 0, swapFreeBytes: 8 * GiB }, underWay)).stop).not.toContain('idle-old');
  });
});
