import { describe, expect, it } from 'vitest';
import { withMoves } from '../../src/core/sessions/sessions.service.js';

/**
 * A transcript whose runtime session was started anew on another runner host says so where it happened
 *: the earlier turns are on the host that was lost, never silently missing.
 */
describe('withMoves', () => {
  const msg = (id: string, role: string) => ({ info: { id, role, sessionID: 's' }, parts: [] });
  const at = new Date('2026-12-01T10:00:00Z');

  it('puts one notice before the first prompt the new runtime session got, naming how many turns stayed behind', () => {
    const out = withMoves([msg('msg_b1', 'user'), msg('msg_b2', 'assistant')], [{ beforeMessageId: 'msg_b1', turns: 2, at }], 's');
    expect(out.map((m) => m.info.id)).toEqual(['msg_b1_moved', 'msg_b1', 'msg_b2']);
    expect(out[0].info).toMatchObject({ role: 'assistant', sessionID: 's', time: { created: at.getTime(), completed: at.getTime() }, error: { name: 'RuntimeMoved', data: { code: 'runtime_moved', turns: 2 } } });
    expect(out[0].info.error.data.message).toMatch(/^The 2 earlier turns of this conversation ran on a runner host that was lost/);
  });

  it('one turn is one; none (nothing had run there) says nothing; a prompt the runtime never stored puts it at the end', () => {
    expect(withMoves([], [{ beforeMessageId: 'msg_x', turns: 1, at }], 's')[0].info.error.data.message).toMatch(/^The earlier turn of this conversation .* its messages/);
    expect(withMoves([msg('msg_a', 'user')], [{ beforeMessageId: 'msg_a', turns: 0, at }], 's')).toEqual([msg('msg_a', 'user')]);
    const two = withMoves([msg('msg_a', 'user'), msg('msg_c', 'user')], [{ beforeMessageId: 'msg_a', turns: 1, at }, { beforeMessageId: 'msg_c', turns: 1, at }], 's');
    expect(two.map((m) => m.info.id)).toEqual(['msg_a_moved', 'msg_a', 'msg_c_moved', 'msg_c']);
    expect(withMoves([msg('msg_a', 'user')], [{ beforeMessageId: 'msg_z', turns: 3, at }], 's').map((m) => m.info.id)).toEqual(['msg_a', 'msg_z_moved']);
  });
});
