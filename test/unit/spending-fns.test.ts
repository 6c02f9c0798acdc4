import { describe, expect, it } from 'vitest';
import { available, fitCall, MIN_OUTPUT_TOKENS, worstCase, type CallPrice } from '../../src/core/usage/spending-fns.js';

// $2 per million input tokens, $8 per million output tokens; 1,000 input tokens, asking for 4,000 out.
const price: CallPrice = { inputUsd: 0.002, outputUsdPerToken: 8e-6, maxOutput: 4000 };

describe('fitCall', () => {
  it('lets a call whose worst case fits run as asked, holding its worst case', () => {
    expect(worstCase(price)).toBeCloseTo(0.034, 12);
    expect(fitCall(price, 1)).toEqual({ ok: true, holdUsd: worstCase(price), maxOutput: 4000, cut: false });
    expect(fitCall(price, null)).toEqual({ ok: true, holdUsd: worstCase(price), maxOutput: 4000, cut: false });
  });
  it('cuts a call that does not fit to half of what is left, so calls side by side all find room', () => {
    const fit = fitCall(price, 0.02);
    expect(fit).toMatchObject({ ok: true, cut: true });
    if (!fit.ok) throw new Error('refused');
    expect(fit.maxOutput).toBe(Math.floor((0.01 - 0.002) / 8e-6));
    expect(fit.holdUsd).toBeLessThanOrEqual(0.01 + 1e-12);
    // Any number of calls, each taking at most half of what the others left, stays within the limit.
    let left = 0.02;
    let spent = 0;
    for (let i = 0; i < 20; i++) {
      const f = fitCall(price, left);
      if (!f.ok) break;
      spent += f.holdUsd;
      left -= f.holdUsd;
    }
    expect(spent).toBeLessThanOrEqual(0.02 + 1e-12);
  });
  it('refuses when even a cut call could not pay its input and MIN_OUTPUT_TOKENS, or nothing is left', () => {
    const need = 0.002 + MIN_OUTPUT_TOKENS * 8e-6;
    expect(fitCall(price, 2 * need - 1e-6)).toEqual({ ok: false, needUsd: need });
    expect(fitCall(price, 2 * need + 1e-6)).toMatchObject({ ok: true, cut: true });
    expect(fitCall(price, 0)).toMatchObject({ ok: false });
    expect(fitCall(price, -1)).toMatchObject({ ok: false });
  });
  it('a call asking for less than MIN_OUTPUT_TOKENS needs room for only what it asks', () => {
    const tiny: CallPrice = { inputUsd: 0.001, outputUsdPerToken: 8e-6, maxOutput: 10 };
    expect(fitCall(tiny, 0.00109)).toMatchObject({ ok: true, cut: false });
  });
  it('a free model\'s calls are held at their input; one whose input alone is too much is refused', () => {
    const free: CallPrice = { inputUsd: 0.5, outputUsdPerToken: 0, maxOutput: 4000 };
    expect(fitCall(free, 1)).toEqual({ ok: true, holdUsd: 0.5, maxOutput: 4000, cut: false });
    expect(fitCall(free, 0.4)).toMatchObject({ ok: false });
  });
});

describe('available', () => {
  it('is the smaller room of the two limits, and says which binds', () => {
    expect(available({ monthSpent: 5, turnSpent: 1 })).toEqual({ usd: null, limit: null, limitUsd: null, spentUsd: 0 });
    expect(available({ monthlyLimit: 10, monthSpent: 4, turnSpent: 0 })).toEqual({ usd: 6, limit: 'monthly', limitUsd: 10, spentUsd: 4 });
    expect(available({ perRequestLimit: 0.5, monthSpent: 4, turnSpent: 0.1 })).toMatchObject({ usd: 0.4, limit: 'per_request', spentUsd: 0.1 });
    expect(available({ monthlyLimit: 10, perRequestLimit: 0.5, monthSpent: 9.9, turnSpent: 0.1 })).toMatchObject({ limit: 'monthly', limitUsd: 10, spentUsd: 9.9 });
    expect(available({ monthlyLimit: 10, perRequestLimit: 0.5, monthSpent: 1, turnSpent: 0.6 }).usd).toBeCloseTo(-0.1, 12);
  });
});
