import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EventBus, EventHandler } from '../../src/kernel/events.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createTurnEvents } from '../../src/core/sessions/turn-events.js';
import { ascendingId } from '../../src/core/runtime/runtime-ids.js';
import type { RuntimePool } from '../../src/core/runtime/runtime-pool.js';
import { idAgeMs, type Subscriber } from '../../src/core/sessions/session-replay.js';
import { createSessionStreams, SESSION_EVENTS_CHANNEL } from '../../src/core/sessions/session-stream.js';
import type { SessionRow, SessionsRepo } from '../../src/core/sessions/sessions.repo.js';

/**
 * Several serves' session streams on one bus whose delivery the test steps by hand: every serve gets the
 * bus's messages in the one order the bus has (as PostgreSQL's NOTIFY queue gives them), each at its own
 * pace, so a test can put one serve behind another.
 */
function sharedBus() {
  const log: unknown[] = [];
  // While set, a publish waits for it (a NOTIFY on its way).
  let gate: Promise<void> | null = null;
  const serves: Array<{ handlers: Set<EventHandler>; next: number; skip: Set<number> }> = [];
  return {
    log,
    /** Publishes take their time until the returned function is called. */
    slow() {
      let open!: () => void;
      gate = new Promise((r) => (open = r));
      return () => {
        gate = null;
        open();
      };
    },
    /** A serve's bus; `pump(n)` hands it the next n messages (all by default). */
    join() {
      const me = { handlers: new Set<EventHandler>(), next: 0, skip: new Set<number>() };
      serves.push(me);
      const bus: EventBus = {
        shared: true,
        async publish(channel, payload) {
          if (channel === SESSION_EVENTS_CHANNEL) log.push(JSON.parse(JSON.stringify(payload)));
          await gate;
        },
        async subscribe(_channel, handler) {
          me.handlers.add(handler);
          return async () => void me.handlers.delete(handler);
        },
        async close() {},
      };
      return {
        bus,
        pump(n = Infinity) {
          for (let i = 0; i < n && me.next < log.length; i++, me.next++) {
            if (me.skip.has(me.next)) continue;
            for (const h of me.handlers) h(log[me.next]);
          }
        },
        /** This serve never hears the message at this place (its bus connection was down). */
        miss(at: number) {
          me.skip.add(at);
        },
        get behind() {
          return log.length - me.next;
        },
      };
    },
  };
}

const OWNER = { tenantId: 't1', userId: 'u1' };
const SESSION = 's1';
const row: SessionRow = {
  id: SESSION, tenantId: OWNER.tenantId, ownerId: OWNER.userId, title: 't', templateSlug: null, systemPrompt: null, model: null, chosenModel: null, snapshotAt: null,
  upstreamId: 'ses_up1', directory: '/w', channel: 'web', browserSession: null, parentId: null, planId: null, createdAt: new Date(), updatedAt: new Date(),
};

function serve(bus: EventBus) {
  const pool = { onChange: () => () => {}, touch: () => {}, setRunning: () => {}, client: async () => ({}) } as unknown as RuntimePool;
  const repo = { byUpstreamId: async () => row } as unknown as SessionsRepo;
  return createSessionStreams({
    db: {} as never,
    bus,
    queue: { send: async () => 'job' } as never,
    repo,
    turnsRepo: { savePartial: async () => true },
    permissionRequests: {} as never,
    events: createTurnEvents(silentLogger),
    pool,
    log: silentLogger,
    permissionsOf: async () => ({}) as never,
  });
}

/** An SSE client: the ids of the frames it got, in order. */
function client() {
  const ids: string[] = [];
  const sub: Subscriber = {
    write(frame) {
      const m = /^id: (.+)$/m.exec(frame);
      if (m) ids.push(m[1]);
      return 0;
    },
    close() {},
  };
  return { ids, sub };
}

