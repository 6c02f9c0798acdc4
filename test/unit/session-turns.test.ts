import { describe, expect, it } from 'vitest';
import { answerText, turnOutcome } from '../../src/core/sessions/session-turns.js';
import type { SessionRow } from '../../src/core/sessions/sessions.repo.js';

/**
 * How an answer reads (what a chat gateway relays, a trajectory records, a plan's subtask returns) and
 * how a plan reads a turn's end from the transcript: one function each, in the sessions capability.
 */
describe('session turns', () => {
  const part = (type: string, text: string, extra: Record<string, unknown> = {}) => ({ id: `prt_${text}`, sessionID: 'up', messageID: 'm', type, text, ...extra });
  const answer = (id: string, parts: ReturnType<typeof part>[], extra: Record<string, unknown> = {}) => ({
    info: { id, sessionID: 'up', role: 'assistant', parentID: 'msg_1', time: { created: 1, completed: 2 }, ...extra },
    parts,
  });

  it('an answer is its text parts, never text the service injected (memories) nor tool output', () => {
    const m = answer('a1', [part('text', '  Done: 3 files changed. '), part('text', 'Relevant memories: the deploy key is …', { synthetic: true }), part('tool', 'bash output'), part('text', 'Next: run the tests.')]);
    expect(answerText(m)).toBe('Done: 3 files changed. \nNext: run the tests.');
  });

  const session = { id: 's1', tenantId: 't1', ownerId: 'u1', upstreamId: 'up' } as SessionRow;
  const deps = (turn: { messageId: string; status: string; error: string | null } | null, messages: unknown[]) => ({
    db: {} as never,
    turnsRepo: { turn: async () => turn },
    pool: { client: async () => ({ messages: async () => messages }) } as never,
  });

  it('a turn ends with the last answer\'s text, or every answer\'s when the last has none', async () => {
    const sent = { messageId: 'msg_1', status: 'done', error: null };
    expect(await turnOutcome(deps(sent, [answer('a1', [part('text', 'first')]), answer('a2', [part('text', 'final')])]), session, 't')).toEqual({ done: true, error: null, text: 'final' });
    expect(await turnOutcome(deps(sent, [answer('a1', [part('text', 'first')]), answer('a2', [part('tool', 'x')])]), session, 't')).toEqual({ done: true, error: null, text: 'first' });
  });

  it('a turn is not over while its last answer runs; it failed when an answer holds an error or the runner gave up', async () => {
    const sent = { messageId: 'msg_1', status: 'sent', error: null };
    expect(await turnOutcome(deps(sent, [answer('a1', [part('text', 'half')], { time: { created: 1 } })]), session, 't')).toEqual({ done: false });
    const refused = answer('a1', [], { error: { name: 'ProviderError', data: { message: 'quota' } } });
    expect(await turnOutcome(deps(sent, [refused]), session, 't')).toEqual({ done: true, error: 'ProviderError: quota', text: '' });
    expect(await turnOutcome(deps({ messageId: 'msg_1', status: 'lost', error: null }, []), session, 't')).toEqual({ done: true, error: 'the agent runtime stopped during the turn', text: '' });
    expect(await turnOutcome(deps(null, []), session, 't')).toEqual({ done: true, error: 'its turn is gone', text: '' });
  });
});
