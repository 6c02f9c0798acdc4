import { describe, expect, it } from 'vitest';
import { createListeners } from '../../src/lib/listeners.js';

describe('createListeners', () => {
  it('tells every listener in the order added; one that throws is reported and the rest are still told', () => {
    const failures: string[] = [];
    const told: string[] = [];
    const l = createListeners<[string, number]>((err) => failures.push(err.message));
    l.add((a, n) => told.push(`first ${a} ${n}`));
    l.add(() => {
      throw new Error('broken listener');
    });
    l.add((a, n) => told.push(`third ${a} ${n}`));
    expect(() => l.notify('x', 1)).not.toThrow();
    expect(told).toEqual(['first x 1', 'third x 1']);
    expect(failures).toEqual(['broken listener']);
  });

  it('a removed listener is no longer told; removing twice is harmless', () => {
    const told: number[] = [];
    const l = createListeners<[number]>(() => {});
    const off = l.add((n) => told.push(n));
    l.notify(1);
    off();
    off();
    l.notify(2);
    expect(told).toEqual([1]);
  });
});
