import { describe, expect, it } from 'vitest';
import { hostReserveBytes, pressureFloorBytes, pressureVictims, roomForOneMore, runtimeCapacity, RUNTIME_BUDGET_BYTES } from '../../src/core/runtime/host/runtime-capacity.js';

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
  it('holds at least one runtime on a tiny host and at most 500 on a huge one', () => {
    expect(runtimeCapacity({ totalBytes: 512 * 1024 ** 2 })).toBe(1);
    expect(runtimeCapacity({ totalBytes: 4096 * GiB })).toBe(500);
  });
});

describe('memory pressure', () => {
  const host = { totalBytes: 24 * GiB };
  const floor = pressureFloorBytes(host.totalBytes);

  it('has room for one more runtime only while starting it leaves the floor available', () => {
    expect(roomForOneMore({ ...host, availableBytes: floor + RUNTIME_BUDGET_BYTES })).toBe(true);
    expect(roomForOneMore({ ...host, availableBytes: floor + RUNTIME_BUDGET_BYTES - 1 })).toBe(false);
  });

  it('stops nothing above the floor', () => {
    expect(pressureVictims({ ...host, availableBytes: floor }, [{ lastUsed: 1, idle: true }])).toEqual([]);
  });

  it('under the floor, stops idle runtimes least recently used first until the shortfall is covered, never a busy one', () => {
    const rts = [
      { name: 'busy-oldest', lastUsed: 1, idle: false, bytes: GiB },
      { name: 'idle-new', lastUsed: 50, idle: true, bytes: GiB },
      { name: 'idle-old', lastUsed: 10, idle: true, bytes: GiB },
      { name: 'idle-mid', lastUsed: 20, idle: true, bytes: GiB },
    ];
    // 1.5 GiB short: two runtimes of 1 GiB each cover it.
    expect(pressureVictims({ ...host, availableBytes: floor - 1.5 * GiB }, rts).map((r) => r.name)).toEqual(['idle-old', 'idle-mid']);
    // Shorter than every idle runtime together: all idle ones go, the busy one stays.
    const small = rts.map((r) => ({ ...r, bytes: GiB / 4 }));
    expect(pressureVictims({ ...host, availableBytes: 0 }, small).map((r) => r.name)).toEqual(['idle-old', 'idle-mid', 'idle-new']);
    // Nothing idle: nothing to stop, whatever the shortfall.
    expect(pressureVictims({ ...host, availableBytes: 0 }, [rts[0]])).toEqual([]);
  });

  it('counts a runtime whose memory is not yet measured at the budget', () => {
    const rts = [
      { lastUsed: 1, idle: true, bytes: 0 },
      { lastUsed: 2, idle: true, bytes: 0 },
    ];
    expect(pressureVictims({ ...host, availableBytes: floor - RUNTIME_BUDGET_BYTES / 2 }, rts)).toHaveLength(1);
  });
});
