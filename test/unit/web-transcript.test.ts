import { describe, expect, it } from 'vitest';
import { applyEvent, mergeHistory, type Msg } from '../../src/web/transcript.js';

const ev = (type: string, properties: Record<string, unknown>) => ({ id: 'evt_1', type, properties });

describe('the dashboard transcript', () => {
  it('streams a reply: deltas append to their part, in order, also before the message itself arrives', () => {
    let m: Msg[] = [{ info: { id: 'msg_u', role: 'user' }, parts: [{ id: 'p0', type: 'text', text: 'hi' }] }];
    m = applyEvent(m, ev('message.part.delta', { messageID: 'msg_a', partID: 'p1', field: 'text', delta: 'Hel' }));
    m = applyEvent(m, ev('message.part.delta', { messageID: 'msg_a', partID: 'p1', field: 'text', delta: 'lo' }));
    expect(m[1]).toEqual({ info: { id: 'msg_a', role: 'assistant' }, parts: [{ id: 'p1', messageID: 'msg_a', type: 'text', text: 'Hello' }] });
    m = applyEvent(m, ev('message.updated', { info: { id: 'msg_a', role: 'assistant', cost: 0.002 } }));
    expect(m[1].info.cost).toBe(0.002);
    expect(m[1].parts[0].text).toBe('Hello');
  });

  it('replaces a part with its update (a tool call moving from running to completed) and removes it', () => {
    let m: Msg[] = [];
    const tool = { id: 'p2', messageID: 'msg_a', type: 'tool', tool: 'bash', state: { status: 'running', input: { command: 'ls' } } };
    m = applyEvent(m, ev('message.part.updated', { part: tool }));
    m = applyEvent(m, ev('message.part.updated', { part: { ...tool, state: { status: 'completed', output: 'a\nb' } } }));
    expect(m[0].parts).toHaveLength(1);
    expect(m[0].parts[0].state).toEqual({ status: 'completed', output: 'a\nb' });
    m = applyEvent(m, ev('message.part.removed', { messageID: 'msg_a', partID: 'p2' }));
    expect(m[0].parts).toEqual([]);
    m = applyEvent(m, ev('message.removed', { messageID: 'msg_a' }));
    expect(m).toEqual([]);
  });

  it('leaves the transcript as it is for events it does not know, or without the ids it needs', () => {
    const m: Msg[] = [{ info: { id: 'x', role: 'user' }, parts: [] }];
    expect(applyEvent(m, ev('session.idle', {}))).toBe(m);
    expect(applyEvent(m, ev('message.part.delta', { partID: 'p', delta: 'x' }))).toBe(m);
    expect(applyEvent(m, ev('message.part.updated', { part: { type: 'text' } }))).toBe(m);
  });

  it('merges history fetched late with what the stream already delivered: the stream is newer', () => {
    const history: Msg[] = [
      { info: { id: 'a', role: 'user' }, parts: [] },
      { info: { id: 'b', role: 'assistant' }, parts: [{ id: 'p', type: 'text', text: 'He' }] },
    ];
    const live: Msg[] = [
      { info: { id: 'b', role: 'assistant' }, parts: [{ id: 'p', type: 'text', text: 'Hello' }] },
      { info: { id: 'c', role: 'user' }, parts: [] },
    ];
    expect(mergeHistory(history, live).map((m) => [m.info.id, m.parts[0]?.text])).toEqual([
      ['a', undefined],
      ['b', 'Hello'],
      ['c', undefined],
    ]);
  });
});
