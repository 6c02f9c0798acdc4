import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { RuntimeEvent } from '../../src/core/runtime/runtime-events.js';
import { ascendingId } from '../../src/core/runtime/runtime-ids.js';
import { buildApp, type App } from '../../src/http/build-app.js';
import { api, freePort, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Any serve, any session: the serve whose pool follows a user's runtime (A) handles its events
 * and every serve's SSE clients get the frames; a client moving from one serve to another with
 * Last-Event-ID gets exactly what it missed. On PostgreSQL, B is a second core and HTTP app on the same
 * database (another `aws serve`); embedded mode has one process, so there B is A.
 *
 * The runtime's events are fed to A's session streams where its upstream connection hands them over
 * (`streams.ingest`, what the pool's onChange connects), in the runtime's own shapes and ascending ids.
 */
describe(`any serve answers any session's stream (${DB_MODE})`, () => {
  let a: TestApp;
  let b: { opened: OpenedCore; app: App; url: string } | null = null;
  let token = '';
  let sessionId = '';
  let owner = { tenantId: '', userId: '' };
  const UPSTREAM = 'ses_anyServeUpstream01';

  beforeAll(async () => {
    a = await startTestApp();
    await a.opened.core.streams.start();
    if (DB_MODE === 'postgres') {
      const config = a.env.config();
      const opened = await openCore(config, silentLogger);
      const app = await buildApp(opened.core, config);
      const port = await freePort();
      await app.listen({ host: '127.0.0.1', port });
      await opened.core.streams.start();
      b = { opened, app, url: `http://127.0.0.1:${port}` };
    }
    const { tenantId, ids } = await seedTenant(a, 'anyserve');
    owner = { tenantId, userId: ids.owner };
    token = await signToken(a, { sub: ids.owner, tid: tenantId, roles: ['owner'] });
    sessionId = (await api(a, 'POST', '/v1/sessions', { token, body: { title: 'moving client' } })).json.sessionId;
    // As after its first prompt: the session has its runtime's session.
    await a.opened.db.query(`update agent_sessions set upstream_id = $1 where id = $2`, [UPSTREAM, sessionId]);
  });

  afterAll(async () => {
    if (b) {
      await b.app.close();
      await b.opened.close();
    }
    await a?.close();
  });

  const urlA = () => `${a.url}/v1/sessions/${sessionId}/events`;
  const urlB = () => `${b?.url ?? a.url}/v1/sessions/${sessionId}/events`;
  const auth = () => ({ authorization: `Bearer ${token}` });

  const delta = (n: number): RuntimeEvent => ({
    directory: '/workspace',
    payload: { id: ascendingId('evt'), type: 'message.part.delta', properties: { sessionID: UPSTREAM, messageID: 'msg_a1', partID: 'prt_t1', field: 'text', delta: `word${n} ` } },
  });
  /** A part far over NOTIFY's 8000 bytes, with characters of 2, 3 and 4 bytes in UTF-8 across the cuts. */
  const BIG_TEXT = 'début ✓ 😀 '.repeat(1500) + 'x'.repeat(9000);
  const big = (): RuntimeEvent => ({
    directory: '/workspace',
    payload: { id: ascendingId('evt'), type: 'message.part.updated', properties: { part: { id: 'prt_t2', sessionID: UPSTREAM, messageID: 'msg_a1', type: 'text', text: BIG_TEXT } } },
  });
  const feed = (events: RuntimeEvent[]) => {
    for (const ev of events) a.opened.core.streams.ingest(owner, ev);
  };
  const idsOf = (events: RuntimeEvent[]) => events.map((e) => e.payload.id!);

  it('every serve\'s clients get the runtime\'s frames, a large one whole; a client moving to the other serve with Last-Event-ID gets exactly the rest', async () => {
    expect(Buffer.byteLength(JSON.stringify(BIG_TEXT))).toBeGreaterThan(30_000);
    const whole = await openSse(urlB(), auth());
    const onHost = await openSse(urlA(), auth());
    const first = await openSse(urlA(), auth());
    expect([whole.status, onHost.status, first.status]).toEqual([200, 200, 200]);

    const phase1 = [delta(1), delta(2), delta(3), big(), delta(4), delta(5)];
    feed(phase1);
    await first.until((e) => e.id === phase1.at(-1)!.payload.id, 10_000);
    await first.close();
    // Missed by the client while it moves.
    const phase2 = [delta(6), delta(7), big(), delta(8)];
    feed(phase2);
    await whole.until((e) => e.id === phase2.at(-1)!.payload.id, 10_000);
    const second = await openSse(urlB(), { ...auth(), 'last-event-id': first.events.at(-1)!.id! });
    const phase3 = [delta(9), delta(10), delta(11)];
    feed(phase3);
    const all = idsOf([...phase1, ...phase2, ...phase3]);
    await second.until((e) => e.id === all.at(-1), 10_000);
    await whole.until((e) => e.id === all.at(-1), 10_000);
    await onHost.until((e) => e.id === all.at(-1), 10_000);
    // Nothing late or repeated.
    await new Promise((r) => setTimeout(r, 200));
    await Promise.all([second.close(), whole.close(), onHost.close()]);

    expect(whole.events.map((e) => e.id)).toEqual(all);
    expect(onHost.events.map((e) => e.id)).toEqual(all);
    expect(first.events.map((e) => e.id)).toEqual(idsOf(phase1));
    expect(second.events.map((e) => e.id)).toEqual(idsOf([...phase2, ...phase3]));
    // The large ones arrived whole, in our session's ids, on the other serve and replayed there.
    const bigOn = (events: typeof whole.events) => events.filter((e) => e.data.type === 'message.part.updated');
    expect(bigOn(whole.events).map((e) => e.data.properties.part.text)).toEqual([BIG_TEXT, BIG_TEXT]);
    expect(bigOn(whole.events)[0].data.properties.sessionID).toBe(sessionId);
    expect(bigOn(second.events).map((e) => e.data.properties.part.text)).toEqual([BIG_TEXT]);
    // Every event is of this session, with our id in it.
    expect(whole.events.every((e) => e.data.properties.sessionID === sessionId)).toBe(true);
  });

  it('a client that moves while events are still on their way misses none and sees none twice', async () => {
    for (let round = 0; round < 3; round++) {
      const whole = await openSse(urlB(), auth());
      const first = await openSse(urlA(), auth());
      const events = Array.from({ length: 80 }, (_, i) => delta(100 * round + i));
      // The runtime keeps talking while the client moves.
      const feeding = (async () => {
        for (let i = 0; i < events.length; i += 4) {
          feed(events.slice(i, i + 4));
          await new Promise((r) => setTimeout(r, 3));
        }
      })();
      await first.until((e) => e.id === events[20 + 10 * round].payload.id, 10_000);
      await first.close();
      const second = await openSse(urlB(), { ...auth(), 'last-event-id': first.events.at(-1)!.id! });
      await feeding;
      const last = events.at(-1)!.payload.id;
      await second.until((e) => e.id === last, 10_000);
      await whole.until((e) => e.id === last, 10_000);
      await new Promise((r) => setTimeout(r, 100));
      await Promise.all([second.close(), whole.close()]);
      const seen = [...first.events, ...second.events].map((e) => e.id);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual(idsOf(events));
      expect(whole.events.map((e) => e.id)).toEqual(idsOf(events));
    }
  });

  it('what other parts of the appliance publish reaches every serve too, in order with the runtime\'s frames', async () => {
    const onB = await openSse(urlB(), auth());
    const onA = await openSse(urlA(), auth());
    const before = delta(1000);
    feed([before]);
    await onB.until((e) => e.id === before.payload.id, 10_000);
    await (b?.opened.core ?? a.opened.core).streams.publish(sessionId, 'session.error', { error: { code: 'test', message: 'from another process' } });
    const after = delta(1001);
    await onB.until((e) => e.data.type === 'session.error', 10_000);
    feed([after]);
    await onA.until((e) => e.id === after.payload.id, 10_000);
    await onB.until((e) => e.id === after.payload.id, 10_000);
    await Promise.all([onA.close(), onB.close()]);
    expect(onA.events.map((e) => e.data.type)).toEqual(['message.part.delta', 'session.error', 'message.part.delta']);
    expect(onB.events.map((e) => e.id)).toEqual(onA.events.map((e) => e.id));
  });

  it('a revoked share ends a follower\'s stream on the other serve at once; the owner\'s stream goes on', async () => {
    const { rows } = await a.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'vera', 'vera@anyserve.example', 'Vera') returning id`, [owner.tenantId]);
    await a.opened.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [owner.tenantId, rows[0].id]);
    const vera = await signToken(a, { sub: rows[0].id, tid: owner.tenantId, roles: ['member'] });
    const made = await api(a, 'POST', `/v1/sessions/${sessionId}/shares`, { token, body: { people: ['vera'], mode: 'live' } });
    expect(made.status, made.text).toBe(201);
    const follower = await openSse(urlB(), { authorization: `Bearer ${vera}` });
    const own = await openSse(urlA(), auth());
    expect([follower.status, own.status]).toEqual([200, 200]);
    feed([delta(1)]);
    await follower.until((e) => e.data.type === 'message.part.delta');
    expect((await api(a, 'DELETE', `/v1/sessions/${sessionId}/shares/${made.json.shares[0].shareId}`, { token })).status).toBe(204);
    await follower.until((e) => e.data.type === 'share.revoked', 10_000);
    await expect.poll(() => follower.ended, { timeout: 10_000 }).toBe(true);
    feed([delta(2)]);
    await own.until((e) => e.data.type === 'message.part.delta' && e.data.properties.delta === 'word2 ');
    expect(own.ended).toBe(false);
    await own.close();
  });
});
