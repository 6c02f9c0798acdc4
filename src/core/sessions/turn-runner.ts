import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Database } from '../../db/database.js';
import { withTimeout } from '../../lib/with-timeout.js';
import type { Ctx } from '../../kernel/context.js';
import { AppError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import type { RbacPermissions } from '../../kernel/permissions.js';
import type { JobQueue } from '../jobs/job-queue.js';
import { createRuntimeClient } from '../runtime/runtime-client.js';
import { type RuntimePool } from '../runtime/runtime-pool.js';
import { RuntimeBusyError } from '../runtime/host/runtime-host.js';
import type { RuntimeService } from '../runtime/runtime.service.js';
import type { MemoriesService } from '../memories/memories.service.js';
import { memoryPart, promptText, withheldTools } from './prompt-parts.js';
import type { SessionStreams } from './session-stream.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import { sendTurnJob, TURN_ATTEMPTS } from './session-turns.js';
import type { TurnEvents } from './turn-events.js';

// Where the turn job's name and limits were first defined; they live with the other pieces of a turn now.
export { AGENT_TURN_JOB, TURN_ATTEMPTS, TURN_EXPIRE_S } from './session-turns.js';

/** A turn waiting for a free runtime tries again after this long. */
const WAIT_FOR_RUNTIME_S = 3;
/** What a turn's recalled memories may take: at most this many, about this many tokens. */
export const TURN_MEMORIES = { limit: 5, maxTokens: 800 } as const;
/**
 * The longest a turn waits for its memories beyond the runtime's own preparation (recall runs alongside
 * it): a slow embedder or database costs the turn its memories, never the turn.
 */
const RECALL_WAIT_MS = 1500;

const run = promisify(execFile);

/** The code of the session.error a turn lost with its runtime ends with. */
export const TURN_LOST = 'turn_lost';
/** Why a queued turn of a person deactivated (or removed) before it ran does not run. */
export const OWNER_INACTIVE = 'Not run: the person this session belongs to was deactivated, so their agent no longer takes turns.';
/** What a person reads when their turn was lost with its runtime (`reason`: why the runtime went away). */
export const lostMessage = (reason: string) =>
  `The agent's runtime stopped during this turn (${reason}); the answer above may be cut short. Send the prompt again to retry.`;

export function createTurnRunner(deps: {
  db: Database;
  repo: Pick<SessionsRepo, 'beginAttempt' | 'byId' | 'bindUpstream' | 'rebindUpstream' | 'finishTurn' | 'waitTurn' | 'loseTurns' | 'loseTurn' | 'loseOrphanedTurns' | 'endUserTurns'>;
  runtime: Pick<RuntimeService, 'resolveModel' | 'ensureConfigured'>;
  pool: Pick<RuntimePool, 'acquire'>;
  queue: JobQueue;
  streams: Pick<SessionStreams, 'publish'>;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** Absent: turns go without memories. */
  memories?: Pick<MemoriesService, 'recallForTurn'>;
  /**
   * Where a turn given up (failed for good) or lost with its runtime is told (a plan waiting for its end
   * moves on, a chat user is told), and who may say a queued turn is no longer wanted (its plan ended).
   */
  events: Pick<TurnEvents, 'emit' | 'unwanted'>;
  /** Whether the session's owner is still active (users/active-users.ts); absent: always. */
  ownerActive?: (tenantId: string, userId: string) => Promise<boolean>;
  log: Logger;
}) {
  const { db, repo, runtime, streams } = deps;
  let gitMissing = false;

  /** In-flight preparations by directory: a user's concurrent first requests share one `git init`. */
  const preparing = new Map<string, Promise<void>>();

  /** Makes a user's workspace directory (and a git repository in it) if it is not there yet. */
  function ensureWorkspace(dir: string): Promise<void> {
    let p = preparing.get(dir);
    if (!p) {
      p = prepareWorkspace(dir).finally(() => preparing.delete(dir));
      preparing.set(dir, p);
    }
    return p;
  }

  async function prepareWorkspace(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // A git repository makes the directory the runtime's project root (without one the runtime treats
    // the whole filesystem as the worktree).
    if (!gitMissing && !existsSync(join(dir, '.git'))) {
      await run('git', ['init', '-q', dir]).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') {
          gitMissing = true;
          deps.log.warn('git is not installed: agent workspaces are not git repositories, so the runtime cannot confine its project root to them');
        } else if (!existsSync(join(dir, '.git', 'HEAD'))) throw err;
        // Otherwise another process (serve and a worker) initialised it at the same moment: it is there.
      });
    }
  }

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

  /** Tells a lost turn's session (every process's subscribers, through the bus) and who waits for the turn. */
  async function reportLost(t: { id: string; sessionId: string; tenantId: string; ownerId: string }, reason: string): Promise<void> {
    const message = lostMessage(reason);
    deps.log.warn({ turnId: t.id, sessionId: t.sessionId, userId: t.ownerId, reason }, 'a turn was lost with its runtime');
    await streams.publish(t.sessionId, 'session.error', { error: { name: 'TurnLost', code: TURN_LOST, message } }).catch((err) => deps.log.error({ err: (err as Error).message }, 'could not report a lost turn'));
    await streams.publish(t.sessionId, 'session.status', { status: { type: 'idle' } }).catch(() => {});
    const s = await repo.byId(db, t.tenantId, t.sessionId).catch(() => null);
    if (s) deps.events.emit('turn.failed', { session: s, turnId: t.id });
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
    async runtimeLost(owner: { tenantId: string; userId: string }, reason: string, o: { idle?: boolean } = {}): Promise<number> {
      if (o.idle) {
        await repo.endUserTurns(db, owner.tenantId, owner.userId);
        return 0;
      }
      const lost = await repo.loseTurns(db, owner.tenantId, owner.userId, lostMessage(reason));
      for (const t of lost) await reportLost({ ...t, tenantId: owner.tenantId, ownerId: owner.userId }, reason);
      return lost.length;
    },

    /**
     * Turns a serve that is gone left in flight with no runtime anywhere (it died before it could end
     * them, its runtimes with it): lost. Run as a serve starts hosting, after the rows of dead hosts are
     * forgotten.
     */
    async reconcile(): Promise<number> {
      const reason = 'the service hosting it stopped';
      const lost = await repo.loseOrphanedTurns(db, lostMessage(reason));
      for (const t of lost) await reportLost(t, reason);
      return lost.length;
    },

    /**
     * The agent-turn job: sends a queued turn to the session owner's runtime (started if need be)
     * exactly once. The runtime message id was chosen when the prompt was accepted, so a retry (worker
     * died after sending) finds the message upstream and stops instead of sending the turn again. When
     * every runtime of the host is busy, the turn goes back in the queue (its attempts untouched) and the
     * stream says it waits.
     */
    async runTurn(ctx: Ctx, input: { turnId: string }): Promise<void> {
      const turn = await repo.beginAttempt(db, input.turnId);
      // Handed over already (in flight, ended, or lost with its runtime), or given up: nothing to send.
      if (!turn || ['sent', 'done', 'lost', 'failed'].includes(turn.previousStatus)) return;
      const s = (await repo.byId(db, turn.tenantId, turn.sessionId))!;
      const fail = async (message: string) => {
        await repo.finishTurn(db, turn.tenantId, turn.id, 'failed', message);
        await streams.publish(s.id, 'session.error', { error: { name: 'TurnFailed', message } });
        deps.events.emit('turn.failed', { session: s, turnId: turn.id });
      };
      const unwanted = await deps.events.unwanted(s, turn.id);
      if (unwanted) {
        ctx.log.info({ turnId: turn.id, sessionId: s.id }, `turn not sent: ${unwanted}`);
        await repo.finishTurn(db, turn.tenantId, turn.id, 'failed', `not sent: ${unwanted}`);
        return;
      }
      // Deactivated or removed since the prompt was accepted: no runtime is started in their name (issue 37).
      if (deps.ownerActive && !(await deps.ownerActive(s.tenantId, s.ownerId))) return fail(OWNER_INACTIVE);
      try {
        const owner = { tenantId: s.tenantId, userId: s.ownerId };
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
          const waited = await repo.waitTurn(db, turn.tenantId, turn.id);
          await sendTurnJob(deps.queue, turn.id, { startAfterSeconds: WAIT_FOR_RUNTIME_S });
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
            if (await repo.loseTurn(db, turn.tenantId, turn.id, lostMessage(reason))) await reportLost({ id: turn.id, sessionId: s.id, tenantId: s.tenantId, ownerId: s.ownerId }, reason);
            return;
          }
          await repo.finishTurn(db, turn.tenantId, turn.id, where === 'running' ? 'sent' : 'done');
          return;
        }
        const model = await runtime.resolveModel(s.tenantId, s.model);
        const perms = await deps.permissionsOf(s.tenantId, s.ownerId);
        const injected = await withTimeout(memoriesPart, RECALL_WAIT_MS, () => {
          ctx.log.warn({ ms: RECALL_WAIT_MS }, 'recalling memories for the turn took too long: the turn goes on without them');
          return null;
        });
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
        await repo.finishTurn(db, turn.tenantId, turn.id, 'sent');
        // The runtime has the turn: it gets its tools ready (longer at its first turn) and calls the model.
        if (cold) await streams.publish(s.id, 'turn.sent', { message: 'Sent to your agent; waiting for the model…' }).catch(() => {});
      } catch (err) {
        const retryable = !(err instanceof AppError) || err.status >= 500;
        if (retryable && turn.attempts < TURN_ATTEMPTS) throw err;
        await fail((err as Error).message);
      }
    },
  };
}

export type TurnRunner = ReturnType<typeof createTurnRunner>;
