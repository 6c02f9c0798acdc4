import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor, INDEX_MAX_CHARS, indexRows, parseLimit, snippetOf } from '../../src/core/sessions/session-manage-fns.js';

describe('session list and search rules', () => {
  it('hands out a cursor it reads back exactly (microseconds kept), and refuses anything else naming cursor', () => {
    const c = { pinned: true, updatedAt: '2026-11-28 23:01:02.123456+00', id: '11111111-2222-4333-8444-555555555555' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    expect(decodeCursor(encodeCursor({ ...c, pinned: false }))).toEqual({ ...c, pinned: false });
    for (const bad of ['', 'nope', Buffer.from('[1,2,3]').toString('base64url'), Buffer.from('[1,"x","y"]').toString('base64url'), Buffer.from(`[2,"${c.updatedAt}","${c.id}"]`).toString('base64url'), Buffer.from(`[1,"2026-11-28'; drop table x","${c.id}"]`).toString('base64url')]) {
      expect(() => decodeCursor(bad), bad).toThrow(/^cursor:/);
    }
  });

  it('takes a limit within 1..max, defaulting', () => {
    expect(parseLimit(undefined, 100, 500)).toBe(100);
    expect(parseLimit(500, 100, 500)).toBe(500);
    for (const bad of [0, 501, 1.5, -1]) expect(() => parseLimit(bad, 100, 500)).toThrow(/^limit:/);
  });

  it('indexes the text a person reads: text parts of prompts and finished answers, not tool output, reasoning or injected text', () => {
    const rows = indexRows([
      { info: { id: 'msg_1', role: 'user' }, parts: [{ type: 'text', text: 'deploy it' }, { type: 'file', filename: 'a.txt' }] },
      {
        info: { id: 'msg_2', role: 'assistant', time: { completed: 1 } },
        parts: [
          { type: 'reasoning', text: 'secret thoughts' },
          { type: 'tool', tool: 'bash', state: { output: 'tool output words' } },
          { type: 'text', text: 'Done.' },
          { type: 'text', text: 'reminder', synthetic: true },
          { type: 'text', text: 'All \u0002fake\u0003 marks\u0000 go.' },
        ],
      },
      { info: { id: 'msg_3', role: 'assistant', time: {} }, parts: [{ type: 'text', text: 'still streaming' }] },
      { info: { id: 'msg_4', role: 'assistant', time: {}, error: { name: 'TurnLost' } }, parts: [{ type: 'text', text: 'cut short' }] },
      { info: { id: 'msg_5', role: 'user' }, parts: [{ type: 'tool', tool: 'x' }] },
      { info: { id: 'msg_6', role: 'system' }, parts: [{ type: 'text', text: 'no' }] },
    ]);
    expect(rows).toEqual([
      { messageId: 'msg_1', role: 'user', body: 'deploy it' },
      { messageId: 'msg_2', role: 'assistant', body: 'Done.\nAll fake marks go.' },
      { messageId: 'msg_4', role: 'assistant', body: 'cut short' },
    ]);
    const long = indexRows([{ info: { id: 'msg_7', role: 'user' }, parts: [{ type: 'text', text: 'y'.repeat(INDEX_MAX_CHARS + 5) }] }]);
    expect(long[0].body.length).toBe(INDEX_MAX_CHARS);
  });

  it('turns a headline into plain text and the ranges of its matched words', () => {
    const h = snippetOf('Drain \u0002each\u0003 node\n\n  then \u0002upgrade\u0003 the   kubelet ');
    expect(h.snippet).toBe('Drain each node then upgrade the kubelet');
    expect(h.highlights.map(([a, b]) => h.snippet.slice(a, b))).toEqual(['each', 'upgrade']);
    expect(snippetOf('no marks')).toEqual({ snippet: 'no marks', highlights: [] });
    // An unpaired mark highlights nothing.
    expect(snippetOf('a \u0003b\u0002 c')).toEqual({ snippet: 'a b c', highlights: [] });
  });
});