/** A runtime event of the session (a text delta), with the runtime's own ascending id. */
const delta = (n: number) => ({ directory: '/w', payload: { id: ascendingId('evt'), type: 'message.part.delta', properties: { sessionID: 'ses_up1', messageID: 'msg_1', partID: 'prt_1', field: 'text', delta: `w${n} ` } } });

/** Lets the streams' chains and fan-out run. */
const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

/** Two serves on one bus, started: `host` runs the session's runtime, `other` only answers streams. */
async function twoServes() {
  const net = sharedBus();
  const a = net.join();
  const b = net.join();
  const host = serve(a.bus);
  const other = serve(b.bus);
  await host.start();
  await other.start();
  return { net, a, b, host, other };
}

describe('session streams across serves (a shared bus)', () => {
  afterEach(() => vi.useRealTimers());

  it('the runtime\'s frames reach every serve through the bus, the host\'s own subscribers too, in one order', async () => {
    const { net, a, b, host, other } = await twoServes();
    const onHost = client();
    const onOther = client();
    host.subscribe(SESSION, onHost.sub);
    other.subscribe(SESSION, onOther.sub);
    const events = Array.from({ length: 30 }, (_, i) => delta(i));
    const open = net.slow();
    for (const ev of events) host.ingest(OWNER, ev);
    await settle();
    // Nothing reaches a subscriber but through the bus: the host's own waits for it too.
    expect(onHost.ids).toEqual([]);
    // Frames produced while one message is on its way travel together, in the next one.
    expect(net.log.length).toBe(1);
    open();
    await settle();
    expect(net.log.length).toBe(2);
    a.pump();
    b.pump();
    const ids = events.map((e) => e.payload.id);
    expect(onHost.ids).toEqual(ids);
    expect(onOther.ids).toEqual(ids);
  });

  it('a client moving to a serve that is behind on the bus gets exactly what follows its last event, once it arrives there', async () => {
    const { net, a, b, host, other } = await twoServes();
    const first = client();
    const offFirst = host.subscribe(SESSION, first.sub);
    const whole = client();
    other.subscribe(SESSION, whole.sub);
    const events = Array.from({ length: 20 }, (_, i) => delta(i));
    for (const ev of events) {
      host.ingest(OWNER, ev);
      // One message per event here, so that b can be put between any two.
      await settle();
    }
    expect(net.log.length).toBe(20);
    a.pump();
    expect(first.ids.length).toBe(20);
    // The client read up to the 12th event on a, and reconnects to b, which has heard 5 of them so far.
    offFirst();
    const seen = first.ids.slice(0, 12);
    b.pump(5);
    const second = client();
    other.subscribe(SESSION, second.sub, seen.at(-1));
    b.pump(3);
    expect(second.ids).toEqual([]);
    b.pump();
    expect(second.ids).toEqual(events.slice(12).map((e) => e.payload.id));
    expect(whole.ids).toEqual(events.map((e) => e.payload.id));
  });

  it('a serve that never hears the client\'s last event gives it what came after it by id, after a short wait', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { a, b, host, other } = await twoServes();
    const events = Array.from({ length: 10 }, (_, i) => delta(i));
    for (const ev of events) {
      host.ingest(OWNER, ev);
      await settle();
    }
    a.pump();
    b.miss(5);
    b.pump(3);
    const second = client();
    other.subscribe(SESSION, second.sub, events[5].payload.id);
    b.pump();
    expect(second.ids).toEqual([]);
    vi.advanceTimersByTime(6000);
    expect(second.ids).toEqual(events.slice(6).map((e) => e.payload.id));
    // Then live.
    host.ingest(OWNER, delta(10));
    await settle();
    a.pump();
    b.pump();
    expect(second.ids.length).toBe(5);
  });

  it('an id older than what a serve holds is replayed by id at once (as within one serve)', async () => {
    const net = sharedBus();
    const a = net.join();
    const host = serve(a.bus);
    await host.start();
    const events = Array.from({ length: 6 }, (_, i) => delta(i));
    for (const ev of events) host.ingest(OWNER, ev);
    await settle();
    a.pump();
    const c = client();
    // Not in the buffer (say, trimmed) and older than its newest: no wait.
    const older = `evt_${'0'.repeat(12)}zzzzzzzzzzzzzz`;
    host.subscribe(SESSION, c.sub, older);
    expect(c.ids).toEqual(events.map((e) => e.payload.id));
    const d = client();
    host.subscribe(SESSION, d.sub, events[2].payload.id);
    expect(d.ids).toEqual(events.slice(3).map((e) => e.payload.id));
  });

  it('alone (an in-process bus), the runtime\'s frames go straight to the subscribers', async () => {
    const published: unknown[] = [];
    const bus: EventBus = { shared: false, publish: async (_c, p) => void published.push(p), subscribe: async () => async () => {}, close: async () => {} };
    const streams = serve(bus);
    await streams.start();
    const c = client();
    streams.subscribe(SESSION, c.sub);
    const ev = delta(1);
    streams.ingest(OWNER, ev);
    await settle();
    expect(c.ids).toEqual([ev.payload.id]);
    expect(published).toEqual([]);
  });

  it('a serve that never saw how a turn ended (it started since) replays the end recorded with the turn to a client resuming with an older id, once', async () => {
    const net = sharedBus();
    const a = net.join();
    const fresh = serve(a.bus);
    await fresh.start();
    // The client's last event came from the serve before this one, seconds ago: it may still be on its way here.
    const lastSeen = ascendingId('evt');
    const end = [
      { id: ascendingId('evt'), type: 'session.error', properties: { sessionID: SESSION, error: { code: 'turn_lost' } } },
      { id: ascendingId('evt'), type: 'session.status', properties: { sessionID: SESSION, status: { type: 'idle' } } },
    ];
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const c = client();
    // An end older than the client's last event is not sent again.
    fresh.subscribe(SESSION, c.sub, lastSeen, [{ id: `evt_${'0'.repeat(12)}aaaaaaaaaaaaaa`, type: 'session.error', properties: {} }, ...end]);
    expect(c.ids).toEqual(end.map((e) => e.id));
    // The same end published over the bus now (this serve's own restart reported it) is not delivered twice.
    await fresh.publish(SESSION, end[0].type, end[0].properties, end[0].id);
    const next = delta(1);
    fresh.ingest(OWNER, next);
    await settle();
    a.pump();
    // The client's last event never comes here (it was the old serve's): after a short wait, what follows it.
    vi.advanceTimersByTime(6000);
    expect(c.ids).toEqual([...end.map((e) => e.id), next.payload.id]);
  });

  it('a stopping serve delivers what it published before its streams end (a turn lost as its runtime stopped)', async () => {
    const net = sharedBus();
    const a = net.join();
    const streams = serve(a.bus);
    await streams.start();
    const frames: string[] = [];
    let closed = false;
    streams.subscribe(SESSION, { write: (f) => (frames.push(f), 0), close: () => void (closed = true) });
    await streams.publish(SESSION, 'session.error', { error: { code: 'turn_lost' } });
    const stopping = streams.stop();
    await settle();
    // Not closed while its own event is still on its way over the bus.
    expect(closed).toBe(false);
    a.pump();
    await stopping;
    expect(closed).toBe(true);
    expect(frames.join('')).toContain('turn_lost');
  });

  it('reads the time stamp of ascending ids', () => {
    const now = Date.now();
    const age = idAgeMs(ascendingId('evt'), now);
    expect(age).not.toBeNull();
    expect(Math.abs(age!)).toBeLessThan(50);
    expect(Math.abs(idAgeMs(ascendingId('evt'), now + 30_000)! - 30_000)).toBeLessThan(50);
    expect(idAgeMs('evt_01HZZZ0000000001', now)).toBeNull();
  });
});
