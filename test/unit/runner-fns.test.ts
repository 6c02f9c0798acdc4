import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ageText,
  CAPACITY_NOTE_EVERY_MS,
  cappedCapacity,
  capacityNews,
  chooseRunner,
  looksLikeRunnerToken,
  newRunnerToken,
  placementVerdict,
  RUNNER_HEARTBEAT_TIMEOUT_MS,
  RUNNER_NAME,
  runnerHealth,
  runnerHealthy,
  runnerTimings,
  runnerTokenHash,
  type RunnerLoad,
} from '../../src/core/runners/runner-fns.js';

const now = new Date('2026-11-27T12:00:00Z');
const ago = (ms: number) => new Date(now.getTime() - ms);
const runner = (name: string, o: Partial<RunnerLoad> = {}): RunnerLoad => ({ id: `id-${name}`, name, state: 'active', capacity: 10, resident: 0, heartbeatAt: ago(1000), ...o });

describe('runner tokens', () => {
  it('are agwr_ and 32 random bytes in base64url, each new; stored as their sha256 in hex', () => {
    const a = newRunnerToken();
    const b = newRunnerToken();
    expect(a).toMatch(/^agwr_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a.slice(5), 'base64url')).toHaveLength(32);
    expect(a).not.toBe(b);
    expect(runnerTokenHash(a)).toBe(createHash('sha256').update(a).digest('hex'));
    expect(runnerTokenHash(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(runnerTokenHash(a)).not.toBe(runnerTokenHash(b));
  });

  it('a string without a token\'s shape is told apart before the database is asked', () => {
    expect(looksLikeRunnerToken(newRunnerToken())).toBe(true);
    expect(looksLikeRunnerToken('')).toBe(false);
    expect(looksLikeRunnerToken('agwr_short')).toBe(false);
    expect(looksLikeRunnerToken(`agwx_${'a'.repeat(43)}`)).toBe(false);
    expect(looksLikeRunnerToken(`agwr_${'a'.repeat(42)}!`)).toBe(false);
  });

  it('names are what a host name can be', () => {
    for (const ok of ['runner-2', 'r1', 'gpu.zone_a', '0']) expect(RUNNER_NAME.test(ok)).toBe(true);
    for (const bad of ['', 'Runner', '-r', 'a b', 'r/1', 'x'.repeat(64)]) expect(RUNNER_NAME.test(bad)).toBe(false);
  });
});

describe('runner health', () => {
  it('heartbeats every 5 s; stale after 30 s without one', () => {
    expect(runnerTimings()).toEqual({ heartbeatMs: 5000, leaseMs: 20_000 });
    expect(runnerTimings(60_000)).toEqual({ heartbeatMs: 10_000, leaseMs: 40_000 });
    expect(RUNNER_HEARTBEAT_TIMEOUT_MS).toBe(30_000);
    expect(runnerHealth({ heartbeatAt: ago(29_999) }, now)).toBe('healthy');
    expect(runnerHealth({ heartbeatAt: ago(30_000) }, now)).toBe('healthy');
    expect(runnerHealth({ heartbeatAt: ago(30_001) }, now)).toBe('stale');
    expect(runnerHealth({ heartbeatAt: null }, now)).toBe('stale');
    expect(runnerHealth({ heartbeatAt: ago(5000) }, now, 2000)).toBe('stale');
  });

  it('a runner may keep users while active or draining and heard from; lost and offline never', () => {
    expect(runnerHealthy(runner('a'), now)).toBe(true);
    expect(runnerHealthy(runner('a', { state: 'draining' }), now)).toBe(true);
    expect(runnerHealthy(runner('a', { state: 'lost' }), now)).toBe(false);
    expect(runnerHealthy(runner('a', { state: 'offline' }), now)).toBe(false);
    expect(runnerHealthy(runner('a', { heartbeatAt: ago(60_000) }), now)).toBe(false);
  });
});

describe('chooseRunner', () => {
  it('when every runner is full, takes one whose runtimes are not all busy (it stops an idle one), fewest busy first', () => {
    const full = [runner('a', { capacity: 4, resident: 4, busy: 3 }), runner('b', { capacity: 4, resident: 4, busy: 1 }), runner('c', { capacity: 4, resident: 4, busy: 4 })];
    expect(chooseRunner(full, now)?.name).toBe('b');
    // Room anywhere still wins over stopping someone's idle runtime.
    expect(chooseRunner([...full, runner('d', { capacity: 4, resident: 3, busy: 3 })], now)?.name).toBe('d');
    // Placements since the last heartbeat count as busy: they are about to take a turn.
    expect(chooseRunner(full, now, { placed: new Map([['id-b', 3]]) })?.name).toBe('a');
    // Every runtime busy everywhere: none.
    expect(chooseRunner([runner('a', { capacity: 2, resident: 2, busy: 2 }), runner('b', { capacity: 2, resident: 2 })], now)).toBeNull();
  });

  it('picks the least loaded by share of capacity, not by count', () => {
    // big: 8 of 40 (20 %); small: 3 of 10 (30 %).
    const pick = chooseRunner([runner('small', { capacity: 10, resident: 3 }), runner('big', { capacity: 40, resident: 8 })], now);
    expect(pick?.name).toBe('big');
  });

  it('breaks ties by fewer runtimes, then by name', () => {
    expect(chooseRunner([runner('b', { capacity: 20, resident: 2 }), runner('a', { capacity: 10, resident: 1 })], now)?.name).toBe('a');
    expect(chooseRunner([runner('b', { resident: 1 }), runner('a', { resident: 1 }), runner('c', { resident: 1 })], now)?.name).toBe('a');
  });

  it('only healthy active runners with room: not draining, lost, offline, stale, full or without capacity', () => {
    const none = [
      runner('draining', { state: 'draining' }),
      runner('lost', { state: 'lost' }),
      runner('offline', { state: 'offline' }),
      runner('stale', { heartbeatAt: ago(31_000) }),
      runner('never', { heartbeatAt: null }),
      runner('full', { capacity: 4, resident: 4 }),
      runner('zero', { capacity: 0 }),
    ];
    expect(chooseRunner(none, now)).toBeNull();
    expect(chooseRunner([...none, runner('ok', { resident: 9 })], now)?.name).toBe('ok');
  });

  it('counts placements made since the last heartbeat, so a burst of arrivals spreads', () => {
    const rs = [runner('a', { capacity: 4 }), runner('b', { capacity: 4 })];
    const placed = new Map<string, number>();
    const order: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = chooseRunner(rs, now, { placed })!;
      order.push(r.name);
      placed.set(r.id, (placed.get(r.id) ?? 0) + 1);
    }
    expect(order).toEqual(['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
    // Both full now.
    expect(chooseRunner(rs, now, { placed })).toBeNull();
  });

  it('spreads users in proportion to capacity', () => {
    const rs = [runner('a', { capacity: 10 }), runner('b', { capacity: 20 }), runner('c', { capacity: 30 })];
    const placed = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      const r = chooseRunner(rs, now, { placed })!;
      placed.set(r.id, (placed.get(r.id) ?? 0) + 1);
    }
    expect([placed.get('id-a'), placed.get('id-b'), placed.get('id-c')]).toEqual([5, 10, 15]);
  });

  it('leaves out the runners excluded (the one a drain moves users off) and, when asked, those without shared storage', () => {
    const rs = [runner('a'), runner('b', { resident: 5 }), runner('s', { resident: 8, sharedStorage: true })];
    expect(chooseRunner(rs, now, { exclude: ['id-a'] })?.name).toBe('b');
    expect(chooseRunner(rs, now, { exclude: ['id-a', 'id-b', 'id-s'] })).toBeNull();
    expect(chooseRunner(rs, now, { needShared: true })?.name).toBe('s');
    expect(chooseRunner([runner('a')], now, { needShared: true })).toBeNull();
  });
});

describe('placementVerdict', () => {
  const placed = { tenantId: 't1' };
  const remote = (o: Partial<RunnerLoad> = {}) => ({ ...runner('r', o), kind: 'remote' as const });
  it('keeps a user where they are while their runner is healthy, draining included (sticky)', () => {
    expect(placementVerdict(placed, remote(), 't1', now)).toEqual({ keep: true });
    expect(placementVerdict(placed, remote({ state: 'draining' }), 't1', now)).toEqual({ keep: true });
  });
  it('says why a placement must go: new, lost (marked or stale) or offline', () => {
    expect(placementVerdict(null, null, 't1', now)).toEqual({ keep: false, reason: 'new' });
    expect(placementVerdict({ tenantId: 'other' }, remote(), 't1', now)).toEqual({ keep: false, reason: 'new' });
    expect(placementVerdict(placed, remote({ state: 'lost' }), 't1', now)).toEqual({ keep: false, reason: 'lost' });
    expect(placementVerdict(placed, remote({ heartbeatAt: ago(45_000) }), 't1', now)).toEqual({ keep: false, reason: 'lost' });
    expect(placementVerdict(placed, remote({ state: 'offline' }), 't1', now)).toEqual({ keep: false, reason: 'offline' });
    expect(placementVerdict(placed, null, 't1', now)).toEqual({ keep: false, reason: 'offline' });
  });
  it('a serve\'s local runner has no heartbeat: its state alone says', () => {
    const local = (o: Partial<RunnerLoad> = {}) => ({ ...runner('local', { heartbeatAt: ago(86_400_000), ...o }), kind: 'local' as const });
    expect(placementVerdict(placed, local(), 't1', now)).toEqual({ keep: true });
    expect(placementVerdict(placed, local({ state: 'offline' }), 't1', now)).toEqual({ keep: false, reason: 'offline' });
  });
});

describe('ageText', () => {
  it('reads like "3s ago"', () => {
    expect(ageText(null, now)).toBe('never');
    expect(ageText(ago(3200), now)).toBe('3s ago');
    expect(ageText(ago(-500), now)).toBe('0s ago');
    expect(ageText(ago(119_000), now)).toBe('119s ago');
    expect(ageText(ago(4 * 60_000), now)).toBe('4m ago');
    expect(ageText(ago(3 * 3600_000), now)).toBe('3h ago');
  });
});

describe('capacity: what a runner says, up to its token\'s ceiling', () => {
  it('counts the report, capped at the ceiling; nonsense counts as nothing', () => {
    expect(cappedCapacity(40, 100)).toBe(40);
    expect(cappedCapacity(5000, 100)).toBe(100);
    expect(cappedCapacity(5000, null)).toBe(5000);
    expect(cappedCapacity(7.9, 100)).toBe(7);
    expect(cappedCapacity(-3, 100)).toBe(0);
    expect(cappedCapacity(Number.NaN, 100)).toBe(0);
    expect(cappedCapacity(Number.POSITIVE_INFINITY, 100)).toBe(0);
    expect(cappedCapacity(10, 0)).toBe(0);
  });

  it('a report over the ceiling, or a large change, is news once: the same figure again is not, nor within the hour', () => {
    const base = { ceiling: 100, notedAt: null, now };
    expect(capacityNews({ ...base, reported: 50, previous: null })).toBeNull();
    expect(capacityNews({ ...base, reported: 5000, previous: null })).toBe('over_ceiling');
    expect(capacityNews({ ...base, reported: 5000, previous: 5000 })).toBeNull();
    expect(capacityNews({ ...base, reported: 5001, previous: 5000 })).toBe('over_ceiling');
    expect(capacityNews({ ...base, reported: 40, previous: 10 })).toBe('large_change');
    expect(capacityNews({ ...base, reported: 10, previous: 40 })).toBe('large_change');
    // Small or slow changes are what hosts do (memory freed, a setting changed by one or two).
    expect(capacityNews({ ...base, reported: 54, previous: 50 })).toBeNull();
    expect(capacityNews({ ...base, reported: 4, previous: 1 })).toBeNull();
    expect(capacityNews({ ...base, reported: 60, previous: 80 })).toBeNull();
    // Noted within the hour: a runner flapping between figures is not noted at every beat.
    expect(capacityNews({ ...base, reported: 5000, previous: 10, notedAt: ago(CAPACITY_NOTE_EVERY_MS - 1000) })).toBeNull();
    expect(capacityNews({ ...base, reported: 5000, previous: 10, notedAt: ago(CAPACITY_NOTE_EVERY_MS + 1000) })).toBe('over_ceiling');
    // A local runner has no ceiling: only large changes are news.
    expect(capacityNews({ ...base, ceiling: null, reported: 5000, previous: null })).toBeNull();
  });
});
