import type { Database } from '../../db/database.js';
import type { EventBus } from '../events.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../logger.js';
import { toolAllowed, type RbacPermissions } from '../rbac/permissions.js';
import type { RuntimeClient } from '../runtime/runtime-client.js';
import { openRuntimeEventStream, type RuntimeEvent, type RuntimeEventStream } from '../runtime/runtime-events.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';

/**
 * The session stream of SPEC.md "Events": one upstream connection to the runtime's event stream per
 * process, fanned out to the SSE subscribers of each session. On the way it
 *  - keeps only events of our sessions and of the types SPEC.md lists, rewrites the runtime's session
 *    ids to ours, maps busy/retry to `running`, and strips server paths;
 *  - keeps the last REPLAY_EVENTS events of each session so a client reconnecting with Last-Event-ID gets
 *    what it missed (ids are the runtime's own ascending event ids, the same in every process);
 *  - reacts: rejects permission requests for tools the owner may not use, enqueues analytics (usage
 *    per completed assistant message, tool.execute per completed tool call), enforces per-request cost.
 * Every `aws serve` process does this on its own connection, so a subscriber is served by whichever
 * process it reached; side effects are made exactly-once by the analytics job's ledger.
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
export const ANALYTICS_JOB = 'agent-analytics';

const FORWARDED = new Set([
  'message.updated',
  'message.removed',
  'message.part.updated',
  'message.part.removed',
  'message.part.delta',
  'permission.asked',
  'permission.replied',
  'session.status',
  'session.idle',
  'session.error',
  'session.compacted',
]);

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
}

interface SessionState {
  ref: SessionRef | null;
  buffer: Array<{ id: string; frame: string }>;
  bufferBytes: number;
  subscribers: Set<Subscriber>;
  lastEventAt: number;
  /** Cost of each turn so far, per assistant message (keyed by the user message that started the turn). */
  turnCost: Map<string, { messages: Map<string, number>; aborted: boolean }>;
}

