import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { mapRuntimeEvent } from '../../src/core/runtime/event-mapper.js';
import { createPartialAnswers } from '../../src/core/sessions/partial-answers.js';
import type { PartialAnswer } from '../../src/core/sessions/turns.repo.js';

/**
 * What a turn's answer streamed, kept as it streams (agent_turns.partial): the runtime's events as the
 * session stream hands them over, mapped by the real event mapper, against a recording repo.
 */
describe('partial answers', () => {
  const ref = { tenantId: 't1', ownerId: 'u1', id: 's1' };
  const ev = (type: string, properties: Record<string, unknown>) => mapRuntimeEvent({ payload: { type, properties: { sessionID: 'ses_1', ...properties } } })!;
  const assistant = (id: string, parentID: string) => ev('message.updated', { info: { id, sessionID: 'ses_1', role: 'assistant', parentID, time: { created: 1 } } });
  const textPart = (messageID: string, id: string, text: string) => ev('message.part.updated', { part: { id, sessionID: 'ses_1', messageID, type: 'text', text } });
  const delta = (messageID: string, partID: string, d: string) => ev('message.part.delta', { messageID, partID, field: 'text', delta: d });

  function setUp(everyMs = 20, turns = new Set(['msg_u1', 'msg_u9'])) {
    const saved: Array<{ tenantId: string; messageId: string; partial: PartialAnswer }> = [];
    const partials = createPartialAnswers({
      db: {} as never,
      // Only prompts that are turns of the session are saved (the repo's statement names the session and user).
      repo: {
        savePartial: async (_q, t, partial) => {
          if (!turns.has(t.messageId)) return false;
          saved.push({ tenantId: t.tenantId, messageId: t.messageId, partial });
          return true;
        },
      },
      log: silentLogger,
      everyMs,
    });
    return { partials, saved, last: () => saved.at(-1)?.partial };
  }

  it('keeps the text of each answer message\'s text parts, by the prompt it answers, saved at most every interval', async () => {
    const { partials, saved, last } = setUp(50);
    partials.seen(ref, assistant('msg_a1', 'msg_u1'));
    partials.seen(ref, textPart('msg_a1', 'prt_1', ''));
    for (const w of ['Hello ', 'from ', 'the ', 'model']) partials.seen(ref, delta('msg_a1', 'prt_1', w));
    // A reasoning part's deltas are not the answer.
    partials.seen(ref, ev('message.part.updated', { part: { id: 'prt_r', sessionID: 'ses_1', messageID: 'msg_a1', type: 'reasoning', text: '' } }));
    partials.seen(ref, delta('msg_a1', 'prt_r', 'thinking…'));
    expect(saved).toEqual([]);
    await expect.poll(() => saved.length).toBe(1);
    expect(saved[0]).toMatchObject({ tenantId: 't1', messageId: 'msg_u1' });
    expect(last()).toEqual([{ messageId: 'msg_a1', parts: [{ id: 'prt_1', text: 'Hello from the model' }] }]);
    // A second step of the same turn, and a part update carrying the whole text so far.
    partials.seen(ref, assistant('msg_a2', 'msg_u1'));
    partials.seen(ref, textPart('msg_a2', 'prt_2', 'Next step'));
    await partials.flushUser('u1');
    expect(last()).toEqual([
      { messageId: 'msg_a1', parts: [{ id: 'prt_1', text: 'Hello from the model' }] },
      { messageId: 'msg_a2', parts: [{ id: 'prt_2', text: 'Next step' }] },
    ]);
  });

  it('forgets a session\'s answers when its turn ends (the runtime has them), and saves nothing unchanged', async () => {
    const { partials, saved } = setUp(10_000);
    partials.seen(ref, assistant('msg_a1', 'msg_u1'));
    partials.seen(ref, textPart('msg_a1', 'prt_1', 'done'));
    expect(partials.tracked).toBe(1);
    partials.seen(ref, ev('session.idle', {}));
    expect(partials.tracked).toBe(0);
    await partials.flushAll();
    expect(saved).toEqual([]);
  });

  it('saves at once what a user\'s turns streamed when asked (their runtime went away), and everything when the service stops', async () => {
    const { partials, saved } = setUp(10_000);
    partials.seen(ref, assistant('msg_a1', 'msg_u1'));
    partials.seen(ref, textPart('msg_a1', 'prt_1', 'mine'));
    const other = { tenantId: 't1', ownerId: 'u2', id: 's2' };
    partials.seen(other, ev('message.updated', { info: { id: 'msg_b1', sessionID: 'ses_2', role: 'assistant', parentID: 'msg_u9', time: { created: 1 } } }));
    partials.seen(other, ev('message.part.updated', { part: { id: 'prt_9', sessionID: 'ses_2', messageID: 'msg_b1', type: 'text', text: 'theirs' } }));
    await partials.flushUser('u1');
    expect(saved.map((x) => x.messageId)).toEqual(['msg_u1']);
    await partials.flushAll();
    expect(saved.map((x) => x.messageId)).toEqual(['msg_u1', 'msg_u9']);
    expect(partials.tracked).toBe(0);
  });

  it('stops following answers to prompts that are no turn of the session (a runtime making them up), and follows few turns of one user at once', async () => {
    const { partials, saved } = setUp(10_000);
    partials.seen(ref, assistant('msg_a1', 'msg_made_up'));
    partials.seen(ref, textPart('msg_a1', 'prt_1', 'noise'));
    expect(partials.tracked).toBe(1);
    await partials.flushUser('u1');
    expect(saved).toEqual([]);
    expect(partials.tracked).toBe(0);
    partials.seen(ref, delta('msg_a1', 'prt_1', ' more'));
    expect(partials.tracked).toBe(0);
    // Endless invented prompts: a handful followed, no more.
    for (let i = 0; i < 50; i++) {
      partials.seen(ref, assistant(`msg_x${i}`, `msg_p${i}`));
      partials.seen(ref, textPart(`msg_x${i}`, `prt_x${i}`, 'x'));
    }
    expect(partials.tracked).toBe(8);
  });
});
