import { describe, expect, it } from 'vitest';
import { createPromiseCache } from '../../src/lib/promise-cache.js';

describe('promise cache', () => {
  it('shares one load among callers within its time to live, and loads again after it', async () => {
    let t = 0;
    let loads = 0;
    const c = createPromiseCache<number>({ ttlMs: 100, now: () => t });
    const load = () => Promise.resolve(++loads);
    const [a, b] = await Promise.all([c.get('k', load), c.get('k', load)]);
    expect([a, b, loads]).toEqual([1, 1, 1]);
    t = 99;
    expect(await c.get('k', load)).toBe(1);
    t = 100;
    expect(await c.get('k', load)).toBe(2);
    expect(await c.peek('k')).toBe(2);
  });

  it('forgets a load that failed, so the next caller tries again', async () => {
    const c = createPromiseCache<string>({ ttlMs: 60_000 });
    await expect(c.get('k', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    expect(await c.get('k', () => Promise.resolve('up'))).toBe('up');
  });

  it('stays bounded: past its size it starts afresh', async () => {
    let loads = 0;
    const c = createPromiseCache<number>({ ttlMs: 60_000, max: 2 });
    for (const k of ['a', 'b', 'c']) await c.get(k, () => Promise.resolve(++loads));
    expect(c.peek('a')).toBeUndefined();
    expect(await c.peek('c')).toBe(3);
    c.delete('c');
    expect(c.peek('c')).toBeUndefined();
  });
});
