import { describe, expect, it } from 'vitest';
import {
  diskFloorBytes,
  effectiveQuotaBytes,
  growing,
  inodeFloor,
  limitMessage,
  limitStopWhy,
  nearLimits,
  overQuota,
  parseLimitNotice,
  pidsVerdict,
  runtimeMemoryDefault,
  runtimesMemoryTotal,
  runtimesPidsTotal,
  scanDue,
  usageAsOf,
} from '../../src/core/runtime/host/runtime-limits-fns.js';
import { formatSize, parseSize, parseSizeSetting } from '../../src/lib/size.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe('sizes as people write them', () => {
  it('reads binary units in any spelling, and bytes', () => {
    expect(parseSize('4GiB')).toBe(4 * GiB);
    expect(parseSize('4G')).toBe(4 * GiB);
    expect(parseSize('4 gb')).toBe(4 * GiB);
    expect(parseSize('512MiB')).toBe(512 * MiB);
    expect(parseSize('1.5GiB')).toBe(1.5 * GiB);
    expect(parseSize('1048576')).toBe(MiB);
    for (const bad of ['', 'four', '4XB', '-1G', '4 G B']) expect(parseSize(bad)).toBeNull();
  });
  it('writes them for people', () => {
    expect(formatSize(4 * GiB)).toBe('4 GiB');
    expect(formatSize(1.5 * GiB)).toBe('1.5 GiB');
    expect(formatSize(150 * MiB)).toBe('150 MiB');
    expect(formatSize(12)).toBe('12 B');
  });
  it('a setting: auto and off where allowed, a size within bounds, else a message naming what was expected', () => {
    expect(parseSizeSetting('auto', { auto: true, min: MiB })).toEqual({ ok: true, value: 'auto' });
    expect(parseSizeSetting('off', { off: true, min: MiB })).toEqual({ ok: true, value: null });
    expect(parseSizeSetting('2GiB', { min: MiB })).toEqual({ ok: true, value: 2 * GiB });
    const small = parseSizeSetting('1MiB', { off: true, min: 100 * MiB });
    expect(small).toMatchObject({ ok: false, message: expect.stringMatching(/from 100 MiB.*or off, got "1MiB"/) });
    expect(parseSizeSetting('auto', { min: MiB }).ok).toBe(false);
  });
});

describe('memory limits', () => {
  it('auto: a quarter of what runtimes share, between 1 and 4 GiB', () => {
    // 24 GB VM (23.5 GiB as the kernel reports it): the runtimes share ~21 GiB, a quarter of it is over 4.
    expect(runtimeMemoryDefault(23.5 * GiB)).toBe(4 * GiB);
    expect(runtimeMemoryDefault(8 * GiB)).toBe(1792 * MiB);
    expect(runtimeMemoryDefault(2 * GiB)).toBe(GiB);
    expect(runtimeMemoryDefault(512 * GiB)).toBe(4 * GiB);
  });
  it('all runtimes together: the host less its reserve (a tenth, at least 1 GiB)', () => {
    expect(runtimesMemoryTotal(24 * GiB)).toBe(Math.floor(24 * GiB * 0.9));
    expect(runtimesMemoryTotal(4 * GiB)).toBe(3 * GiB);
    expect(runtimesMemoryTotal(GiB)).toBe(GiB);
  });
  it('all runtimes together: half the host\'s pids', () => {
    expect(runtimesPidsTotal(32768, 192731)).toBe(16384);
    expect(runtimesPidsTotal(4194304, 100000)).toBe(50000);
    expect(runtimesPidsTotal(1000, 1000)).toBe(1024);
  });
});

describe('the process limit\'s verdict', () => {
  it('ok without new refusals, told at the first sweep that sees some, stopped at the second in a row', () => {
    expect(pidsVerdict({ refusedBefore: 3, refusedNow: 3, hitLastSweep: true })).toBe('ok');
    expect(pidsVerdict({ refusedBefore: 3, refusedNow: 9, hitLastSweep: false })).toBe('told');
    expect(pidsVerdict({ refusedBefore: 9, refusedNow: 40, hitLastSweep: true })).toBe('stop');
  });
});

