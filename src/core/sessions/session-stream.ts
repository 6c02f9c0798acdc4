import type { Database } from '../../db/database.js';
import type { EventBus } from '../../kernel/events.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { RuntimeHandle } from '../runtime/host/runtime-transport.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { openRuntimeEventStream, type RuntimeEvent, type RuntimeEventStream } from '../runtime/runtime-events.js';
import { sseComment, sseFrame } from '../../lib/sse-frame.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import type { PermissionRequestsRepo } from './permission-requests.repo.js';
import type { SessionsRepo } from './sessions.repo.js';
import type { TurnsRepo } from './turns.repo.js';
import type { TurnEvents } from './turn-events.js';
import { createPartialAnswers } from './partial-answers.js';
import { createRuntimeEventHandler } from './runtime-event-handler.js';
import { createSessionReplay, type StreamEvent } from './session-replay.js';

/**
 * The session stream of SPEC.md "Events": one upstream connection to each live runtime's event stream
 * (one runtime per user, see runtime-pool.ts), fanned out to the SSE subscribers of each session. On the
 * way its events are handled once (runtime-event-handler.ts: domain events of the sessions the runtime's
 * own user owns, tool policy, analytics, turns' ends), and each session keeps its recent events so a
 * client reconnecting with Last-Event-ID gets what it missed (session-replay.ts).
 *
 * Any serve answers any session's stream. The process whose pool follows a runtime (fires
 * onChange for it) handles each of its events once, as above, and with a shared bus (PostgreSQL: several
 * serves) sends the resulting frames over the bus, to every serve's subscribers, this one's included, like
 * the events other parts of the appliance publish. The bus gives every process its messages in one order,
 * so every serve delivers the same frames with the same ids in the same order and keeps the same replay
 * buffer: a client may reconnect to any serve with Last-Event-ID. Alone (embedded mode: one process, an
 * in-process bus) frames go straight to the subscribers, as they always did.
 */
const HEARTBEAT_MS = 15_000;

/**
 * A viewer's stream (a share) is checked again this often besides when the session's access changes: a
 * person who left the team a session is shared with, or was deactivated, stops following it within this.
 */
const VIEWER_RECHECK_MS = 60_000;
/** Frames sent over the bus in one message at most (they gather while the previous message is sent). */
const FAN_OUT_BATCH = 200;
/**
 * Published by other parts of the appliance (jobs, the API) to put an event on a session's stream, and by
 * the process following a runtime for its events: `{ sessionId, event }`, or `{ events: [...] }` of them.
 */
export const SESSION_EVENTS_CHANNEL = 'sessions.events';
/**
 * Published when who may read a session changed (a share revoked, replaced or ended by a hand-over):
 * `{ sessionId }`. Every serve checks again the viewers following that session's stream and ends the
 * streams of those who may no longer read it.
 */
const SESSION_ACCESS_CHANNEL = 'sessions.access';

type BusMessage = { sessionId?: string; event?: StreamEvent; events?: Array<{ sessionId?: string; event?: StreamEvent }> };

