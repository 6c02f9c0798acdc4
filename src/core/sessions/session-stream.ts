import type { Database } from '../../db/database.js';
import type { EventBus } from '../../kernel/events.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import { toolAllowed, type RbacPermissions } from '../../kernel/permissions.js';
import type { RuntimeHandle } from '../runtime/host/runtime-transport.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import { openRuntimeEventStream, type RuntimeEvent, type RuntimeEventStream } from '../runtime/runtime-events.js';
import { clientProperties, mapRuntimeEvent, type SessionDomainEvent } from '../runtime/event-mapper.js';
import { sseComment, sseFrame } from '../../lib/sse-frame.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import { ANALYTICS_JOB } from './session-analytics.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { TurnEvents } from './turn-events.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { createPartialAnswers } from './partial-answers.js';

/**
 * The session stream of SPEC.md "Events": one upstream connection to each live runtime's event stream
 * (one runtime per user, see runtime-pool.ts), fanned out to the SSE subscribers of each session. On the
 * way it
 *  - takes domain events from the event mapper (which alone knows the runtime's event shapes), keeps
 *    those of sessions the runtime's own user owns (the agent can drive its runtime's API: a runtime
 *    never speaks for another user's session) and puts our session ids in;
 *  - keeps the last REPLAY_EVENTS events of each session so a client reconnecting with Last-Event-ID gets
 *    what it missed (ids are the runtime's own ascending event ids);
 *  - reacts: rejects permission requests for tools the owner may not use, enqueues analytics
 *    (tool.execute per completed tool call, denials), tells the pool which runtimes are busy.
 * Usage and cost limits are not taken from here: the LLM gateway records every model call from the
 * provider's own report.
 *
 * Any serve answers any session's stream. The process whose pool follows a runtime (fires
 * onChange for it) handles each of its events once, as above, and with a shared bus (PostgreSQL: several
 * serves) sends the resulting frames over the bus, to every serve's subscribers, this one's included, like
 * the events other parts of the appliance publish. The bus gives every process its messages in one order,
 * so every serve delivers the same frames with the same ids in the same order and keeps the same replay
 * buffer: a client may reconnect to any serve with Last-Event-ID. Alone (embedded mode: one process, an
 * in-process bus) frames go straight to the subscribers, as they always did.
 */
const REPLAY_EVENTS = 500;
/** ...and at most this many bytes of them (tool outputs can be large); the older ones go first. */
const REPLAY_BYTES = 512 * 1024;
const HEARTBEAT_MS = 15_000;
/**
 * A viewer's stream (a share) is checked again this often besides when the session's access changes: a
 * person who left the team a session is shared with, or was deactivated, stops following it within this.
 */
const VIEWER_RECHECK_MS = 60_000;
/** A subscriber that cannot keep up (this much unsent) is dropped; it may reconnect with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Buffers of sessions nobody watches are dropped after this long without events. */
const IDLE_BUFFER_MS = 15 * 60_000;
/** Records of unanswered permission requests are kept this long (a runtime restart forgets them sooner). */
const PERMISSION_REQUEST_TTL_MS = 7 * 24 * 3600_000;
const REQUEST_SWEEP_MS = 3600_000;
/**
 * A client reconnecting with an id this serve has not had yet (read from another serve that is ahead of
 * this one on the bus) gets nothing until that event arrives here, then what follows it; if it does not
 * come within this long, what came meanwhile after it by id (as for an id no longer buffered).
 */
const IN_FLIGHT_WAIT_MS = 5000;
/** An event whose id was stamped further than this from now cannot still be on its way over the bus. */
const IN_FLIGHT_AGE_MS = 10_000;
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

export interface StreamEvent {
  id: string;
  type: string;
  properties: Record<string, any>;
}

export interface Subscriber {
  /** Writes one SSE frame; returns the bytes still queued on the connection. */
  write(frame: string): number;
  close(): void;
}

interface SessionRef {
  id: string;
  tenantId: string;
  ownerId: string;
  directory: string;
  channel: string;
  /** A plan's child session: its parent (whose stream also gets its permission requests) and plan. */
  parentId: string | null;
  planId: string | null;
}

interface SessionState {
  ref: SessionRef | null;
  buffer: Array<{ id: string; frame: string }>;
  bufferBytes: number;
  subscribers: Set<Sub>;
  lastEventAt: number;
}

