import { describe, expect, it } from 'vitest';
import { listQuery, resultHref, snippetPieces } from '../../src/web/sessions-list.js';

describe('the dashboard session list and search helpers', () => {
  it('asks the list for the view, template and page chosen', () => {
    expect(listQuery('active', '', null)).toBe('?limit=50');
    expect(listQuery('pinned', 'reviewer', null)).toBe('?pinned=true&template=reviewer&limit=50');
    expect(listQuery('archived', '', 'abc', 10)).toBe('?state=archived&limit=10&cursor=abc');
    expect(listQuery('all', 'a b', null)).toBe('?state=all&template=a+b&limit=50');
  });

  it('opens a result at its message, or at the session for a title match', () => {
    expect(resultHref({ sessionId: 's1', messageId: 'msg_01' })).toBe('#/sessions/s1?m=msg_01');
    expect(resultHref({ sessionId: 's1', messageId: null })).toBe('#/sessions/s1');
  });

  it('cuts a snippet into plain and matched pieces, ignoring ranges out of bounds or overlapping', () => {
    expect(snippetPieces('drain each node', [[6, 10], [0, 5]])).toEqual([
      { text: 'drain', hit: true },
      { text: ' ', hit: false },
      { text: 'each', hit: true },
      { text: ' node', hit: false },
    ]);
    expect(snippetPieces('abc', [[1, 9], [2, 1], [0, 2], [1, 3]])).toEqual([{ text: 'ab', hit: true }, { text: 'c', hit: false }]);
    expect(snippetPieces('', [])).toEqual([]);
  });
});
