import { describe, expect, it } from 'vitest';
import { withLostTurns } from '../../src/core/sessions/sessions.service.js';

/** A lost turn in the transcript (sessions.service messages()): where its error shows. */
describe('withLostTurns', () => {
  const msg = (id: string, role: string, extra: Record<string, unknown> = {}) => ({ info: { id, role, sessionID: 's', time: { created: 1 }, ...extra }, parts: [] });
  const lost = (messageId: string) => ({ id: `t-${messageId}`, messageId, error: 'The agent\'s runtime stopped during this turn (x).', sentAt: new Date(5000) });
  const error = { name: 'TurnLost', data: { message: 'The agent\'s runtime stopped during this turn (x).', code: 'turn_lost' } };

  it('leaves a transcript without lost turns as it is', () => {
    const m = [msg('msg_1', 'user'), msg('msg_2', 'assistant', { parentID: 'msg_1' })];
    expect(withLostTurns(m, [], 's')).toBe(m);
  });

  it('puts the error on the last answer to the lost prompt, not on other answers', () => {
    const m = [msg('msg_1', 'user'), msg('msg_2', 'assistant', { parentID: 'msg_1' }), msg('msg_3', 'user'), msg('msg_4', 'assistant', { parentID: 'msg_3' }), msg('msg_5', 'assistant', { parentID: 'msg_3' })];
    const out = withLostTurns(m, [lost('msg_3')], 's');
    expect(out.map((x) => x.info.error ?? null)).toEqual([null, null, null, null, error]);
    expect(m[4].info).not.toHaveProperty('error');
  });

  it('keeps an error the runtime wrote itself', () => {
    const own = { name: 'MessageAbortedError', data: { message: 'aborted' } };
    const out = withLostTurns([msg('msg_1', 'user'), msg('msg_2', 'assistant', { parentID: 'msg_1', error: own })], [lost('msg_1')], 's');
    expect(out[1].info.error).toEqual(own);
  });

  it('adds an answer holding only the error after a prompt that got none, or where its id sorts when the runtime never stored it', () => {
    const m = [msg('msg_1', 'user'), msg('msg_3', 'user'), msg('msg_4', 'assistant', { parentID: 'msg_3' })];
    const out = withLostTurns(m, [lost('msg_1'), lost('msg_5')], 's');
    expect(out.map((x) => x.info.id)).toEqual(['msg_1', 'msg_1_lost', 'msg_3', 'msg_4', 'msg_5_lost']);
    expect(out[1]).toEqual({ info: { id: 'msg_1_lost', sessionID: 's', role: 'assistant', parentID: 'msg_1', time: { created: 5000, completed: 5000 }, error }, parts: [] });
  });

  it('puts back what the cut answer had streamed where the runtime kept less, or adds the answer it never stored', () => {
    const m = [
      msg('msg_1', 'user'),
      { info: { id: 'msg_2', role: 'assistant', sessionID: 's', parentID: 'msg_1', time: { created: 2 } }, parts: [{ id: 'prt_a', messageID: 'msg_2', sessionID: 's', type: 'text', text: '' }] },
    ];
    const partial = [
      { messageId: 'msg_2', parts: [{ id: 'prt_a', text: 'The first half of' }, { id: 'prt_b', text: 'a second part' }] },
      { messageId: 'msg_3', parts: [{ id: 'prt_c', text: 'a step the runtime never stored' }] },
      { messageId: 'msg_4', parts: [{ id: 'prt_d', text: '' }] },
    ];
    const out = withLostTurns(m, [{ ...lost('msg_1'), partial }], 's');
    expect(out.map((x) => x.info.id)).toEqual(['msg_1', 'msg_2', 'msg_3']);
    expect(out[1].parts).toEqual([
      { id: 'prt_a', messageID: 'msg_2', sessionID: 's', type: 'text', text: 'The first half of' },
      { id: 'prt_b', messageID: 'msg_2', sessionID: 's', type: 'text', text: 'a second part' },
    ]);
    expect(out[1].info.error).toBeUndefined();
    expect(out[2]).toEqual({
      info: { id: 'msg_3', sessionID: 's', role: 'assistant', parentID: 'msg_1', time: { created: 5000 }, error },
      parts: [{ id: 'prt_c', messageID: 'msg_3', sessionID: 's', type: 'text', text: 'a step the runtime never stored' }],
    });
    // Text the runtime kept in full (longer than what streamed) stays its own.
    const kept = withLostTurns([m[0], { ...m[1], parts: [{ ...m[1].parts[0], text: 'The first half of it, all of it' }] }], [{ ...lost('msg_1'), partial: partial.slice(0, 1) }], 's');
    expect(kept[1].parts[0].text).toBe('The first half of it, all of it');
  });
});