export function createSessionStreams(deps: {
  db: Database;
  bus: EventBus;
  queue: JobQueue;
  repo: SessionsRepo;
  client: RuntimeClient;
  log: Logger;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Called at the end of every turn of a session that came from a chat channel (not `web`). */
  onChatTurnEnd?: (tenantId: string, sessionId: string, eventId: string) => void;
  /** Called when the runtime's stream is connected again after it was lost (the runtime may have restarted). */
  onRuntimeReconnect?: () => void;
}) {
  const { db, repo, client, log } = deps;
  const sessions = new Map<string, SessionState>();
  // Runtime session id -> our session; refreshed now and then (a session's owner changes when claimed).
  const byUpstream = new Map<string, { at: number; ref: SessionRef }>();
  const perms = new Map<string, { at: number; p: Promise<RbacPermissions> }>();
  let upstream: RuntimeEventStream | null = null;
  let unsubscribeBus: (() => Promise<void>) | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  // Events are handled strictly in arrival order, even when resolving a session needs a query.
  let chain: Promise<void> = Promise.resolve();
  let subscriberCount = 0;
  let lastRequestSweep = 0;

  const state = (id: string): SessionState => {
    let s = sessions.get(id);
    if (!s) sessions.set(id, (s = { ref: null, buffer: [], bufferBytes: 0, subscribers: new Set(), lastEventAt: Date.now(), turnCost: new Map() }));
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
      if (!/singleton/.test((err as Error).message)) log.error({ err: (err as Error).message, key }, 'could not enqueue analytics');
    });
  }

  async function handle(ev: RuntimeEvent): Promise<void> {
    const { type, properties: props } = ev.payload;
    if (!FORWARDED.has(type)) return;
    const upstreamId: string | undefined = props?.sessionID ?? props?.info?.sessionID ?? props?.part?.sessionID;
    if (!upstreamId) return;
    const ref = await resolve(upstreamId);
    if (!ref) return;
    const s = state(ref.id);
    s.ref = ref;
    const properties: Record<string, any> = { ...props, sessionID: ref.id };

    switch (type) {
      case 'session.status': {
        const st = props.status ?? {};
        properties.status = st.type === 'idle' ? { type: 'idle' } : { type: 'running', ...(st.type === 'retry' ? { retry: { attempt: st.attempt, message: st.message, next: st.next } } : {}) };
        break;
      }
      case 'message.updated': {
        const { path: _path, ...info } = props.info ?? {};
        properties.info = { ...info, sessionID: ref.id };
        if (info.role === 'assistant') await onAssistant(ref, upstreamId, s, info);
        break;
      }
      case 'message.part.updated': {
        properties.part = { ...props.part, sessionID: ref.id };
        if (props.part?.type === 'tool') await onToolPart(ref, props.part);
        break;
      }
      case 'permission.asked': {
        const allowed = toolAllowed(await permissionsOf(ref), props.permission);
        if (!allowed) {
          // Never shown to the user: the tool is outside their role's tools policy.
          void rejectPermission(ref, props);
          return;
        }
        // The owner's reply is checked against this record (the request must be of their session).
        try {
          await repo.recordPermissionRequest(db, { id: props.id, tenantId: ref.tenantId, sessionId: ref.id, permission: String(props.permission) });
        } catch (err) {
          // Unrecorded, a reply would be refused and the turn would wait for it forever: refuse it now.
          log.error({ err: (err as Error).message, sessionId: ref.id }, 'could not record a permission request; rejecting it');
          void client.replyPermission(ref.directory, props.id, 'reject', 'The request could not be recorded; try again.').catch(() => {});
          return;
        }
        break;
      }
      case 'permission.replied': {
        // Answered (through us, or by the runtime itself after an `always`): no longer answerable.
        if (typeof props.requestID === 'string') await repo.takePermissionRequest(db, ref.tenantId, ref.id, props.requestID).catch(() => null);
        break;
      }
    }
    const id = ev.payload.id ?? ascendingId('evt');
    deliver(ref.id, { id, type, properties });
    if (type === 'session.idle' && ref.channel !== 'web') deps.onChatTurnEnd?.(ref.tenantId, ref.id, id);
  }

  async function rejectPermission(ref: SessionRef, props: Record<string, any>) {
    try {
      const replied = await client.replyPermission(ref.directory, props.id, 'reject', `The tool "${props.permission}" is not allowed by your role.`);
      if (replied) enqueueAnalytics({ kind: 'denied', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool: props.permission, patterns: props.patterns ?? [], reason: 'tools policy' }, `denied:${props.id}`);
    } catch (err) {
      log.error({ err: (err as Error).message, sessionId: ref.id }, 'could not reject a denied tool');
    }
  }

  async function onAssistant(ref: SessionRef, upstreamId: string, s: SessionState, info: Record<string, any>) {
    const limit = (await permissionsOf(ref)).cost.per_request_limit_usd;
    if (limit !== undefined && info.parentID && typeof info.cost === 'number') {
      // A turn may produce several assistant messages (tool steps); its cost is their sum.
      let turn = s.turnCost.get(info.parentID);
      if (!turn) {
        s.turnCost.set(info.parentID, (turn = { messages: new Map(), aborted: false }));
        // Only the latest turns can still be running.
        if (s.turnCost.size > 20) s.turnCost.delete(s.turnCost.keys().next().value!);
      }
      turn.messages.set(info.id, info.cost);
      const cost = [...turn.messages.values()].reduce((a, b) => a + b, 0);
      if (cost > limit && !turn.aborted) {
        turn.aborted = true;
        await client.abort(ref.directory, upstreamId).catch(() => {});
        deliver(ref.id, { id: ascendingId('evt'), type: 'session.error', properties: { sessionID: ref.id, error: { name: 'CostLimitExceeded', message: `This turn cost $${cost.toFixed(4)}, over your per-request limit of $${limit}; it was stopped.` } } });
        enqueueAnalytics({ kind: 'cost_limit', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, limit, cost, messageId: info.parentID }, `cost:${info.parentID}`);
      }
    }
    if (info.time?.completed && info.tokens) {
      enqueueAnalytics(
        {
          kind: 'usage',
          sessionId: ref.id,
          tenantId: ref.tenantId,
          userId: ref.ownerId,
          channel: ref.channel,
          messageId: info.id,
          providerId: info.providerID ?? '',
          modelId: info.modelID ?? '',
          tokens: info.tokens,
          cost: info.cost ?? 0,
        },
        `usage:${info.id}`,
      );
    }
  }

  async function onToolPart(ref: SessionRef, part: Record<string, any>) {
    const st = part.state ?? {};
    if (st.status !== 'completed' && st.status !== 'error') return;
    if (part.tool === 'invalid') {
      // The model called a tool it was not given (tools outside the owner's policy are withheld).
      const tool = st.input?.tool;
      if (typeof tool === 'string' && !toolAllowed(await permissionsOf(ref), tool)) {
        enqueueAnalytics({ kind: 'denied', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool, patterns: [], reason: 'tools policy (withheld from the model)' }, `denied:${part.id}`);
      }
      return;
    }
    const durationMs = st.time?.end && st.time?.start ? Math.max(0, Math.round(st.time.end - st.time.start)) : null;
    enqueueAnalytics(
      { kind: 'tool', sessionId: ref.id, tenantId: ref.tenantId, userId: ref.ownerId, channel: ref.channel, tool: part.tool, callId: part.callID, status: st.status, durationMs, title: typeof st.title === 'string' ? st.title.slice(0, 200) : undefined },
      `tool:${part.id}`,
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

  return {
    /** Connects to the runtime's event stream and to events other processes put on session streams. */
    async start(): Promise<void> {
      if (upstream) return;
      upstream = openRuntimeEventStream({
        connector: client.connector,
        log,
        onEvent: (ev) => {
          chain = chain.then(() => handle(ev)).catch((err) => log.error({ err: (err as Error).message }, 'session event handling failed'));
        },
        onConnect: (first) => {
          if (!first) deps.onRuntimeReconnect?.();
        },
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
      return { sessions: sessions.size, subscribers: subscriberCount, upstreamConnected: upstream?.connected ?? false };
    },

    /** Ends every stream (shutdown) and the upstream connection. */
    async stop(): Promise<void> {
      if (heartbeat) clearInterval(heartbeat);
      if (sweeper) clearInterval(sweeper);
      heartbeat = sweeper = null;
      for (const s of sessions.values()) for (const sub of [...s.subscribers]) drop(s, sub);
      await unsubscribeBus?.().catch(() => {});
      unsubscribeBus = null;
      await upstream?.close();
      upstream = null;
    },
  };
}

function refOf(row: SessionRow): SessionRef {
  return { id: row.id, tenantId: row.tenantId, ownerId: row.ownerId, directory: row.directory, channel: row.channel };
}

export type SessionStreams = ReturnType<typeof createSessionStreams>;
