import type { Database } from '../../db/database.js';
import type { EventBus } from '../events.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../logger.js';
import { toolAllowed, type RbacPermissions } from '../rbac/permissions.js';
import type { RuntimeHandle } from '../runtime/runtime-client.js';
import type { RuntimeOwner, RuntimePool } from '../runtime/runtime-pool.js';
import { openRuntimeEventStream, type RuntimeEvent, type RuntimeEventStream } from '../runtime/runtime-events.js';
import { clientProperties, mapRuntimeEvent, type SessionDomainEvent } from '../runtime/event-mapper.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import { ANALYTICS_JOB } from './session-analytics.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';

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
 * provider's own report. The serve hosting the runtimes does this; events from other processes arrive
 * over the bus.
 */
export const REPLAY_EVENTS = 500;
/** ...and at most this many bytes of them (tool outputs can be large); the older ones go first. */
export const REPLAY_BYTES = 512 * 1024;
export const HEARTBEAT_MS = 15_000;
/** A subscriber that cannot keep up (this much unsent) is dropped; it may reconnect with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Buffers of sessions nobody watches are dropped after this long without events. */
const IDLE_BUFFER_MS = 15 * 60_000;
/** Records of unanswered permission requests are kept this long (a runtime restart forgets them sooner). */
const PERMISSION_REQUEST_TTL_MS = 7 * 24 * 3600_000;
const REQUEST_SWEEP_MS = 3600_000;
/** Published by other parts of the appliance (jobs, the API) to put an event on a session's stream. */
export const SESSION_EVENTS_CHANNEL = 'sessions.events';

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
  subscribers: Set<Subscriber>;
  lastEventAt: number;
}

