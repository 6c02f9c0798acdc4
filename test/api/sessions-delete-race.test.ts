import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_EVENTS_CHANNEL } from '../../src/core/sessions/session-stream.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/** Concurrent deletes of one session: exactly one wins (issue 11, finding 13). */
describe(`sessions: concurrent deletes (${DB_MODE})`, () => {
  let t: TestApp;
  let token: string;
  let other: string;
  const published: Array<{ sessionId: string; type: string }> = [];
  let unsubscribe: () => Promise<void>;

  beforeAll(async () => {
    t = await startTestApp();
    const acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    token = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    const beta = await seedTenant(t, 'beta', [{ handle: 'bea', roles: ['member'] }]);
    other = await signToken(t, { sub: beta.ids.bea, tid: beta.tenantId, roles: ['member'] });
    // What every process's session streams hear: one session.deleted is what subscribers get.
    unsubscribe = await t.opened.core.bus.subscribe(SESSION_EVENTS_CHANNEL, (p) => {
      const e = p as { sessionId: string; event: { type: string } };
      published.push({ sessionId: e.sessionId, type: e.event.type });
    });
  });
  afterAll(async () => {
    await unsubscribe?.();
    await t?.close();
  });

  it('answers one 204 and 404 to the rest, with one audit entry and one session.deleted event', async () => {
    const sessionId = (await api(t, 'POST', '/v1/sessions', { token, body: { title: 'doomed' } })).json.sessionId;
    // Another tenant's delete of it changes nothing.
    expect((await api(t, 'DELETE', `/v1/sessions/${sessionId}`, { token: other })).status).toBe(404);
    const results = await Promise.all(Array.from({ length: 10 }, () => api(t, 'DELETE', `/v1/sessions/${sessionId}`, { token })));
    expect(results.map((r) => r.status).sort()).toEqual([204, ...Array(9).fill(404)]);
    expect((await api(t, 'GET', '/v1/sessions', { token })).json.sessions).toEqual([]);

    const audit = await t.opened.db.query(`select id from audit_log where action = 'session.delete' and session_id = $1`, [sessionId]);
    expect(audit.rows).toHaveLength(1);
    // Events arrive after commit (through LISTEN/NOTIFY on PostgreSQL): wait, then count.
    await expect.poll(() => published.filter((e) => e.sessionId === sessionId && e.type === 'session.deleted').length, { timeout: 5000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(published.filter((e) => e.sessionId === sessionId && e.type === 'session.deleted')).toHaveLength(1);
  });
});
