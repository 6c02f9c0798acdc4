import type { Database, Tx } from '../../db/database.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { RuntimeMessage } from '../runtime/runtime-client.js';
import type { RuntimePool } from '../runtime/runtime-pool.js';
import { ascendingId } from '../runtime/runtime-ids.js';
import type { SessionRow, SessionsRepo } from './sessions.repo.js';
import type { TurnRow, TurnsRepo } from './turns.repo.js';

/**
 * Turns of a session as other capabilities start and read them: a person's prompt (sessions), a plan's
 * planning, subtask and synthesis turns (orchestrator), a turn waiting for a free runtime (the turn
 * runner). One place for how a turn is queued and how an answer reads, so they cannot drift apart.
 */

export const AGENT_TURN_JOB = 'agent-turn';
/** Where a turn job goes once it has failed for good (the turn runner gives its turn up: jobLost). */
export const AGENT_TURN_LOST_JOB = 'agent-turn-lost';
/** How often a turn is attempted before it is given up (and reported on the session's stream). */
export const TURN_ATTEMPTS = 4;
/**
 * A turn job still active after this long is taken to have lost its worker and is retried. It must
 * exceed the longest a live attempt can take (a cold start of the user's runtime, at most 30 s to
 * listen and 30 s to answer; then runtime calls of at most 10 s each, four of them). An
 * attempt a newer one overtook stops at its last check (turn-runner.ts claimHandOver), and the jobs of
 * a worker that died on this host are taken back at once (recoverOrphans): this expiry is what is left
 * for a worker on another machine or in another container.
 */
const TURN_EXPIRE_S = 120;

/** Queues the agent-turn job of a turn (in `tx` when given: the turn and its job commit together). */
export function sendTurnJob(queue: JobQueue, turnId: string, options: { tx?: Tx; singletonKey?: string; startAfterSeconds?: number } = {}): Promise<string> {
  return queue.send(AGENT_TURN_JOB, { turnId }, { ...options, retryLimit: TURN_ATTEMPTS - 1, retryDelay: 1, expireInSeconds: TURN_EXPIRE_S, deadLetter: AGENT_TURN_LOST_JOB });
}

/**
 * A new turn in a session, queued in the caller's transaction (the turn runner sends it once): the
 * turn's row, the session touched, its job. Returns both ids.
 */
export async function queueTurn(
  tx: Tx,
  deps: { repo: Pick<SessionsRepo, 'touch'>; turnsRepo: Pick<TurnsRepo, 'insertTurn'>; queue: JobQueue },
  turn: Pick<TurnRow, 'tenantId' | 'sessionId' | 'userId' | 'messageId' | 'agent' | 'parts'> & { agentProfileId: string | null; tools?: Record<string, boolean> | null; model?: string | null },
  options: { singletonKey?: string } = {},
): Promise<{ turnId: string; jobId: string }> {
  const turnId = await deps.turnsRepo.insertTurn(tx, turn);
  await deps.repo.touch(tx, turn.tenantId, turn.sessionId);
  const jobId = await sendTurnJob(deps.queue, turnId, { tx, ...options });
  return { turnId, jobId };
}

/** A turn of plain text (no files), as the system writes them: a fresh message id, one text part. */
export function textTurn(s: SessionRow, text: string, options: { agent: string; tools: Record<string, boolean> }) {
  return {
    tenantId: s.tenantId,
    sessionId: s.id,
    userId: s.ownerId,
    messageId: ascendingId('msg'),
    agent: options.agent,
    agentProfileId: null,
    parts: [{ id: ascendingId('prt'), type: 'text', text }],
    tools: options.tools,
  };
}

/** A child session of `parent`, in the same workspace and runtime (a plan's planning and subtask sessions). */
export function insertChildSession(tx: Tx, repo: Pick<SessionsRepo, 'insert'>, parent: SessionRow, child: { ownerId: string; title: string; planId: string | null }): Promise<SessionRow> {
  return repo.insert(tx, {
    tenantId: parent.tenantId,
    ownerId: child.ownerId,
    title: child.title.slice(0, 200),
    templateSlug: null,
    systemPrompt: parent.systemPrompt,
    model: parent.model,
    // A plan's turns run on the model the person chose for the session, as its own turns do.
    chosenModel: parent.chosenModel,
    snapshotAt: parent.snapshotAt,
    directory: parent.directory,
    channel: parent.channel,
    browserSession: null,
    parentId: parent.id,
    planId: child.planId,
  });
}

/** What a person reads of a runtime message: its text parts they did not have injected, joined. */
export function answerText(m: Pick<RuntimeMessage, 'parts'>): string {
  return m.parts
    .filter((p) => p.type === 'text' && !p.synthetic)
    .map((p) => String(p.text ?? ''))
    .join('\n')
    .trim();
}

/** How a turn ended: `done: false` while it has not. */
export type TurnOutcome = { done: false } | { done: true; error: string | null; text: string };

/**
 * How a turn ended, read from the runtime's transcript: the assistant messages answering its user
 * message; an error on any of them (the provider refused, the turn was aborted) or a turn the runner
 * gave up on is a failure. `done: false` while it has not ended.
 */
export async function turnOutcome(
  deps: { db: Database; turnsRepo: Pick<TurnsRepo, 'turn'>; pool: Pick<RuntimePool, 'client'> },
  s: SessionRow,
  turnId: string | null,
): Promise<TurnOutcome> {
  if (!turnId) return { done: false };
  const turn = await deps.turnsRepo.turn(deps.db, s.tenantId, turnId);
  if (!turn) return { done: true, error: 'its turn is gone', text: '' };
  if (turn.status === 'failed') return { done: true, error: turn.error ?? 'the turn could not be sent to the agent runtime', text: '' };
  if (turn.status === 'lost') return { done: true, error: turn.error ?? 'the agent runtime stopped during the turn', text: '' };
  // Handed over: in flight ('sent') or ended ('done'); the transcript says how.
  if (!s.upstreamId || (turn.status !== 'sent' && turn.status !== 'done')) return { done: false };
  const messages = await (await deps.pool.client({ tenantId: s.tenantId, userId: s.ownerId })).messages(s.upstreamId);
  const answers = messages.filter((m) => m.info.role === 'assistant' && m.info.parentID === turn.messageId);
  const failed = answers.find((m) => m.info.error);
  if (failed) {
    const e = failed.info.error as { name?: string; data?: { message?: string } };
    return { done: true, error: `${e.name ?? 'error'}: ${e.data?.message ?? 'the turn failed'}`.slice(0, 500), text: '' };
  }
  const last = answers.at(-1);
  if (!last || !last.info.time.completed) return { done: false };
  const text = answerText(last) || answers.map(answerText).filter(Boolean).join('\n\n');
  return { done: true, error: null, text };
}

/** Stops a session's running turn in the runtime; a runtime that does not run has nothing running (never started for this). */
export async function abortRunningTurn(pool: Pick<RuntimePool, 'runningClient'>, s: SessionRow | null, onError: (err: Error) => void): Promise<void> {
  if (!s?.upstreamId) return;
  try {
    await (await pool.runningClient({ tenantId: s.tenantId, userId: s.ownerId }))?.abort(s.upstreamId);
  } catch (err) {
    onError(err as Error);
  }
}
