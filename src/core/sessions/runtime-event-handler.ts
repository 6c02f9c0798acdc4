import type { Database } from '../../db/database.js';
import { JobAlreadyQueuedError, type JobQueue } from '../jobs/job-queue.js';
import type { Logger } from '../../kernel/logger.js';
import { toolAllowed, type RbacPermissions } from '../../kernel/permissions.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import type { RuntimeOwner } from '../runtime/host/runtime-host.js';
import type { RuntimeEvent } from '../runtime/runtime-events.js';
import { clientProperties, mapRuntimeEvent, type SessionDomainEvent } from '../runtime/event-mapper.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { ANALYTICS_JOB } from './session-analytics.js';
import type { createPartialAnswers } from './partial-answers.js';
import type { StreamEvent } from './session-replay.js';
import type { PermissionRequestsRepo } from './permission-requests.repo.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { TurnEvents } from './turn-events.js';

/** Records of unanswered permission requests are kept this long (a runtime restart forgets them sooner). */
const PERMISSION_REQUEST_TTL_MS = 7 * 24 * 3600_000;
const REQUEST_SWEEP_MS = 3600_000;

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

/**
 * What a runtime's event does, handled once by the process that follows the runtime: the event mapper
 * (which alone knows the runtime's event shapes) gives domain events; those of sessions the runtime's own
 * user owns are kept (the agent can drive its runtime's API: a runtime never speaks for another user's
 * session), our session ids put in, and `emit` puts them on the session's stream. On the way it rejects
 * permission requests for tools the owner may not use, enqueues analytics (tool.execute per completed
 * tool call, denials), tells the pool which runtimes are busy, and tells of turns' ends. Usage and cost
 * limits are not taken from here: the LLM gateway records every model call from the provider's own report.
 */
export function createRuntimeEventHandler(deps: {
  db: Database;
  queue: JobQueue;
  repo: SessionsRepo;
  permissionRequests: PermissionRequestsRepo;
  pool: RuntimePool;
  log: Logger;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Where turns' ends and plan sessions' activity are told (turn-events.ts). */
  events: Pick<TurnEvents, 'emit'>;
  /** What answers have streamed (partial-answers.ts). */
  partials: Pick<ReturnType<typeof createPartialAnswers>, 'seen'>;
  /** A session has an event of its runtime: its stream keeps a buffer from now. */
  track: (sessionId: string) => void;
  /** Puts an event on a session's stream. */
  emit: (sessionId: string, event: StreamEvent) => void;
}) {
  const { db, repo, permissionRequests, pool, log, partials, emit } = deps;

  // Runtime session id -> our session; refreshed now and then (a session's owner changes when claimed).
  const byUpstream = new Map<string, { at: number; ref: SessionRef }>();
  const perms = createPromiseCache<RbacPermissions>({ ttlMs: 5000 });
  const refusedOnce = new Set<string>();
  let lastRequestSweep = 0;

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
    deps.track(ref.id);
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
          await permissionRequests.recordPermissionRequest(db, { id: ev.requestId, tenantId: ref.tenantId, sessionId: ref.id, permission: ev.permission, patterns: ev.patterns });
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
        await permissionRequests.takePermissionRequest(db, ref.tenantId, ref.id, ev.requestId).catch(() => null);
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

  return {
    handle,

    /** Forgets what grows with time: answered-never permission requests (hourly), the session lookups when too many. */
    sweep(now: number): void {
      if (now - lastRequestSweep > REQUEST_SWEEP_MS) {
        lastRequestSweep = now;
        void permissionRequests.dropPermissionRequestsBefore(db, new Date(now - PERMISSION_REQUEST_TTL_MS)).catch(() => {});
      }
      if (byUpstream.size > 50_000) byUpstream.clear();
    },
  };
}

function refOf(row: SessionRow): SessionRef {
  return { id: row.id, tenantId: row.tenantId, ownerId: row.ownerId, directory: row.directory, channel: row.channel, parentId: row.parentId, planId: row.planId };
}
