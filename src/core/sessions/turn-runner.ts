import type { TurnSnapshots } from './turn-snapshots.js';
import type { Database } from '../../db/database.js';
import { withTimeout } from '../../lib/with-timeout.js';
import type { Ctx } from '../../kernel/context.js';
import { AppError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { JobQueue } from '../jobs/job-queue.js';
import { createRuntimeClient } from '../runtime/runtime-client.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { RuntimeBusyError } from '../runtime/host/runtime-host.js';
import { limitMessage, type LimitNotice } from '../runtime/host/runtime-limits-fns.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { AgentMemoriesService } from '../memories/agent-memories.service.js';
import { memoryPart, promptText, withheldTools } from './prompt-parts.js';
import type { SessionStreams } from './session-stream.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { StoredEvent, TurnsRepo } from './turns.repo.js';
import { AGENT_TURN_JOB, sendTurnJob, TURN_ATTEMPTS } from './session-turns.js';
import type { TurnEvents } from './turn-events.js';
import { createWorkspacePreparer } from './workspace-dir.js';
import type { JobRecovery } from '../jobs/job-queue.js';
import { ascendingId } from '../runtime/runtime-ids.js';

// Where the turn job's name and limits were first defined; they live with the other pieces of a turn now.
export { AGENT_TURN_JOB } from './session-turns.js';

/** A turn waiting for a free runtime tries again after this long. */
const WAIT_FOR_RUNTIME_S = 3;
/**
 * An attempt that passed its last check may still be handing the turn over (its request on its way, for
 * at most the 10 s a runtime call may take): a later attempt looks for the turn in the runtime only once
 * this long has passed since, so it cannot send it a second time. When the earlier attempt's process is
 * known to be dead, only what the runtime may still be reading of its request (HANDED_BY_DEAD_MS).
 */
const HANDOVER_SETTLE_MS = 15_000;
const HANDED_BY_DEAD_MS = 2_000;
/**
 * A turn attempted this many times is given up, whatever ended its attempts (errors, or workers that died
 * with it: their jobs are taken back and queued again, each a new job with retries of its own).
 */
const MAX_ATTEMPTS = 2 * TURN_ATTEMPTS;
/** The longest the session's next turn waits for the runtime to store a prompt it accepted (turns.repo.ts PENDING bounds it too). */
const STORED_WAIT_MS = 10_000;
/** What a turn's recalled memories may take: at most this many, about this many tokens. */
export const TURN_MEMORIES = { limit: 5, maxTokens: 800 } as const;
/**
 * The longest a turn waits for its memories beyond the runtime's own preparation (recall runs alongside
 * it): a slow embedder or database costs the turn its memories, never the turn.
 */
const RECALL_WAIT_MS = 1500;

/** The code of the session.error a turn lost with its runtime ends with. */
export const TURN_LOST = 'turn_lost';
/** Why a queued turn of a person deactivated (or removed) before it ran does not run. */
export const OWNER_INACTIVE = 'Not run: the person this session belongs to was deactivated, so their agent no longer takes turns.';
/** What a person reads when their turn was lost with its runtime (`reason`: why the runtime went away). */
const lostMessage = (reason: string) =>
  `The agent's runtime stopped during this turn (${reason}); the answer above may be cut short. Send the prompt again to retry.`;

/** How long a turn waits for the workspace's snapshot before it (turn-snapshots.ts) at most. */
const BEFORE_SNAPSHOT_WAIT_MS = 5_000;

export function createTurnRunner(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'byId' | 'bindUpstream' | 'rebindUpstream'>;
  turnsRepo: Pick<
    TurnsRepo,
    | 'beginAttempt' | 'finishTurn' | 'waitTurn' | 'loseTurns' | 'loseTurn' | 'loseOrphanedTurns' | 'endUserTurns'
    | 'claimHandOver' | 'handedOver' | 'handOverFailed' | 'earlierPending' | 'parkTurn' | 'handOn' | 'handOnAll' | 'attemptsOf' | 'failPendingTurn' | 'recordEndEvents'
  > & Partial<Pick<TurnsRepo, 'inFlightSessions'>>;
  runtime: Pick<RuntimeService, 'resolveTurnModel' | 'ensureConfigured'>;
  pool: Pick<RuntimePool, 'acquire'>;
  queue: JobQueue;
  /** The job queue's view of jobs being worked on (finding those whose worker died). */
  jobs: JobRecovery;
  /** This process, as its attempts are recorded (processIdentity), and whether another one still runs. */
  worker: string;
  workerState: (worker: string | null) => 'alive' | 'dead' | 'unknown';
  /**
   * The model calls still in flight of a runtime that went away mid-turn are aborted (and charged): in
   * every process, where the gateway forwarding them runs. `before`: calls started after it are a new
   * runtime's.
   */
  cutModelCalls?: (owner: { tenantId: string; userId: string }, before: number) => void;
  streams: Pick<SessionStreams, 'publish'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Absent: turns go without memories. */
  memories?: Pick<AgentMemoriesService, 'recallForTurn'>;
  /**
   * Where a turn given up (failed for good) or lost with its runtime is told (a plan waiting for its end
   * moves on, a chat user is told), and who may say a queued turn is no longer wanted (its plan ended).
   */
  events: Pick<TurnEvents, 'emit' | 'unwanted'>;
  /** Whether the session's owner is still active (auth/active-users.ts); absent: always. */
  ownerActive?: (tenantId: string, userId: string) => Promise<boolean>;
  /** The workspace's snapshot before each turn (turn-snapshots.ts; its after is taken on the turn's end); absent: none. */
  snapshots?: Pick<TurnSnapshots, 'before' | 'forget'>;
  /** How long a turn waits for its before-snapshot at most (default BEFORE_SNAPSHOT_WAIT_MS). */
  snapshotWaitMs?: number;
  /** Refuses a turn whose person's workspace is past its quota (runtime-limits.ts); absent: no quota. */
  quota?: { checkTurn(owner: { tenantId: string; userId: string }): Promise<void> };
  log: Logger;
}) {
  const { db, repo, turnsRepo, runtime, streams } = deps;
  /** Makes a user's workspace directory (and a git repository in it) if it is not there yet. */
  const ensureWorkspace = createWorkspacePreparer(deps.log).ensure;

  /**
   * The memories for a turn as one synthetic part, or none. Never fails: a recall that fails or takes
   * too long is logged and the turn goes on without memories.
   */
  function recall(ctx: Ctx, owner: { tenantId: string; userId: string }, parts: Array<Record<string, unknown>>): Promise<Record<string, unknown> | null> {
    if (!deps.memories) return Promise.resolve(null);
    const text = promptText(parts);
    const started = Date.now();
    return deps.memories.recallForTurn(owner, text, TURN_MEMORIES).then(
      ({ memories, searchMode }) => {
        ctx.log.debug({ recalled: memories.length, searchMode, ms: Date.now() - started }, 'memories recalled for the turn');
        return memories.length ? memoryPart(memories) : null;
      },
      (err) => {
        ctx.log.warn({ err: (err as Error).message }, 'recalling memories for the turn failed: the turn goes on without them');
        return null;
      },
    );
  }

  /**
   * Ends a turn on its session's stream with these events (every process's subscribers, through the bus)
   * and records them with the turn, with their ids: a client resuming with an older Last-Event-ID on a
   * serve that never saw them (one restarted since) is still told how the turn ended.
   */
  async function publishEnd(t: { id: string; sessionId: string; tenantId: string }, events: Array<{ type: string; properties: Record<string, unknown> }>): Promise<void> {
    const stored: StoredEvent[] = events.map((e) => ({ id: ascendingId('evt'), type: e.type, properties: { ...e.properties, sessionID: t.sessionId } }));
    await turnsRepo.recordEndEvents(db, t.tenantId, t.id, stored).catch((err) => deps.log.error({ err: (err as Error).message, turnId: t.id }, 'could not record how a turn ended'));
    for (const e of stored) {
      await streams.publish(t.sessionId, e.type, e.properties, e.id).catch((err) => deps.log.error({ err: (err as Error).message, turnId: t.id }, 'could not tell a session how its turn ended'));
    }
  }

  /** Tells a lost turn's session (every process's subscribers, through the bus) and who waits for the turn. */
  async function reportLost(t: { id: string; sessionId: string; tenantId: string; ownerId: string }, reason: string): Promise<void> {
    const message = lostMessage(reason);
    deps.log.warn({ turnId: t.id, sessionId: t.sessionId, userId: t.ownerId, reason }, 'a turn was lost with its runtime');
    await publishEnd(t, [
      { type: 'session.error', properties: { error: { name: 'TurnLost', code: TURN_LOST, message } } },
      { type: 'session.status', properties: { status: { type: 'idle' } } },
    ]);
    const s = await repo.byId(db, t.tenantId, t.sessionId).catch(() => null);
    if (s) deps.events.emit('turn.failed', { session: s, turnId: t.id });
  }

  /**
   * The session's next turn, if it waits parked behind the one that was just handed over (or ended):
   * queued now, with its job in the same transaction.
   */
  async function handOn(t: { tenantId: string; sessionId: string }): Promise<void> {
    await db
      .transaction(async (tx) => {
        const next = await turnsRepo.handOn(tx, t.tenantId, t.sessionId);
        if (next) await sendTurnJob(deps.queue, next, { tx });
      })
      .catch((err) => deps.log.error({ err: (err as Error).message, sessionId: t.sessionId }, 'could not queue the next turn of a session (the worker\'s sweep will)'));
  }

  /**
   * Waits until the runtime has stored a prompt it accepted (at most STORED_WAIT_MS; never fails: the
   * session's next turn goes then anyway).
   */
  async function storedBy(client: ReturnType<typeof createRuntimeClient>, upstreamId: string, messageId: string, ctx: Ctx): Promise<void> {
    const deadline = Date.now() + STORED_WAIT_MS;
    for (;;) {
      try {
        if (await client.messageExists(upstreamId, messageId)) return;
      } catch (err) {
        ctx.log.warn({ err: (err as Error).message }, 'could not ask the runtime whether it stored the prompt');
        return;
      }
      if (Date.now() >= deadline) {
        ctx.log.warn({ messageId, ms: STORED_WAIT_MS }, 'the runtime has not stored the prompt it accepted: the session\'s next turn goes anyway');
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Gives a turn up for good: recorded, told on its stream (and to who waits for it), the session's next turn queued. */
  async function failTurn(s: SessionRow, turnId: string, message: string, code?: string): Promise<void> {
    await turnsRepo.finishTurn(db, s.tenantId, turnId, 'failed', message);
    await publishEnd({ id: turnId, sessionId: s.id, tenantId: s.tenantId }, [{ type: 'session.error', properties: { error: { name: 'TurnFailed', message, ...(code ? { code } : {}) } } }]);
    deps.events.emit('turn.failed', { session: s, turnId });
    await handOn({ tenantId: s.tenantId, sessionId: s.id });
  }

  /**
   * Where a turn an earlier attempt handed over stands, in the runtime that has its message now: still
   * running, ended (answered, or failed there), or cut (the runtime that had it went away mid-turn, and
   * the one here, started on the same home, holds the message but runs nothing).
   */
  async function handedOver(client: ReturnType<typeof createRuntimeClient>, upstreamId: string, messageId: string): Promise<'running' | 'ended' | 'cut'> {
    if ((await client.busySessions()).includes(upstreamId)) return 'running';
    const recent = await client.recentMessages(upstreamId, 50);
    const answer = recent.filter((m) => m.info.role === 'assistant' && m.info.parentID === messageId).at(-1);
    if (answer && (answer.info.time.completed || answer.info.error)) return 'ended';
    // A later prompt was taken after it: the runtime was done with this one.
    if (recent.some((m) => m.info.role === 'user' && m.info.id > messageId)) return 'ended';
    return 'cut';
  }

  return {
    ensureWorkspace,

    /**
     * The user's runtime went away (it exited or was killed, its serve died, its runner was lost) before
     * the turns it had were done: each ends now, once across every process, marked lost (what the
     * session's transcript then says, messages()), with a clear error on its session's stream, and a plan
     * or chat waiting for it moves on. The next prompt starts a runtime again (on another runner, if need
     * be). Turns not yet handed over are untouched: they are sent when a runtime is there. With `idle`
     * (the runtime was stopped while running nothing, by its own account), turns still marked in flight
     * had ended unseen: they are marked so, and nobody is told.
     */
    async runtimeLost(owner: { tenantId: string; userId: string }, reason: string, o: { idle?: boolean; sentBefore?: Date } = {}): Promise<number> {
      if (o.idle) {
        await turnsRepo.endUserTurns(db, owner.tenantId, owner.userId);
        return 0;
      }
      // Nobody reads the answers of its model calls still in flight any more; the provider bills them
      // while they run: aborted now, and charged.
      deps.cutModelCalls?.(owner, Date.now());
      const lost = await turnsRepo.loseTurns(db, owner.tenantId, owner.userId, lostMessage(reason), o.sentBefore ?? null);
      for (const t of lost) await reportLost({ ...t, tenantId: owner.tenantId, ownerId: owner.userId }, reason);
      return lost.length;
    },

    /**
     * The user's runtime met one of its limits (memory, processes, disk): every session with a turn of
     * theirs in flight says so on its stream (`runtime.limit`), across every process (the bus). A runtime
     * ended for it also ends its turns (runtimeLost, told by the host just after).
     */
    async limitReached(owner: { tenantId: string; userId: string }, notice: LimitNotice): Promise<number> {
      const sessions = (await turnsRepo.inFlightSessions?.(db, owner.tenantId, owner.userId)) ?? [];
      deps.log.warn({ userId: owner.userId, notice, sessions: sessions.length }, 'an agent runtime met one of its limits');
      for (const id of sessions) await streams.publish(id, 'runtime.limit', { ...notice, message: limitMessage(notice) }).catch(() => {});
      return sessions.length;
    },

    /**
     * Turns a serve that is gone left in flight with no runtime anywhere (it died before it could end
     * them, its runtimes with it): lost. Run as a serve starts hosting, after the rows of dead hosts are
     * forgotten.
     */
    async reconcile(): Promise<number> {
      const reason = 'the service hosting it stopped';
      const lost = await turnsRepo.loseOrphanedTurns(db, lostMessage(reason));
      for (const t of lost) await reportLost(t, reason);
      return lost.length;
    },

    /**
     * The agent-turn job: sends a queued turn to the session owner's runtime (started if need be)
     * exactly once, and after every turn its session accepted before it. The runtime message id was
     * chosen when the prompt was accepted, so a retry (worker died after sending) finds the message
     * upstream and stops instead of sending the turn again; an attempt overtaken by a newer one (its
     * worker taken for dead) stops at its last check before sending. When every runtime of the host is
     * busy, or an earlier turn of the session is still to be sent, the turn waits (its attempts
     * untouched) and the stream says so.
     */
    async runTurn(ctx: Ctx, input: { turnId: string }): Promise<void> {
      const turn = await turnsRepo.beginAttempt(db, input.turnId, deps.worker);
      // Handed over already (in flight, ended, or lost with its runtime), or given up: nothing to send.
      if (!turn || ['sent', 'done', 'lost', 'failed'].includes(turn.previousStatus)) return;
      const s = (await repo.byId(db, turn.tenantId, turn.sessionId))!;
      const fail = (message: string, code?: string) => failTurn(s, turn.id, message, code);
      const unwanted = await deps.events.unwanted(s, turn.id);
      if (unwanted) {
        ctx.log.info({ turnId: turn.id, sessionId: s.id }, `turn not sent: ${unwanted}`);
        await turnsRepo.finishTurn(db, turn.tenantId, turn.id, 'failed', `not sent: ${unwanted}`);
        await handOn(turn);
        return;
      }
      // Deactivated or removed since the prompt was accepted: no runtime is started in their name.
      if (deps.ownerActive && !(await deps.ownerActive(s.tenantId, s.ownerId))) return fail(OWNER_INACTIVE);
      if (turn.attempts > MAX_ATTEMPTS) return fail(`the turn could not be sent to the agent runtime (${turn.attempts - 1} attempts)`);
      // A session's turns reach its runtime in the order they were accepted, wherever the runtime runs and
      // whatever held an earlier one up (a frozen runner, a runtime starting, a worker that died).
      if (await turnsRepo.earlierPending(db, turn)) {
        const waited = await turnsRepo.parkTurn(db, turn.tenantId, turn.id);
        if (!waited) await streams.publish(s.id, 'turn.waiting', { why: 'earlier_turn', message: 'Your earlier prompt in this session goes to your agent first; this one follows it.' }).catch(() => {});
        // The earlier one may have been handed over meanwhile (its handOn found nothing parked yet).
        await handOn(turn);
        return;
      }
      // An earlier attempt passed its last check and may still be handing the turn over: the runtime is
      // asked whether it has the turn only once that attempt cannot be on its way any more.
      if (turn.handingAt) {
        const settle = deps.workerState(turn.previousWorker) === 'dead' ? HANDED_BY_DEAD_MS : HANDOVER_SETTLE_MS;
        const waitMs = turn.handingAt.getTime() + settle - Date.now();
        if (waitMs > 0) {
          await db.transaction(async (tx) => {
            await turnsRepo.waitTurn(tx, turn.tenantId, turn.id, 'waiting for an earlier attempt to hand it over');
            await sendTurnJob(deps.queue, turn.id, { tx, startAfterSeconds: Math.ceil(waitMs / 1000) });
          });
          return;
        }
      }
      let claimed = false;
      try {
        const owner = { tenantId: s.tenantId, userId: s.ownerId };
        // A workspace past its quota takes no new turn (the quota is measured: writes are not refused).
        await deps.quota?.checkTurn(owner);
        // Started now so it runs while the runtime is acquired and prepared: off the critical path.
        const memoriesPart = recall(ctx, owner, turn.parts);
        await ensureWorkspace(s.directory);
        let handle;
        let cold = false;
        const t0 = Date.now();
        try {
          // A cold start takes seconds: the stream says so, so they do not look like a hang.
          handle = await deps.pool.acquire(owner, {
            onStarting: () => {
              cold = true;
              void streams.publish(s.id, 'runtime.starting', { message: 'Starting your agent…' }).catch(() => {});
            },
            // A drain moved the person's agent to another runner host with their files: said once.
            onMoved: () =>
              void streams.publish(s.id, 'runtime.moved', { workspace: 'moved', message: 'Your agent now runs on another host; your workspace and conversations moved with it.' }).catch(() => {}),
          });
        } catch (err) {
          if (!(err instanceof RuntimeBusyError)) throw err;
          // The turn and its next job together: a turn back in the queue without one would hold up its session.
          const waited = await db.transaction(async (tx) => {
            const w = await turnsRepo.waitTurn(tx, turn.tenantId, turn.id);
            await sendTurnJob(deps.queue, turn.id, { tx, startAfterSeconds: WAIT_FOR_RUNTIME_S });
            return w;
          });
          const starting = (err.details as { why?: string } | undefined)?.why === 'starting';
          if (!waited) await streams.publish(s.id, 'runtime.waiting', { message: starting ? `${err.message}; your turn goes as soon as it is up.` : `${err.message}: your turn waits in the queue and starts when one frees up.` });
          return;
        }
        if (cold) await streams.publish(s.id, 'runtime.started', { message: 'Your agent is up; handing it your message…', startMs: Date.now() - t0 }).catch(() => {});
        const client = createRuntimeClient(handle);
        await runtime.ensureConfigured(owner, handle);
        const upstreamOf = async (row: SessionRow, parentID?: string): Promise<string> =>
          row.upstreamId ?? (await repo.bindUpstream(db, row.tenantId, row.id, await client.createSession({ title: row.title, ...(parentID ? { parentID } : {}) })));
        // A child session (a plan's planning turn or subtask) is a child of its parent's runtime session.
        const parent = s.parentId ? await repo.byId(db, s.tenantId, s.parentId) : null;
        let upstreamId = await upstreamOf(s, parent ? await upstreamOf(parent) : undefined);
        // A runtime started afresh may not know the session: its user was placed on another runner host
        // after theirs was lost, with the files on that host's own disk. The session goes on there, anew.
        const startAnew = async (known: string) => {
          upstreamId = await repo.rebindUpstream(db, s.tenantId, s.id, known, await client.createSession({ title: s.title }), { beforeMessageId: turn.messageId });
          await streams.publish(s.id, 'runtime.moved', {
            workspace: 'fresh',
            message: 'Your agent now runs on another host, in a fresh workspace: this conversation\'s earlier turns and your files stayed on the host that was lost (an operator can recover them if it comes back). It continues from here.',
          });
        };
        if (cold && s.upstreamId && !(await client.sessionExists(s.upstreamId))) await startAnew(s.upstreamId);
        if (turn.attempts > 1 && (await client.messageExists(upstreamId, turn.messageId))) {
          ctx.log.warn({ turnId: turn.id }, 'turn already reached the runtime on an earlier attempt; not sending it again');
          const where = await handedOver(client, upstreamId, turn.messageId);
          if (where === 'cut') {
            // Its runtime went away before the attempt that handed it over could record it: lost, as any
            // turn in flight then. Not sent again (the person decides: part of it may have run).
            const reason = 'it stopped before the turn ended';
            if (await turnsRepo.loseTurn(db, turn.tenantId, turn.id, lostMessage(reason))) await reportLost({ id: turn.id, sessionId: s.id, tenantId: s.tenantId, ownerId: s.ownerId }, reason);
            await handOn(turn);
            return;
          }
          await turnsRepo.finishTurn(db, turn.tenantId, turn.id, where === 'running' ? 'sent' : 'done');
          await turnsRepo.handedOver(db, turn.tenantId, turn.id);
          await handOn(turn);
          return;
        }
        // Checked again as the turn goes: the owner's role or the provider may have changed since
        // the prompt was accepted; a model no longer theirs to choose fails the turn with its reason (before
        // its snapshot is taken: a turn that never runs leaves none).
        const perms = await deps.permissionsOf(s.tenantId, s.ownerId);
        const model = await runtime.resolveTurnModel(s.tenantId, { turn: turn.model, session: s.chosenModel, template: s.model }, perms);
        // The workspace as it is before the turn (what the turn changed is measured from it; an undo puts it
        // back), taken while the memories are recalled. A turn sent while one of the session
        // still runs is recorded with it (the runtime queues it behind).
        const snapshotted = deps.snapshots
          ? client.busySessions().then((b) => b.includes(upstreamId), () => false).then((busy) => deps.snapshots!.before(owner, s.id, turn.messageId, { busy }))
          : Promise.resolve();
        const injected = await withTimeout(memoriesPart, RECALL_WAIT_MS, () => {
          ctx.log.warn({ ms: RECALL_WAIT_MS }, 'recalling memories for the turn took too long: the turn goes on without them');
          return null;
        });
        // A first snapshot of a large workspace reads every file: the turn does not wait for it past
        // BEFORE_SNAPSHOT_WAIT_MS, and a snapshot that ends later is dropped (the turn is then not recorded;
        // the next one finds the files in the snapshot's cache and is quick).
        const snapshotWait = deps.snapshotWaitMs ?? BEFORE_SNAPSHOT_WAIT_MS;
        if (!(await withTimeout(snapshotted.then(() => true), snapshotWait, () => false))) {
          ctx.log.warn({ ms: snapshotWait, sessionId: s.id }, 'the workspace snapshot before a turn took too long: the turn goes on, and its changes are not recorded');
          void snapshotted.then(() => deps.snapshots?.forget(owner, s.id, turn.messageId));
        }
        // The last check: an attempt a newer one overtook (its worker was taken for dead) sends nothing.
        if (!(await turnsRepo.claimHandOver(db, turn.tenantId, turn.id, turn.attempts))) {
          ctx.log.warn({ turnId: turn.id, attempt: turn.attempts }, 'a newer attempt has taken this turn over; not sending it from here');
          return;
        }
        claimed = true;
        const prompt = () =>
          client.promptAsync(upstreamId, {
            messageID: turn.messageId,
            parts: injected ? [...turn.parts, injected] : turn.parts,
            model: { providerID: model.providerID, modelID: model.modelID },
            ...(turn.agent ? { agent: turn.agent } : {}),
            ...(s.systemPrompt ? { system: s.systemPrompt } : {}),
            // A turn can withhold more tools than the owner's policy does, never give one back.
            tools: { ...withheldTools(perms), ...Object.fromEntries(Object.entries(turn.tools ?? {}).filter(([, on]) => on === false)) },
          });
        try {
          await prompt();
        } catch (err) {
          // The same, when the runtime was started before this turn (the dashboard prepared it): it is
          // found out here, at no cost to the turns that find their session.
          const known = upstreamId;
          if (!(err instanceof AppError && (err.details as { status?: number } | undefined)?.status === 404 && s.upstreamId === known && !s.parentId && !(await client.sessionExists(known)))) throw err;
          await startAnew(known);
          await prompt();
        }
        await turnsRepo.finishTurn(db, turn.tenantId, turn.id, 'sent');
        claimed = false;
        // The runtime stores a prompt it took a moment later (its first after a start, a second or two): the
        // session's next turn goes once it has, so that the runtime has them in the order they were accepted.
        await storedBy(client, upstreamId, turn.messageId, ctx);
        await turnsRepo.handedOver(db, turn.tenantId, turn.id);
        await handOn(turn);
        // The runtime has the turn: it gets its tools ready (longer at its first turn) and calls the model.
        if (cold) await streams.publish(s.id, 'turn.sent', { message: 'Sent to your agent; waiting for the model…' }).catch(() => {});
      } catch (err) {
        // The request is over, whatever the runtime made of it: the next attempt asks it at once.
        if (claimed) await turnsRepo.handOverFailed(db, turn.tenantId, turn.id, turn.attempts).catch(() => {});
        const retryable = !(err instanceof AppError) || err.status >= 500;
        if (retryable && turn.attempts < TURN_ATTEMPTS) throw err;
        await fail((err as Error).message, err instanceof AppError ? err.code : undefined);
      }
    },

    /**
     * Turn jobs whose worker died mid-attempt (on this host: its process is gone) are taken back from it
     * and queued again at once, rather than after the job queue's expiry (TURN_EXPIRE_S); the session is
     * told. `starting`: run as this process starts working jobs on the embedded database, where it is the
     * only process that works them, so every job still active was a dead process's (also one whose
     * attempt had not begun). The attempt of a worker that may still run is never taken. How many.
     */
    async recoverOrphans(o: { starting?: boolean } = {}): Promise<number> {
      const active = await deps.jobs.activeJobs(AGENT_TURN_JOB);
      if (!active.length) return 0;
      const turns = new Map((await turnsRepo.attemptsOf(db, active.map((j) => String((j.data as { turnId?: unknown })?.turnId ?? '')).filter((id) => /^[0-9a-f-]{36}$/.test(id)))).map((t) => [t.id, t]));
      let recovered = 0;
      for (const job of active) {
        const turnId = String((job.data as { turnId?: unknown })?.turnId ?? '');
        const t = turns.get(turnId);
        const state = deps.workerState(t?.attemptWorker ?? null);
        if (!(state === 'dead' || (o.starting && state !== 'alive'))) continue;
        const taken = await db.transaction(async (tx) => {
          if (!(await deps.jobs.takeBack(AGENT_TURN_JOB, job.id, tx))) return false;
          await sendTurnJob(deps.queue, turnId, { tx });
          return true;
        });
        if (!taken) continue;
        recovered++;
        deps.log.warn({ turnId, jobId: job.id }, 'a turn job\'s worker died mid-attempt: queued again');
        if (t && (t.status === 'queued' || t.status === 'sending')) {
          await streams.publish(t.sessionId, 'turn.waiting', { why: 'worker_restarted', message: 'The service stopped while your prompt was on its way to your agent; it goes now.' }).catch(() => {});
        }
      }
      return recovered;
    },

    /**
     * Parked turns whose session's earlier turns were handed over while nobody could hand on (a process
     * died in between): queued. A sweep, now and then, in every worker. How many.
     */
    async unstick(): Promise<number> {
      return db.transaction(async (tx) => {
        const next = await turnsRepo.handOnAll(tx, 200);
        for (const t of next) await sendTurnJob(deps.queue, t.id, { tx });
        return next.length;
      });
    },

    /**
     * A turn job failed for good (the dead-letter queue: its last attempt's worker died, or its retries
     * ran out with nobody to give the turn up): a turn still to be sent is given up, said on its stream,
     * and its session's next turn goes.
     */
    async jobLost(ctx: Ctx, input: { turnId: string }): Promise<void> {
      const message = 'the turn could not be sent to the agent runtime (its last attempt did not end)';
      const t = await turnsRepo.failPendingTurn(db, input.turnId, message);
      if (!t) return;
      ctx.log.warn({ turnId: input.turnId }, 'a turn job failed for good: the turn is given up');
      const s = await repo.byId(db, t.tenantId, t.sessionId);
      await publishEnd({ id: input.turnId, ...t }, [{ type: 'session.error', properties: { error: { name: 'TurnFailed', message } } }]);
      if (s) deps.events.emit('turn.failed', { session: s, turnId: input.turnId });
      await handOn(t);
    },
  };
}