describe('the measured workspace quota', () => {
  it('the tenant\'s setting (MiB) over the operator\'s default; null when neither', () => {
    expect(effectiveQuotaBytes(2048, 10 * GiB)).toBe(2 * GiB);
    expect(effectiveQuotaBytes(undefined, 10 * GiB)).toBe(10 * GiB);
    expect(effectiveQuotaBytes(null, null)).toBeNull();
    expect(effectiveQuotaBytes('2048', 10 * GiB)).toBe(10 * GiB);
  });
  it('past it at the quota itself; growing only beyond the runtime\'s own bookkeeping', () => {
    expect(overQuota(10 * GiB, 10 * GiB)).toBe(true);
    expect(overQuota(10 * GiB - 1, 10 * GiB)).toBe(false);
    expect(overQuota(null, 10 * GiB)).toBe(false);
    expect(overQuota(11 * GiB, null)).toBe(false);
    expect(growing(null, 11 * GiB)).toBe(false);
    expect(growing(11 * GiB, 11 * GiB + MiB)).toBe(false);
    expect(growing(11 * GiB, 11 * GiB + 64 * MiB)).toBe(true);
  });
  it('measures every 30 s awake, sooner when the disk lost a tenth of the quota (at most 256 MiB), never more than 20 times the last measure\'s cost', () => {
    const base = { now: 100_000, lastAt: 100_000 - 5000, lastMs: 100, freeAtLast: 50 * GiB, freeNow: 50 * GiB, quotaBytes: 10 * GiB };
    expect(scanDue(base)).toBe(false);
    expect(scanDue({ ...base, lastAt: 100_000 - 30_000 })).toBe(true);
    expect(scanDue({ ...base, freeNow: 50 * GiB - 256 * MiB })).toBe(true);
    expect(scanDue({ ...base, quotaBytes: 150 * MiB, freeNow: 50 * GiB - 15 * MiB })).toBe(true);
    expect(scanDue({ ...base, freeNow: 50 * GiB - 100 * MiB })).toBe(false);
    // A measure that took 2 s waits 40 s, whatever the disk does.
    expect(scanDue({ ...base, lastAt: 100_000 - 35_000, lastMs: 2000, freeNow: 0 })).toBe(false);
  });
  it('the data disk is short under 5 % (1-20 GiB, at most half), or 2 % of its inodes', () => {
    expect(diskFloorBytes(252 * GiB)).toBeCloseTo(12.6 * GiB);
    expect(diskFloorBytes(2000 * GiB)).toBe(20 * GiB);
    expect(diskFloorBytes(10 * GiB)).toBe(GiB);
    expect(diskFloorBytes(GiB)).toBe(GiB / 2);
    expect(inodeFloor(16_000_000)).toBe(320_000);
    expect(inodeFloor(100)).toBe(50);
  });
});

describe('what the person reads', () => {
  it('says which limit, its size, and what happened', () => {
    expect(limitMessage({ kind: 'memory', limitBytes: 1.5 * GiB, ended: 'process' })).toMatch(/process your agent ran passed the memory limit of 1\.5 GiB.*killed.*goes on/);
    expect(limitMessage({ kind: 'memory', limitBytes: 4 * GiB, ended: 'runtime' })).toMatch(/runtime passed its memory limit of 4 GiB.*restarts/);
    expect(limitMessage({ kind: 'processes', limit: 1024, stopped: true })).toMatch(/\(1024\).*stopped/);
    expect(limitMessage({ kind: 'disk', usedBytes: 11 * GiB, quotaBytes: 10 * GiB, stopped: true })).toMatch(/11 GiB, past its quota of 10 GiB: your agent was stopped/);
    expect(limitStopWhy({ kind: 'processes', limit: 300, stopped: true })).toMatch(/process limit of 300/);
  });
  it('a runner\'s notice: figures only, checked; anything else is refused', () => {
    expect(parseLimitNotice({ kind: 'memory', limitBytes: GiB, ended: 'process', message: '<script>' })).toEqual({ kind: 'memory', limitBytes: GiB, ended: 'process' });
    expect(parseLimitNotice({ kind: 'disk', usedBytes: 5, quotaBytes: 4, stopped: true })).toEqual({ kind: 'disk', usedBytes: 5, quotaBytes: 4, stopped: true });
    expect(parseLimitNotice({ kind: 'disk', usedBytes: 'lots', quotaBytes: 4 })).toBeNull();
    expect(parseLimitNotice({ kind: 'memory', ended: 'everything' })).toBeNull();
    expect(parseLimitNotice(null)).toBeNull();
  });
  it('near a limit from 80 %; memory and processes only while the runtime runs, disk always', () => {
    const u = { running: true, memoryBytes: 0.85 * GiB, memoryMaxBytes: GiB, pids: 10, pidsMax: 300, diskBytes: 9 * GiB, diskQuotaBytes: 10 * GiB };
    expect(nearLimits(u)).toEqual(['memory', 'disk']);
    expect(nearLimits({ ...u, running: false })).toEqual(['disk']);
    expect(nearLimits({ ...u, pids: 250, diskQuotaBytes: null })).toEqual(['memory', 'processes']);
  });
});

describe('a person\'s figures as their host last reported them', () => {
  const at = new Date('2026-11-28T12:00:00Z');
  const row = { running: true, updatedAt: at, memoryBytes: 900, pids: 40, diskBytes: 7 };
  it('count while the host still reports, and say nothing of memory and processes once it went silent; disk stands', () => {
    expect(usageAsOf(row, at.getTime() + 89_000, 90_000)).toEqual(row);
    expect(usageAsOf(row, at.getTime() + 90_000, 90_000)).toEqual({ ...row, running: false, memoryBytes: null, pids: null });
    expect(usageAsOf({ ...row, running: false }, at.getTime(), 90_000)).toEqual({ ...row, running: false, memoryBytes: null, pids: null });
  });
});
