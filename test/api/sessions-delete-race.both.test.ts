import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_EVENTS_CHANNEL } from '../../src/core/sessions/session-stream.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/** Concurrent deletes of one session: exactly one wins; concurrent first creates all succeed. */
describe(`sessions: concurrent deletes and creates (${DB_MODE})`, () => {
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
    await expect.poll(() => published.filter((e) => e.sessionId === sessionId && e.type === 'session.deleted').length, { timeout: 10_000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(published.filter((e) => e.sessionId === sessionId && e.type === 'session.deleted')).toHaveLength(1);
  });

  it('a user\'s concurrent first sessions all succeed: their workspace is prepared once, not raced', async () => {
    // Several users at once, each with ten simultaneous first sessions: `git init` of one workspace
    // run twice at the same moment fails ("File exists"), which answered 500.
    const people = [...Array(6).keys()].map((i) => ({ handle: `gus${i}`, roles: ['member'] }));
    const fresh = await seedTenant(t, 'gamma', people);
    const tokens = await Promise.all(people.map((p) => signToken(t, { sub: fresh.ids[p.handle], tid: fresh.tenantId, roles: ['member'] })));
    const results = await Promise.all(tokens.flatMap((token) => Array.from({ length: 10 }, (_, i) => api(t, 'POST', '/v1/sessions', { token, body: { title: `parallel ${i}` } }))));
    expect(results.map((r) => r.status)).toEqual(Array(60).fill(201));
    for (const token of tokens) expect((await api(t, 'GET', '/v1/sessions', { token })).json.sessions).toHaveLength(10);
  });
});
