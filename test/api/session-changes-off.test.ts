import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { seedPeople } from '../helpers/runtime.js';

/** AGENTWS_RUNTIME_SNAPSHOTS=off: the runtimes keep no snapshots, so nothing is listed and undo is refused (no runtime needed). */
describe('sessions: what changed with snapshots off', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_RUNTIME_SNAPSHOTS: 'off' } });
  }, 60_000);
  afterAll(async () => t?.close());

  it('lists nothing and refuses undo and redo with 409 snapshots_off; another user is still 404', async () => {
    const { tokens } = await seedPeople(t, 'acme');
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'off' } })).json.sessionId as string;
    const listed = await api(t, 'GET', `/v1/sessions/${sessionId}/changes`, { token: tokens.member });
    expect(listed.status).toBe(200);
    expect(listed.json).toMatchObject({ sessionId, messageId: null, files: [], turns: [], reverted: null, snapshots: false });
    for (const [path, body] of [['revert', { messageId: 'msg_abc123' }], ['unrevert', undefined]] as const) {
      const refused = await api(t, 'POST', `/v1/sessions/${sessionId}/${path}`, { token: tokens.member, body });
      expect(refused.status).toBe(409);
      expect(refused.json).toMatchObject({ error: 'snapshots_off', message: expect.stringContaining('AGENTWS_RUNTIME_SNAPSHOTS=off') });
      expect((await api(t, 'POST', `/v1/sessions/${sessionId}/${path}`, { token: tokens.owner, body })).status).toBe(404);
    }
    expect((await api(t, 'GET', `/v1/sessions/${sessionId}/changes?messageId=nope`, { token: tokens.member })).status).toBe(400);
  });
});
