import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/kernel/errors.js';
import { changedPeriods, cutoffs, effectivePeriods, fullBatch, keepEverything, parsePeriod, storedPeriods } from '../../src/core/retention/retention-fns.js';

const fieldOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return { message: (err as Error).message, details: (err as ValidationError).details as Record<string, unknown> };
  }
  throw new Error('expected a ValidationError');
};

describe('retention rules', () => {
  it('keeps everything forever unless a period is stored, and ignores what it cannot read', () => {
    expect(storedPeriods({})).toEqual(keepEverything());
    expect(storedPeriods({ retention: { sessions: 90, usage: 'x', trajectories: 0, audit: 400 } })).toEqual({ sessions: 90, usage: null, trajectories: null, audit: 400 });
  });

  it('changes only the kinds named, and null keeps forever again', () => {
    const now = { sessions: 90, usage: 400, trajectories: null, audit: 730 };
    expect(changedPeriods(now, { trajectories: 30, usage: null }, 365)).toEqual({ sessions: 90, usage: null, trajectories: 30, audit: 730 });
  });

  it('refuses an audit period under the floor, naming the field and the floor', () => {
    const e = fieldOf(() => changedPeriods(keepEverything(), { audit: 30 }, 365));
    expect(e.message).toMatch(/^audit: 30 days .* 365 days/);
    expect(e.details).toEqual({ field: 'audit', floorDays: 365 });
    expect(changedPeriods(keepEverything(), { audit: 365 }, 365).audit).toBe(365);
    expect(changedPeriods(keepEverything(), { audit: null }, 365).audit).toBeNull();
  });

  it('refuses periods that are not whole days in range, and unknown kinds', () => {
    expect(fieldOf(() => changedPeriods(keepEverything(), { sessions: 0 }, 365)).details.field).toBe('sessions');
    expect(fieldOf(() => changedPeriods(keepEverything(), { usage: 1.5 }, 365)).details.field).toBe('usage');
    expect(fieldOf(() => changedPeriods(keepEverything(), { memories: 3 } as never, 365)).details.field).toBe('memories');
  });

  it('applies a floor raised after the period was set', () => {
    expect(effectivePeriods({ sessions: 10, usage: null, trajectories: null, audit: 400 }, 730)).toEqual({ sessions: 10, usage: null, trajectories: null, audit: 730 });
    expect(effectivePeriods(keepEverything(), 730).audit).toBeNull();
  });

  it('cuts each kind off its period before the clock\'s now, and keeps kinds without one', () => {
    const now = new Date('2025-06-30T12:00:00Z');
    const c = cutoffs(now, { sessions: 90, usage: null, trajectories: 1, audit: 365 });
    expect(c.sessions?.toISOString()).toBe('2025-04-01T12:00:00.000Z');
    expect(c.usage).toBeNull();
    expect(c.trajectories?.toISOString()).toBe('2025-06-29T12:00:00.000Z');
    expect(c.audit?.toISOString()).toBe('2024-06-30T12:00:00.000Z');
  });

  it('reads command-line periods', () => {
    expect(parsePeriod('90d', '--sessions')).toBe(90);
    expect(parsePeriod('400', '--usage')).toBe(400);
    expect(parsePeriod('12w', '--usage')).toBe(84);
    expect(parsePeriod('2y', '--audit')).toBe(730);
    expect(parsePeriod('keep', '--audit')).toBeNull();
    expect(fieldOf(() => parsePeriod('soon', '--sessions')).details.field).toBe('--sessions');
    expect(fieldOf(() => parsePeriod('0d', '--usage')).details.field).toBe('--usage');
  });

  it('goes on with another round only when a kind filled its batch', () => {
    expect(fullBatch({ usage: 100, audit: 3 }, 100)).toBe(true);
    expect(fullBatch({ usage: 99, audit: 3 }, 100)).toBe(false);
  });
});