interface Sub {
  out: Subscriber;
  /** Whether the follower may still read the session: asked again when the session's access changes. */
  recheck: (() => Promise<boolean>) | null;
  /** Another person's session (a share): also asked again now and then (VIEWER_RECHECK_MS), e.g. after leaving a team. */
  viewer: boolean;
  /** Events replayed from the turns' stored ends (not this serve's buffer): not sent again when they come by. */
  replayed: Set<string> | null;
  /**
   * Reconnected with the id of an event not yet here (see IN_FLIGHT_WAIT_MS): frames arriving before it
   * are held, and dropped when it comes (the client had them).
   */
  awaiting: { id: string; held: Array<{ id: string; frame: string }>; heldBytes: number; timer: NodeJS.Timeout } | null;
}

type BusMessage = { sessionId?: string; event?: StreamEvent; events?: Array<{ sessionId?: string; event?: StreamEvent }> };

export function createSessionStreams(deps: {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  repo: SessionsRepo;
  pool: RuntimePool;
  log: Logger;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Where turns' ends and plan sessions' activity are told (turn-events.ts). */
  events: Pick<TurnEvents, 'emit'>;
}) {
  const { db, repo, pool, log } = deps;
  const sessions = new Map<string, SessionState>();
  // Runtime session id -> our session; refreshed now and then (a session's owner changes when claimed).
  const byUpstream = new Map<string, { at: number; ref: SessionRef }>();
  const perms = createPromiseCache<RbacPermissions>({ ttlMs: 5000 });
  // One upstream connection per live runtime (per user), opened when the pool says it is ready.
  const upstreams = new Map<string, { owner: RuntimeOwner; stream: RuntimeEventStream; handle: RuntimeHandle }>();
  let offPool: (() => void) | null = null;
  let started = false;
  const refusedOnce = new Set<string>();
  let unsubscribeBus: (() => Promise<void>) | null = null;
  let unsubscribeAccess: (() => Promise<void>) | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  // Events are handled strictly in arrival order, even when resolving a session needs a query.
  let chain: Promise<void> = Promise.resolve();
  let subscriberCount = 0;
  let lastRequestSweep = 0;
  // Other processes follow session streams too: a runtime's frames go to them all over the bus.
  const crossProcess = deps.bus.shared;
  // What answers have streamed, saved as they stream (a runtime that dies mid-answer never stores it).
  const partials = createPartialAnswers({ db, repo, log });
  /** Events this process published that have not come back over the bus yet (a stopping serve waits for them). */
  const ownInFlight = new Set<string>();

  const state = (id: string): SessionState => {
    let s = sessions.get(id);
    if (!s) sessions.set(id, (s = { ref: null, buffer: [], bufferBytes: 0, subscribers: new Set(), lastEventAt: Date.now() }));
    return s;
  };

  const permissionsOf = (ref: SessionRef): Promise<RbacPermissions> => {
    return perms.get(`${ref.tenantId}:${ref.ownerId}`, () => deps.permissionsOf(ref.tenantId, ref.ownerId));
  };

  async function resolve(upstreamId: string): Promise<SessionRef | null> {
    const hit = byUpstream.get(upstreamId);
    if (hit && Date.now() - hit.at < 60_000) return hit.ref;
    const row = await repo.byUpstreamId(db, upstreamId);
    if (!row) return null;
    const ref = refOf(row);
    byUpstream.set(upstreamId, { at: Date.now(), ref });
    return ref;
  }

  /** Sends an event to a session's subscribers and keeps it for replay. */
  function deliver(sessionId: string, event: StreamEvent): void {
    const s = state(sessionId);
    const frame = sseFrame({ id: event.id, data: event });
    s.buffer.push({ id: event.id, frame });
    s.bufferBytes += frame.length;
    while (s.buffer.length > REPLAY_EVENTS || (s.bufferBytes > REPLAY_BYTES && s.buffer.length > 1)) s.bufferBytes -= s.buffer.shift()!.frame.length;
    s.lastEventAt = Date.now();
    for (const sub of s.subscribers) {
      if (sub.replayed?.has(event.id)) continue;
      if (sub.awaiting) hold(s, sub, event.id, frame);
      else if (sub.out.write(frame) > MAX_BUFFERED_BYTES) drop(s, sub);
    }
  }

  /** An event from the bus: delivered; a deleted session's streams end. */
  function arrive(sessionId: string, event: StreamEvent): void {
    ownInFlight.delete(event.id);
    deliver(sessionId, event);
    if (event.type === 'session.deleted') closeSession(sessionId);
  }

  function hold(s: SessionState, sub: Sub, id: string, frame: string): void {
    const w = sub.awaiting!;
    if (id === w.id) {
      // The client's last event: everything held came before it on the bus, as on the serve it read it from.
      clearTimeout(w.timer);
      sub.awaiting = null;
      return;
    }
    w.held.push({ id, frame });
    w.heldBytes += frame.length;
    if (w.held.length > REPLAY_EVENTS || w.heldBytes > REPLAY_BYTES) stopAwaiting(s, sub);
  }

  /** The awaited event did not come (this serve missed it, or it was not of this stream): what follows it by id. */
  function stopAwaiting(s: SessionState, sub: Sub): void {
    const w = sub.awaiting;
    if (!w) return;
    clearTimeout(w.timer);
    sub.awaiting = null;
    for (const e of w.held) {
      if (e.id > w.id && sub.out.write(e.frame) > MAX_BUFFERED_BYTES) return drop(s, sub);
    }
  }

  /**
   * Whether a client's Last-Event-ID, not in this serve's buffer, may name an event still on its way here
   * (the client read it from a serve ahead of this one on the bus). Not when this process is the only one,
   * nor when this serve already has newer events (the id is older than the buffer: replay by id), nor when
   * the id's time stamp is far from now (nothing lingers on the bus that long; an id of another shape has
   * no time to read, and may be on its way).
   */
  function mayBeOnTheWay(s: SessionState, id: string): boolean {
    if (!crossProcess) return false;
    const newest = s.buffer.at(-1)?.id;
    if (newest !== undefined && id <= newest) return false;
    const age = idAgeMs(id, Date.now());
    return age === null || Math.abs(age) < IN_FLIGHT_AGE_MS;
  }

  function drop(s: SessionState, sub: Sub) {
    if (s.subscribers.delete(sub)) subscriberCount--;
    if (sub.awaiting) clearTimeout(sub.awaiting.timer);
    sub.awaiting = null;
    sub.out.close();
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

  // The runtime repeats some updates (a completed message, a finished tool part): enqueue each fact once
  // per process; the job's ledger makes it once across processes.
  const enqueued = new Set<string>();
  function enqueueAnalytics(data: Record<string, unknown>, key: string) {
    if (enqueued.has(key)) return;
    if (enqueued.size > 20_000) enqueued.clear();
    enqueued.add(key);
    deps.queue.send(ANALYTICS_JOB, { ...data, key }, { singletonKey: key, retryLimit: 5 }).catch((err) => {
      // A singleton already queued by another process is the expected way to lose this race.
      if (!(err instanceof JobAlreadyQueuedError)) log.error({ err: (err as Error).message, key }, 'could not enqueue analytics');
    });
  }

  /** The owner's runtime client (an answer to the runtime that sent the event). */
  const clientOf = (ref: SessionRef) => pool.client({ tenantId: ref.tenantId, userId: ref.ownerId });

  async function handle(owner: RuntimeOwner, raw: RuntimeEvent): Promise<void> {
    const ev = mapRuntimeEvent(raw);
    if (!ev) return;
    pool.touch(owner.userId);
    if (ev.type === 'session.status' || ev.kind === 'turnIdle') {
      pool.setRunning(owner.userId, ev.upstreamSessionId, ev.kind !== 'turnIdle' && (ev.properties.status as { type?: string } | undefined)?.type === 'running');
    }
    const ref = await resolve(ev.upstreamSessionId);
    if (!ref) return;
    // A runtime is its user's, and the agent in it can drive its API: it speaks for that user's
    // sessions only. (A session claimed away from this user is no longer theirs either.)
    if (ref.ownerId !== owner.userId || ref.tenantId !== owner.tenantId) {
      if (!refusedOnce.has(ev.upstreamSessionId)) {
        // Bounded: a hostile runtime could name endless sessions; forgetting one only repeats a warning.
        if (refusedOnce.size >= 1000) refusedOnce.clear();
        refusedOnce.add(ev.upstreamSessionId);
        log.warn({ userId: owner.userId, sessionId: ref.id }, 'ignored events a runtime sent for a session its user does not own');
      }
      return;
    }
    const s = state(ref.id);
    s.ref = ref;
    if (ref.planId) deps.events.emit('session.plan_activity', { tenantId: ref.tenantId, sessionId: ref.id });
    partials.seen(ref, ev);

    switch (ev.kind) {
      // Usage and cost limits are the LLM gateway's: it sees every model call and the provider's own
      // usage report, where the runtime's message could say anything.
      case 'toolFinished':
        enqueueAnalytics(
          { kind: 'tool', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool: ev.tool, callId: ev.callId, status: ev.status, durationMs: ev.durationMs, title: ev.title?.slice(0, 200), ...(ev.skill ? { skill: ev.skill } : {}) },
          `tool:${ev.partId}`,
        );
        break;
      case 'invalidToolCall':
        // The model called a tool it was not given (tools outside the owner's policy are withheld).
        if (ev.requestedTool !== null && !toolAllowed(await permissionsOf(ref), ev.requestedTool)) {
          enqueueAnalytics({ kind: 'denied', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool: ev.requestedTool, patterns: [], reason: 'tools policy (withheld from the model)' }, `denied:${ev.partId}`);
        }
        break;
      case 'permissionAsked': {
        const allowed = toolAllowed(await permissionsOf(ref), ev.permission);
        if (!allowed) {
          // Never shown to the user: the tool is outside their role's tools policy.
          void rejectPermission(ref, ev);
          return;
        }
        // The owner's reply is checked against this record (the request must be of their session).
        try {
          await repo.recordPermissionRequest(db, { id: ev.requestId, tenantId: ref.tenantId, sessionId: ref.id, permission: ev.permission, patterns: ev.patterns });
        } catch (err) {
          // Unrecorded, a reply would be refused and the turn would wait for it forever: refuse it now.
          log.error({ err: (err as Error).message, sessionId: ref.id }, 'could not record a permission request; rejecting it');
          void clientOf(ref).then((c) => c.replyPermission(ev.requestId, 'reject', 'The request could not be recorded; try again.')).catch(() => {});
          return;
        }
        break;
      }
      case 'permissionReplied':
        // Answered (through us, or by the runtime itself after an `always`): no longer answerable.
        await repo.takePermissionRequest(db, ref.tenantId, ref.id, ev.requestId).catch(() => null);
        break;
    }
    const id = ev.eventId ?? ascendingId('evt');
    emit(ref.id, { id, type: ev.type, properties: clientProperties(ev, ref.id, ref.tenantId) });
    // A plan's subtask asks its person through the parent session: its stream shows the request, its
    // permissions route answers it (sessions.service replyPermission).
    if (ev.kind === 'permissionAsked' && ref.parentId) {
      emit(ref.parentId, { id, type: ev.type, properties: { ...clientProperties(ev, ref.parentId), askedIn: { sessionId: ref.id, planId: ref.planId } } });
    }
    if (ev.kind === 'turnIdle') {
      if (ref.channel !== 'web' && !ref.parentId) deps.events.emit('turn.chat_ended', { tenantId: ref.tenantId, sessionId: ref.id, eventId: id });
      deps.events.emit('turn.ended', { session: { id: ref.id, tenantId: ref.tenantId, planId: ref.planId }, eventId: id, end: { id, type: ev.type, properties: clientProperties(ev, ref.id) } });
    }
  }

  async function rejectPermission(ref: SessionRef, asked: Extract<SessionDomainEvent, { kind: 'permissionAsked' }>) {
    try {
      const replied = await (await clientOf(ref)).replyPermission(asked.requestId, 'reject', `The tool "${asked.permission}" is not allowed by your role.`);
      if (replied) enqueueAnalytics({ kind: 'denied', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool: asked.permission, patterns: asked.patterns, reason: 'tools policy' }, `denied:${asked.requestId}`);
    } catch (err) {
      log.error({ err: (err as Error).message, sessionId: ref.id }, 'could not reject a denied tool');
    }
  }

  /**
   * The session's access changed: each viewer following it here is checked again, and one who may no
   * longer read it is told (`share.revoked`) and dropped.
   */
  async function recheckViewers(sessionId: string, o: { viewersOnly?: boolean } = {}): Promise<void> {
    const s = sessions.get(sessionId);
    if (!s) return;
    await Promise.all(
      [...s.subscribers].filter((sub) => sub.recheck && (!o.viewersOnly || sub.viewer)).map(async (sub) => {
        const still = await sub.recheck!().catch(() => false);
        if (still || !s.subscribers.has(sub)) return;
        const id = ascendingId('evt');
        sub.out.write(sseFrame({ id, data: { id, type: 'share.revoked', properties: { sessionID: sessionId, message: 'The owner stopped sharing this session with you.' } } }));
        drop(s, sub);
      }),
    );
  }

  /** Ends a deleted session's streams and forgets it. */
  function closeSession(sessionId: string): void {
    const s = sessions.get(sessionId);
    if (!s) return;
    for (const sub of [...s.subscribers]) drop(s, sub);
    sessions.delete(sessionId);
  }

  function sweep() {
    const now = Date.now();
    if (now - lastRequestSweep > REQUEST_SWEEP_MS) {
      lastRequestSweep = now;
      void repo.dropPermissionRequestsBefore(db, new Date(now - PERMISSION_REQUEST_TTL_MS)).catch(() => {});
    }
    for (const [id, s] of sessions) {
      if (s.subscribers.size === 0 && now - s.lastEventAt > IDLE_BUFFER_MS) sessions.delete(id);
    }
    if (byUpstream.size > 50_000) byUpstream.clear();
  }

  /** Handles one event of a runtime's upstream stream: strictly in arrival order, once, in this process. */
  function ingest(owner: RuntimeOwner, ev: RuntimeEvent): void {
    chain = chain.then(() => handle(owner, ev)).catch((err) => log.error({ err: (err as Error).message }, 'session event handling failed'));
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
        for (const s of sessions.values()) for (const sub of s.subscribers) sub.out.write(sseComment('ping'));
        if (Date.now() - lastViewerCheck < VIEWER_RECHECK_MS) return;
        lastViewerCheck = Date.now();
        for (const [id, s] of sessions) {
          if ([...s.subscribers].some((sub) => sub.viewer)) void recheckViewers(id, { viewersOnly: true }).catch(() => {});
        }
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
    subscribe(sessionId: string, out: Subscriber, lastEventId?: string, stored: StreamEvent[] = [], o: { recheck?: () => Promise<boolean>; viewer?: boolean } = {}): () => void {
      const s = state(sessionId);
      const sub: Sub = { out, awaiting: null, replayed: null, recheck: o.recheck ?? null, viewer: o.viewer ?? false };
      if (lastEventId) {
        // How the session's recent turns ended (stored with them), where this serve's buffer has not the
        // event: published before this serve started (a restart) or before its oldest buffered one.
        const buffered = new Set(s.buffer.map((e) => e.id));
        const missed = stored.filter((e) => e.id > lastEventId && !buffered.has(e.id)).map((e) => ({ id: e.id, frame: sseFrame({ id: e.id, data: e }) }));
        if (missed.length) sub.replayed = new Set(missed.map((e) => e.id));
        const replay = (events: Array<{ id: string; frame: string }>) => {
          for (const e of [...events, ...missed].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) out.write(e.frame);
        };
        const at = s.buffer.findIndex((e) => e.id === lastEventId);
        if (at >= 0) {
          replay(s.buffer.slice(at + 1));
        } else if (mayBeOnTheWay(s, lastEventId)) {
          replay([]);
          sub.awaiting = { id: lastEventId, held: [], heldBytes: 0, timer: setTimeout(() => stopAwaiting(s, sub), IN_FLIGHT_WAIT_MS) };
          sub.awaiting.timer.unref();
        } else {
          replay(s.buffer.filter((e) => e.id > lastEventId));
        }
      }
      s.subscribers.add(sub);
      subscriberCount++;
      return () => {
        if (s.subscribers.delete(sub)) subscriberCount--;
        if (sub.awaiting) clearTimeout(sub.awaiting.timer);
        sub.awaiting = null;
      };
    },

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
      return { sessions: sessions.size, subscribers: subscriberCount, upstreams: upstreams.size, upstreamsConnected: [...upstreams.values()].filter((u) => u.stream.connected).length };
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
      for (const s of sessions.values()) for (const sub of [...s.subscribers]) drop(s, sub);
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

/**
 * How long ago (ms; negative: ahead of this clock) an id in the runtime's ascending format was stamped
 * (runtime-ids.ts: 12 hex digits of time*4096+counter, low 48 bits, so time modulo 2^36 ms), or null for
 * an id of another shape.
 */
export function idAgeMs(id: string, now: number): number | null {
  const m = /^[a-z]+_([0-9a-f]{12})/.exec(id);
  if (!m) return null;
  const WRAP = 2 ** 36;
  let age = (now % WRAP) - Math.floor(parseInt(m[1], 16) / 4096);
  if (age > WRAP / 2) age -= WRAP;
  else if (age < -WRAP / 2) age += WRAP;
  return age;
}

function refOf(row: SessionRow): SessionRef {
  return { id: row.id, tenantId: row.tenantId, ownerId: row.ownerId, directory: row.directory, channel: row.channel, parentId: row.parentId, planId: row.planId };
}

export type SessionStreams = ReturnType<typeof createSessionStreams>;
