import { describe, expect, it } from 'vitest';
import { withTimeout } from '../../src/lib/with-timeout.js';

describe('withTimeout', () => {
  it('gives the promise\'s result when it comes first, and its rejection', async () => {
    expect(await withTimeout(Promise.resolve(1), 1000, () => 2)).toBe(1);
    await expect(withTimeout(Promise.reject(new Error('boom')), 1000, () => 2)).rejects.toThrow('boom');
  });

  it('gives what onTimeout returns or throws once the time has passed', async () => {
    const never = new Promise<number>(() => {});
    expect(await withTimeout(never, 10, () => null)).toBeNull();
    await expect(withTimeout(never, 10, () => { throw new Error('timeout'); })).rejects.toThrow('timeout');
  });
});
