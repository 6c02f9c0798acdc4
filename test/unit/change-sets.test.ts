import { describe, expect, it } from 'vitest';
import { capDiffs, totalsOf, type FileChange } from '../../src/core/sessions/change-sets.js';

const file = (path: string, diff: string, additions = 1, deletions = 0): FileChange => ({ path, status: 'modified', additions, deletions, binary: false, diff, truncated: false });

describe('change sets', () => {
  it('keeps an answer within its diff budget: files past it keep their counts, not their diff', () => {
    const out = capDiffs([file('a', 'x'.repeat(60)), file('b', 'y'.repeat(60)), file('c', 'z'.repeat(10))], 100);
    expect(out.map((f) => [f.path, f.diff.length, f.truncated])).toEqual([['a', 60, false], ['b', 0, true], ['c', 0, true]]);
    expect(out[1].additions).toBe(1);
  });

  it('totals files and lines', () => {
    expect(totalsOf([file('a', '', 3, 1), file('b', '', 2, 5)])).toEqual({ files: 2, additions: 5, deletions: 6 });
  });
});