export function createSessionStreams(deps: {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  repo: SessionsRepo;
  turnsRepo: Pick<TurnsRepo, 'savePartial'>;
  permissionRequests: PermissionRequestsRepo;
  pool: RuntimePool;
  log: Logger;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Where turns' ends and plan sessions' activity are told (turn-events.ts). */
  events: Pick<TurnEvents, 'emit'>;
}) {
  const { db, repo, pool, log } = deps;
  // Other processes follow session streams too: a runtime's frames go to them all over the bus.
  const crossProcess = deps.bus.shared;
  const replay = createSessionReplay({ crossProcess });
  const { deliver } = replay;
  // One upstream connection per live runtime (per user), opened when the pool says it is ready.
  const upstreams = new Map<string, { owner: RuntimeOwner; stream: RuntimeEventStream; handle: RuntimeHandle }>();
  let offPool: (() => void) | null = null;
  let started = false;
  let unsubscribeBus: (() => Promise<void>) | null = null;
  let unsubscribeAccess: (() => Promise<void>) | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  // Events are handled strictly in arrival order, even when resolving a session needs a query.
  let chain: Promise<void> = Promise.resolve();
  // What answers have streamed, saved as they stream (a runtime that dies mid-answer never stores it).
  const partials = createPartialAnswers({ db, repo: deps.turnsRepo, log });
  /** Events this process published that have not come back over the bus yet (a stopping serve waits for them). */
  const ownInFlight = new Set<string>();

  /** An event from the bus: delivered; a deleted session's streams end. */
  function arrive(sessionId: string, event: StreamEvent): void {
    ownInFlight.delete(event.id);
    deliver(sessionId, event);
    if (event.type === 'session.deleted') replay.closeSession(sessionId);
  }

  /**
   * A runtime's frame, with other serves about: over the bus, to every serve's subscribers (this one's
   * included, so that all see one order). Frames go one message after another (two NOTIFYs sent at once
   * on two pooled connections could commit swapped); those produced while one is on its way go together
   * in the next, so a busy stream costs fewer notifications, not more latency.
   */
  function fanOut(sessionId: string, event: StreamEvent): void {
    outbox.push({ sessionId, event });
    if (!sending) void send();
  }
  let outbox: Array<{ sessionId: string; event: StreamEvent }> = [];
  let sending = false;
  async function send(): Promise<void> {
    sending = true;
    while (outbox.length) {
      const batch = outbox.length > FAN_OUT_BATCH ? outbox.splice(0, FAN_OUT_BATCH) : outbox;
      if (batch === outbox) outbox = [];
      try {
        await deps.bus.publish(SESSION_EVENTS_CHANNEL, batch.length === 1 ? batch[0] : { events: batch });
      } catch (err) {
        // Not on the bus: at least this serve's subscribers see them.
        log.error({ err: (err as Error).message, events: batch.length }, 'could not send session events to the other serves; delivered here only');
        for (const e of batch) deliver(e.sessionId, e.event);
      }
    }
    sending = false;
  }

  /** Where a runtime's frames go: to every serve through the bus, or (alone) straight to the subscribers. */
  const emit = crossProcess ? fanOut : deliver;

  const handler = createRuntimeEventHandler({ db, queue: deps.queue, repo, permissionRequests: deps.permissionRequests, pool, log, permissionsOf: deps.permissionsOf, events: deps.events, partials, track: (id) => void replay.state(id), emit });

  /**
   * The session's access changed: each viewer following it here is checked again, and one who may no
   * longer read it is told (`share.revoked`) and dropped.
   */
  async function recheckViewers(sessionId: string, o: { viewersOnly?: boolean } = {}): Promise<void> {
    await replay.recheck(
      sessionId,
      () => {
        const id = ascendingId('evt');
        return sseFrame({ id, data: { id, type: 'share.revoked', properties: { sessionID: sessionId, message: 'The owner stopped sharing this session with you.' } } });
      },
      o,
    );
  }

  function sweep() {
    const now = Date.now();
    handler.sweep(now);
    replay.sweepIdle(now);
  }

  /** Handles one event of a runtime's upstream stream: strictly in arrival order, once, in this process. */
  function ingest(owner: RuntimeOwner, ev: RuntimeEvent): void {
    chain = chain.then(() => handler.handle(owner, ev)).catch((err) => log.error({ err: (err as Error).message }, 'session event handling failed'));
  }

  return {
    /**
     * Follows every runtime the pool runs (one event connection each, opened as a runtime becomes ready,
     * closed when it stops; a restarted runtime gets a new one) and the events other processes put on
     * session streams.
     */
    async start(): Promise<void> {
      if (started) return;
      started = true;
      offPool = pool.onChange((owner, h) => {
        const current = upstreams.get(owner.userId);
        if (current && current.handle === h) return;
        if (current) {
          upstreams.delete(owner.userId);
          void current.stream.close();
          // The runtime went away (or restarted): what its answers had streamed is saved as it stands.
          chain = chain.then(() => partials.flushUser(owner.userId));
        }
        if (!h) return;
        const stream = openRuntimeEventStream({
          endpoint: () => h.endpoint,
          log,
          onEvent: (ev) => ingest(owner, ev),
        });
        upstreams.set(owner.userId, { owner, stream, handle: h });
      });
      unsubscribeBus = await deps.bus.subscribe(SESSION_EVENTS_CHANNEL, (payload) => {
        const p = payload as BusMessage | null;
        for (const one of Array.isArray(p?.events) ? p.events : [p]) {
          const { sessionId, event } = one ?? {};
          if (!sessionId || !event) continue;
          // Shared, the bus's order is every serve's order: deliver at once. Alone, this process's
          // runtime frames are delivered from the chain: keep to it.
          if (crossProcess) arrive(sessionId, event);
          else chain = chain.then(() => arrive(sessionId, event)).catch((err) => log.error({ err: (err as Error).message }, 'session event delivery failed'));
        }
      });
      unsubscribeAccess = await deps.bus.subscribe(SESSION_ACCESS_CHANNEL, (payload) => {
        const sessionId = (payload as { sessionId?: unknown } | null)?.sessionId;
        if (typeof sessionId === 'string') void recheckViewers(sessionId).catch((err) => log.error({ err: (err as Error).message }, 'could not check the viewers of a session again'));
      });
      let lastViewerCheck = Date.now();
      heartbeat = setInterval(() => {
        replay.writeAll(sseComment('ping'));
        if (Date.now() - lastViewerCheck < VIEWER_RECHECK_MS) return;
        lastViewerCheck = Date.now();
        for (const id of replay.sessionsWithViewers()) void recheckViewers(id, { viewersOnly: true }).catch(() => {});
      }, HEARTBEAT_MS);
      heartbeat.unref();
      sweeper = setInterval(sweep, 60_000);
      sweeper.unref();
    },

    /**
     * Adds a subscriber to a session (ownership is checked by the caller). With `lastEventId`, first
     * replays the buffered events after it (or, when that event is still on its way here, starts after it
     * once it comes). Returns the function that removes the subscriber.
     */
    subscribe: replay.subscribe,

    /**
     * Handles one event of a runtime's upstream stream as its connection does (the pool's onChange opens
     * those): for a process that receives a runtime's events another way, and for tests.
     */
    ingest,

    /**
     * Puts an event of ours on a session's stream, in every process (through the event bus); `id` when
     * the caller has chosen it (an event also recorded elsewhere with it, a turn's end).
     */
    async publish(sessionId: string, type: string, properties: Record<string, unknown>, id = ascendingId('evt')): Promise<void> {
      if (crossProcess && started) ownInFlight.add(id);
      try {
        await deps.bus.publish(SESSION_EVENTS_CHANNEL, { sessionId, event: { id, type, properties: { ...properties, sessionID: sessionId } } });
      } catch (err) {
        ownInFlight.delete(id);
        throw err;
      }
    },

    /**
     * Who may read the session changed (a share revoked or replaced, a hand-over): every serve checks its
     * viewers of it again (SESSION_ACCESS_CHANNEL).
     */
    async accessChanged(sessionId: string): Promise<void> {
      await deps.bus.publish(SESSION_ACCESS_CHANNEL, { sessionId });
    },

    /** Checks again, in this process, the viewers following the session (as accessChanged does on every serve). */
    recheckViewers,

    get stats() {
      return { ...replay.stats, upstreams: upstreams.size, upstreamsConnected: [...upstreams.values()].filter((u) => u.stream.connected).length };
    },

    /**
     * Ends every stream (shutdown) and the upstream connections. What this process published before is
     * delivered first (a turn lost as its runtime stopped: its end reaches the stream before the stream
     * ends), and what answers had streamed is saved.
     */
    async stop(): Promise<void> {
      // The bus brings this process's own events back to its subscribers: a moment for those still on the way.
      const deadline = Date.now() + 2000;
      while (ownInFlight.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      ownInFlight.clear();
      await chain;
      await partials.flushAll();
      if (heartbeat) clearInterval(heartbeat);
      if (sweeper) clearInterval(sweeper);
      heartbeat = sweeper = null;
      replay.dropAll();
      await unsubscribeBus?.().catch(() => {});
      unsubscribeBus = null;
      await unsubscribeAccess?.().catch(() => {});
      unsubscribeAccess = null;
      offPool?.();
      offPool = null;
      await Promise.all([...upstreams.values()].map((u) => u.stream.close()));
      upstreams.clear();
      started = false;
    },
  };
}

export type SessionStreams = ReturnType<typeof createSessionStreams>;