export function createSessionStreams(deps: {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  repo: SessionsRepo;
  pool: RuntimePool;
  log: Logger;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Called at the end of every turn of a session that came from a chat channel (not `web`). */
  onChatTurnEnd?: (tenantId: string, sessionId: string, eventId: string) => void;
  /** Called at the end of every turn (the orchestrator moves plans on). */
  onTurnEnd?: (session: { id: string; tenantId: string; planId: string | null }, eventId: string) => void;
  /** Called for every event of a plan's child session (the orchestrator notes its activity). */
  onChildEvent?: (tenantId: string, sessionId: string) => void;
}) {
  const { db, repo, pool, log } = deps;
  const sessions = new Map<string, SessionState>();
  // Runtime session id -> our session; refreshed now and then (a session's owner changes when claimed).
  const byUpstream = new Map<string, { at: number; ref: SessionRef }>();
  const perms = new Map<string, { at: number; p: Promise<RbacPermissions> }>();
  // One upstream connection per live runtime (per user), opened when the pool says it is ready.
  const upstreams = new Map<string, { owner: RuntimeOwner; stream: RuntimeEventStream; handle: RuntimeHandle }>();
  let offPool: (() => void) | null = null;
  let started = false;
  const refusedOnce = new Set<string>();
  let unsubscribeBus: (() => Promise<void>) | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  // Events are handled strictly in arrival order, even when resolving a session needs a query.
  let chain: Promise<void> = Promise.resolve();
  let subscriberCount = 0;
  let lastRequestSweep = 0;

  const state = (id: string): SessionState => {
    let s = sessions.get(id);
    if (!s) sessions.set(id, (s = { ref: null, buffer: [], bufferBytes: 0, subscribers: new Set(), lastEventAt: Date.now() }));
    return s;
  };

  const permissionsOf = (ref: SessionRef): Promise<RbacPermissions> => {
    const key = `${ref.tenantId}:${ref.ownerId}`;
    const hit = perms.get(key);
    if (hit && Date.now() - hit.at < 5000) return hit.p;
    const p = deps.permissionsOf(ref.tenantId, ref.ownerId);
    perms.set(key, { at: Date.now(), p });
    p.catch(() => perms.delete(key));
    return p;
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

  /**
   * A runtime's event, handled here once, goes to the subscribers of every serve (this one included)
   * through the event bus, in order: any serve answers any session's stream, and each keeps the same
   * replay buffer, so a client reconnecting to another serve with Last-Event-ID gets what it missed.
   */
  function fanOut(sessionId: string, event: StreamEvent): void {
    // One after another: two NOTIFYs sent at once on two pooled connections could arrive swapped.
    fanning = fanning
      .then(() => deps.bus.publish(SESSION_EVENTS_CHANNEL, { sessionId, event }))
      .catch((err) => log.error({ err: (err as Error).message, sessionId }, 'could not fan a session event out'));
  }
  let fanning: Promise<void> = Promise.resolve();

  /** Sends an event to a session's subscribers and keeps it for replay. */
  function deliver(sessionId: string, event: StreamEvent): void {
    const s = state(sessionId);
    const frame = `id: ${event.id}\ndata: ${JSON.stringify(event)}\n\n`;
    s.buffer.push({ id: event.id, frame });
    s.bufferBytes += frame.length;
    while (s.buffer.length > REPLAY_EVENTS || (s.bufferBytes > REPLAY_BYTES && s.buffer.length > 1)) s.bufferBytes -= s.buffer.shift()!.frame.length;
    s.lastEventAt = Date.now();
    for (const sub of s.subscribers) {
      if (sub.write(frame) > MAX_BUFFERED_BYTES) drop(s, sub);
    }
  }

  function drop(s: SessionState, sub: Subscriber) {
    if (s.subscribers.delete(sub)) subscriberCount--;
    sub.close();
  }

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
    if (ref.planId) deps.onChildEvent?.(ref.tenantId, ref.id);

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
    fanOut(ref.id, { id, type: ev.type, properties: clientProperties(ev, ref.id) });
    // A plan's subtask asks its person through the parent session: its stream shows the request, its
    // permissions route answers it (sessions.service replyPermission).
    if (ev.kind === 'permissionAsked' && ref.parentId) {
      fanOut(ref.parentId, { id, type: ev.type, properties: { ...clientProperties(ev, ref.parentId), askedIn: { sessionId: ref.id, planId: ref.planId } } });
    }
    if (ev.kind === 'turnIdle') {
      if (ref.channel !== 'web' && !ref.parentId) deps.onChatTurnEnd?.(ref.tenantId, ref.id, id);
      deps.onTurnEnd?.({ id: ref.id, tenantId: ref.tenantId, planId: ref.planId }, id);
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
        }
        if (!h) return;
        const stream = openRuntimeEventStream({
          endpoint: () => h.endpoint,
          log,
          onEvent: (ev) => {
            chain = chain.then(() => handle(owner, ev)).catch((err) => log.error({ err: (err as Error).message }, 'session event handling failed'));
          },
        });
        upstreams.set(owner.userId, { owner, stream, handle: h });
      });
      unsubscribeBus = await deps.bus.subscribe(SESSION_EVENTS_CHANNEL, (payload) => {
        const p = payload as { sessionId: string; event: StreamEvent };
        if (!p?.sessionId || !p.event) return;
        chain = chain.then(() => {
          deliver(p.sessionId, p.event);
          if (p.event.type === 'session.deleted') closeSession(p.sessionId);
        });
      });
      heartbeat = setInterval(() => {
        for (const s of sessions.values()) for (const sub of s.subscribers) sub.write(': ping\n\n');
      }, HEARTBEAT_MS);
      heartbeat.unref();
      sweeper = setInterval(sweep, 60_000);
      sweeper.unref();
    },

    /**
     * Adds a subscriber to a session (ownership is checked by the caller). With `lastEventId`, first
     * replays the buffered events after it. Returns the function that removes the subscriber.
     */
    subscribe(sessionId: string, sub: Subscriber, lastEventId?: string): () => void {
      const s = state(sessionId);
      if (lastEventId) {
        const at = s.buffer.findIndex((e) => e.id === lastEventId);
        const missed = at >= 0 ? s.buffer.slice(at + 1) : s.buffer.filter((e) => e.id > lastEventId);
        for (const e of missed) sub.write(e.frame);
      }
      s.subscribers.add(sub);
      subscriberCount++;
      return () => {
        if (s.subscribers.delete(sub)) subscriberCount--;
      };
    },

    /** Puts an event of ours on a session's stream, in every process (through the event bus). */
    async publish(sessionId: string, type: string, properties: Record<string, unknown>): Promise<void> {
      await deps.bus.publish(SESSION_EVENTS_CHANNEL, { sessionId, event: { id: ascendingId('evt'), type, properties: { ...properties, sessionID: sessionId } } });
    },

    get stats() {
      return { sessions: sessions.size, subscribers: subscriberCount, upstreams: upstreams.size, upstreamsConnected: [...upstreams.values()].filter((u) => u.stream.connected).length };
    },

    /** Ends every stream (shutdown) and the upstream connection. */
    async stop(): Promise<void> {
      if (heartbeat) clearInterval(heartbeat);
      if (sweeper) clearInterval(sweeper);
      heartbeat = sweeper = null;
      for (const s of sessions.values()) for (const sub of [...s.subscribers]) drop(s, sub);
      await unsubscribeBus?.().catch(() => {});
      unsubscribeBus = null;
      offPool?.();
      offPool = null;
      await Promise.all([...upstreams.values()].map((u) => u.stream.close()));
      upstreams.clear();
      started = false;
    },
  };
}

function refOf(row: SessionRow): SessionRef {
  return { id: row.id, tenantId: row.tenantId, ownerId: row.ownerId, directory: row.directory, channel: row.channel, parentId: row.parentId, planId: row.planId };
}

export type SessionStreams = ReturnType<typeof createSessionStreams>;
