import type { Queryable } from '../../db/database.js';

export interface TurnRow {
  id: string;
  tenantId: string;
  sessionId: string;
  userId: string;
  messageId: string;
  agent: string | null;
  parts: Array<Record<string, unknown>>;
  /** Tool switches of this turn on top of the owner's policy (false: withheld), or null. */
  tools: Record<string, boolean> | null;
  /** The model the person chose for this turn only; null: the session's. */
  model: string | null;
  status: 'queued' | 'sending' | 'sent' | 'done' | 'lost' | 'failed';
  attempts: number;
}

/** A turn's send attempt as beginAttempt reads it: what the attempt before this one left. */
export interface TurnAttempt {
  previousStatus: TurnRow['status'];
  /** The process that made the attempt before this one (processIdentity), if any. */
  previousWorker: string | null;
  /** When an attempt last passed its final check before handing the turn over (null: none did, or it failed). */
  handingAt: Date | null;
  createdAt: Date;
}

/** What a parked turn's error says while it waits for an earlier turn of its session. */
const PARKED = 'waiting for an earlier turn of its session';

/**
 * A turn still to be handed to its runtime, as the next turns of its session wait for it: queued, being
 * sent, or sent but not yet stored by the runtime (handing_at set: a runtime stores a prompt it took a
 * moment later, the first after its start a second or two), for at most HANDED_WAIT of the latter (an
 * attempt that died before it could say the runtime stored it holds nobody up for longer).
 */
const PENDING = `(status in ('queued', 'sending') or (status = 'sent' and handing_at > now() - interval '30 seconds'))`;

/** An event of a session's stream as published (its id, type and properties), kept with a turn. */
export interface StoredEvent {
  id: string;
  type: string;
  properties: Record<string, unknown>;
}

/**
 * The text a turn's answer streamed, by the runtime's assistant message and part: `{ messageId, parts:
 * [{ id, text }] }` in the order they came.
 */
export type PartialAnswer = Array<{ messageId: string; parts: Array<{ id: string; text: string }> }>;

/** The turns of sessions (agent_turns): each prompt as it is queued, handed to its runtime, answered or lost. */
export function createTurnsRepo() {
  return {
    async insertTurn(
      q: Queryable,
      t: Pick<TurnRow, 'tenantId' | 'sessionId' | 'userId' | 'messageId' | 'agent' | 'parts'> & { agentProfileId: string | null; tools?: Record<string, boolean> | null; model?: string | null },
    ): Promise<string> {
      const { rows } = await q.query<{ id: string }>(
        `insert into agent_turns (tenant_id, session_id, user_id, message_id, agent, agent_profile_id, parts, tools, model) values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
        [t.tenantId, t.sessionId, t.userId, t.messageId, t.agent, t.agentProfileId, JSON.stringify(t.parts), t.tools ? JSON.stringify(t.tools) : null, t.model ?? null],
      );
      return rows[0].id;
    },

    /** A turn's runtime message id and how its sending went. */
    async turn(q: Queryable, tenantId: string, turnId: string): Promise<{ messageId: string; status: string; error: string | null } | null> {
      const { rows } = await q.query<{ messageId: string; status: string; error: string | null }>(
        `select message_id as "messageId", status, error from agent_turns where id = $1 and tenant_id = $2`,
        [turnId, tenantId],
      );
      return rows[0] ?? null;
    },

    /**
     * Marks an attempt at sending a turn, made by the process `worker` (processIdentity); returns the turn
     * as it was before, with the attempt counted, and who made the attempt before this one. By the turn's
     * id alone: the agent-turn job carries only that id, and this is where its tenant is read.
     */
    async beginAttempt(q: Queryable, turnId: string, worker: string): Promise<(TurnRow & TurnAttempt) | null> {
      const { rows } = await q.query<TurnRow & TurnAttempt>(
        `update agent_turns t set attempts = t.attempts + 1, status = case when t.status = 'queued' then 'sending' else t.status end,
                attempt_worker = $2, parked_at = null
           from agent_turns old where old.id = t.id and t.id = $1
         returning t.id, t.tenant_id as "tenantId", t.session_id as "sessionId", t.user_id as "userId", t.message_id as "messageId",
                   t.agent, t.parts, t.tools, t.model, t.status, t.attempts, old.status as "previousStatus", old.attempt_worker as "previousWorker",
                   t.handing_at as "handingAt", t.created_at as "createdAt"`,
        [turnId, worker],
      );
      return rows[0] ?? null;
    },

    /**
     * The last check before attempt `attempt` hands the turn to its runtime: true (and the moment noted)
     * only while that attempt is still the turn's latest and the turn is still being sent. An attempt a
     * newer one overtook (its worker was taken for dead, its job expired) stops here instead of sending.
     */
    async claimHandOver(q: Queryable, tenantId: string, turnId: string, attempt: number): Promise<boolean> {
      const { rows } = await q.query(`update agent_turns set handing_at = now() where id = $1 and tenant_id = $2 and attempts = $3 and status = 'sending' returning id`, [turnId, tenantId, attempt]);
      return rows.length > 0;
    },

    /** The runtime has stored the turn's prompt: the session's next turns need not wait for it any longer. */
    async handedOver(q: Queryable, tenantId: string, turnId: string): Promise<void> {
      await q.query(`update agent_turns set handing_at = null where id = $1 and tenant_id = $2`, [turnId, tenantId]);
    },

    /** Attempt `attempt` failed after its last check: its request is over, whatever the runtime made of it. */
    async handOverFailed(q: Queryable, tenantId: string, turnId: string, attempt: number): Promise<void> {
      await q.query(`update agent_turns set handing_at = null where id = $1 and tenant_id = $2 and attempts = $3`, [turnId, tenantId, attempt]);
    },

    /** Whether a turn of the same session accepted before this one is still to be handed to the runtime. */
    async earlierPending(q: Queryable, t: Pick<TurnRow, 'tenantId' | 'sessionId' | 'messageId'> & { createdAt: Date }): Promise<boolean> {
      const { rows } = await q.query(
        `select 1 from agent_turns where tenant_id = $1 and session_id = $2 and ${PENDING} and (created_at, message_id) < ($3::timestamptz, $4::text) limit 1`,
        [t.tenantId, t.sessionId, t.createdAt, t.messageId],
      );
      return rows.length > 0;
    },

    /**
     * Parks a turn behind an earlier one of its session: queued without a job (and without using up an
     * attempt) until that one is handed over (handOn). Returns whether it was parked already (so the
     * stream is told once).
     */
    async parkTurn(q: Queryable, tenantId: string, turnId: string): Promise<boolean> {
      const { rows } = await q.query<{ waited: boolean }>(
        `update agent_turns t set status = 'queued', attempts = greatest(t.attempts - 1, 0), parked_at = now(), error = '${PARKED}'
           from agent_turns old where old.id = t.id and t.id = $1 and t.tenant_id = $2 and t.status in ('queued', 'sending')
         returning old.error is not distinct from '${PARKED}' as waited`,
        [turnId, tenantId],
      );
      // Not parked: withdrawn meanwhile (sessions.service withdraw); nothing to tell.
      return rows[0]?.waited ?? true;
    },

    /**
     * The session's next turn to send, when it is parked: unparked (once, whoever asks at the same time)
     * and returned, so the caller queues its job. Null when the session's earliest turn still to be sent
     * is not parked (it has a job, or is being sent) or there is none.
     */
    async handOn(q: Queryable, tenantId: string, sessionId: string): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `update agent_turns set parked_at = null, error = null
          where id = (select id from agent_turns where tenant_id = $1 and session_id = $2 and ${PENDING} order by created_at, message_id limit 1)
            and parked_at is not null
          returning id`,
        [tenantId, sessionId],
      );
      return rows[0]?.id ?? null;
    },

    /**
     * handOn for every session whose next turn to send is parked (maintenance across tenants: a parked
     * turn whose earlier one ended while no process could hand on, e.g. one that died in between).
     */
    async handOnAll(q: Queryable, limit: number): Promise<Array<{ id: string; tenantId: string; sessionId: string }>> {
      const { rows } = await q.query<{ id: string; tenantId: string; sessionId: string }>(
        `update agent_turns set parked_at = null, error = null
          where id in (select id from (select distinct on (session_id) id, parked_at from agent_turns where ${PENDING} order by session_id, created_at, message_id) next
                        where next.parked_at is not null limit $1)
            and parked_at is not null
          returning id, tenant_id as "tenantId", session_id as "sessionId"`,
        [limit],
      );
      return rows;
    },

    /** Of these turns, who makes (or made) each one's latest attempt, and where it stands (by id alone: job data names only the turn). */
    async attemptsOf(q: Queryable, turnIds: string[]): Promise<Array<{ id: string; tenantId: string; sessionId: string; status: TurnRow['status']; attemptWorker: string | null }>> {
      if (!turnIds.length) return [];
      const { rows } = await q.query<{ id: string; tenantId: string; sessionId: string; status: TurnRow['status']; attemptWorker: string | null }>(
        `select id, tenant_id as "tenantId", session_id as "sessionId", status, attempt_worker as "attemptWorker" from agent_turns where id = any($1::uuid[])`,
        [turnIds],
      );
      return rows;
    },

    /**
     * Puts a turn back in the queue without using up an attempt (it waits for a free runtime, or for an
     * earlier attempt that may still be handing it over). Returns whether it was already waiting for the
     * same reason (so the stream is told once).
     */
    async waitTurn(q: Queryable, tenantId: string, turnId: string, why = 'waiting for a free runtime'): Promise<boolean> {
      const { rows } = await q.query<{ waited: boolean }>(
        `update agent_turns t set status = 'queued', attempts = greatest(t.attempts - 1, 0), error = $3
           from agent_turns old where old.id = t.id and t.id = $1 and t.tenant_id = $2 and t.status in ('queued', 'sending')
         returning old.error is not distinct from $3 as waited`,
        [turnId, tenantId, why],
      );
      // Not put back: withdrawn meanwhile (sessions.service withdraw); its next job finds it ended.
      return rows[0]?.waited ?? true;
    },

    /** A turn whose job failed for good (its last attempt's worker died): failed, if it was still to be sent. */
    async failPendingTurn(q: Queryable, turnId: string, error: string): Promise<{ tenantId: string; sessionId: string } | null> {
      const { rows } = await q.query<{ tenantId: string; sessionId: string }>(
        `update agent_turns set status = 'failed', error = $2, parked_at = null where id = $1 and status in ('queued', 'sending')
         returning tenant_id as "tenantId", session_id as "sessionId"`,
        [turnId, error],
      );
      return rows[0] ?? null;
    },

    /**
     * Withdraws a turn of this session before it reaches the runtime: failed with `error`, only while it is
     * queued (or being prepared to send) and no attempt has passed its last check (handing_at, set by
     * claimHandOver in the same row, so a withdrawal and a hand-over cannot both win). False otherwise.
     */
    async withdrawTurn(q: Queryable, tenantId: string, sessionId: string, turnId: string, error: string): Promise<boolean> {
      const { rows } = await q.query(
        `update agent_turns set status = 'failed', error = $4, parked_at = null
          where id = $1 and tenant_id = $2 and session_id = $3 and status in ('queued', 'sending') and handing_at is null returning id`,
        [turnId, tenantId, sessionId, error],
      );
      return rows.length > 0;
    },

    /**
     * The turns the runtime holds behind `turnId` (handed over after it, not ended) are taken back into the
     * queue, parked, with their attempts reset: the runtime drops them when the running turn is stopped, and
     * they go again (the same message id: the runtime's copy is overwritten, not doubled) once it has. How many.
     */
    async takeBackLaterTurns(q: Queryable, tenantId: string, sessionId: string, turnId: string): Promise<number> {
      const { rowCount } = await q.query(
        `update agent_turns t set status = 'queued', attempts = 0, handing_at = null, parked_at = now(), error = '${PARKED}', sent_at = null
           from agent_turns r where r.id = $3 and r.tenant_id = $1
            and t.tenant_id = $1 and t.session_id = $2 and t.status = 'sent' and t.id <> r.id and (t.created_at, t.message_id) > (r.created_at, r.message_id)`,
        [tenantId, sessionId, turnId],
      );
      return rowCount ?? 0;
    },

    /** One turn of this session, as a withdrawal or a stop reads it (null: not this session's). */
    async turnOf(q: Queryable, tenantId: string, sessionId: string, turnId: string): Promise<{ id: string; status: TurnRow['status']; error: string | null; handing: boolean } | null> {
      const { rows } = await q.query<{ id: string; status: TurnRow['status']; error: string | null; handing: boolean }>(
        `select id, status, error, handing_at is not null as handing from agent_turns where id = $1 and tenant_id = $2 and session_id = $3`,
        [turnId, tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /**
     * The session's turn a stop is about: its earliest turn handed to the runtime and not ended ('sent': the
     * one running, the runtime holds later ones behind it), else
     * its earliest still to be sent (queued or being sent), with whether an attempt is handing it over now.
     */
    async currentTurn(q: Queryable, tenantId: string, sessionId: string): Promise<{ id: string; status: TurnRow['status']; handing: boolean } | null> {
      const { rows } = await q.query<{ id: string; status: TurnRow['status']; handing: boolean }>(
        `select id, status, handing from (
           (select 0 as rank, id, status, handing_at is not null as handing from agent_turns where tenant_id = $1 and session_id = $2 and status = 'sent' order by created_at, message_id limit 1)
           union all
           (select 1 as rank, id, status, handing_at is not null as handing from agent_turns where tenant_id = $1 and session_id = $2 and status in ('queued', 'sending') order by created_at, message_id limit 1)
         ) t order by rank limit 1`,
        [tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /** How a turn ended on its session's stream (the events as published): replayed to clients that missed them. */
    async recordEndEvents(q: Queryable, tenantId: string, turnId: string, events: StoredEvent[]): Promise<void> {
      await q.query(`update agent_turns set end_events = $3 where id = $1 and tenant_id = $2`, [turnId, tenantId, JSON.stringify(events)]);
    },

    /**
     * The stored ends of the session's recent turns (those of the last six hours, at most 50 turns), oldest
     * first: what a client resuming with an older Last-Event-ID may have missed on a serve restarted since.
     */
    async recentEndEvents(q: Queryable, tenantId: string, sessionId: string): Promise<StoredEvent[]> {
      const { rows } = await q.query<{ events: StoredEvent[] }>(
        `select end_events as events from agent_turns
          where tenant_id = $1 and session_id = $2 and end_events is not null and coalesce(sent_at, created_at) > now() - interval '6 hours'
          order by created_at desc limit 50`,
        [tenantId, sessionId],
      );
      return rows.reverse().flatMap((r) => (Array.isArray(r.events) ? r.events : []));
    },

    /**
     * Saves the text an answer to the turn whose prompt is `messageId` has streamed so far (what the person
     * saw): kept for a turn lost mid-answer, whose runtime never stored it. Only a turn of that session
     * and user (the runtime's events name the prompt; a runtime speaks for its own user's sessions), and
     * only while it is in flight or lost (an ended turn's answer is the runtime's). False when there is no
     * such turn.
     */
    async savePartial(q: Queryable, t: { tenantId: string; userId: string; sessionId: string; messageId: string }, partial: PartialAnswer): Promise<boolean> {
      const { rowCount } = await q.query(
        `update agent_turns set partial = $5 where tenant_id = $1 and user_id = $2 and session_id = $3 and message_id = $4 and status in ('sending', 'sent', 'lost')`,
        [t.tenantId, t.userId, t.sessionId, t.messageId, JSON.stringify(partial)],
      );
      return (rowCount ?? 0) > 0;
    },

    /**
     * The session's turns in flight have ended (its runtime reported it idle), with `end` the event that
     * said so on the stream: recorded with them (replayed to clients that missed it); their partial answers
     * are the runtime's own now.
     */
    async endTurns(q: Queryable, tenantId: string, sessionId: string, end?: StoredEvent): Promise<void> {
      await q.query(`update agent_turns set status = 'done', partial = null, end_events = coalesce($3::jsonb, end_events) where tenant_id = $1 and session_id = $2 and status = 'sent'`, [
        tenantId,
        sessionId,
        end ? JSON.stringify([end]) : null,
      ]);
    },

    /**
     * The user's turns in flight (handed to their runtime, not ended) are lost: marked so and returned,
     * each to exactly one caller. Only recent ones: a turn sent hours ago whose end went unseen is not news.
     */
    async loseTurns(q: Queryable, tenantId: string, userId: string, error: string, sentBefore: Date | null = null): Promise<Array<{ id: string; sessionId: string }>> {
      return (
        await q.query<{ id: string; sessionId: string }>(
          `update agent_turns set status = 'lost', error = $3
            where tenant_id = $1 and status = 'sent' and sent_at > now() - interval '6 hours'
              and ($4::timestamptz is null or sent_at <= $4)
              and session_id in (select id from agent_sessions where tenant_id = $1 and owner_id = $2)
           returning id, session_id as "sessionId"`,
          [tenantId, userId, error, sentBefore],
        )
      ).rows;
    },

    /**
     * Sessions of the user with a turn in flight now, or handed over in the last two minutes (a turn whose
     * tool was killed may have ended just before the host read why): their streams hear what befalls the runtime.
     */
    async inFlightSessions(q: Queryable, tenantId: string, userId: string): Promise<string[]> {
      const { rows } = await q.query<{ id: string }>(
        `select distinct t.session_id as id from agent_turns t
          where t.tenant_id = $1
            and ((t.status = 'sent' and t.sent_at > now() - interval '6 hours') or t.sent_at > now() - interval '2 minutes')
            and t.session_id in (select id from agent_sessions where tenant_id = $1 and owner_id = $2)`,
        [tenantId, userId],
      );
      return rows.map((r) => r.id);
    },

    /**
     * The user's turns in flight whose end went unseen, though their runtime stopped idle by its own
     * account (no session running): they had ended. Not news, so nobody is told.
     */
    async endUserTurns(q: Queryable, tenantId: string, userId: string): Promise<number> {
      const { rowCount } = await q.query(
        `update agent_turns set status = 'done'
          where tenant_id = $1 and status = 'sent'
            and session_id in (select id from agent_sessions where tenant_id = $1 and owner_id = $2)`,
        [tenantId, userId],
      );
      return rowCount ?? 0;
    },

    /**
     * The user's turns not yet sent (queued, or waiting for a runtime) fail with `error`: their person was
     * deactivated. Returned with their sessions, so each session is told. A turn being sent right now
     * ('sending') is left to its attempt, which checks the person again.
     */
    async failQueuedTurnsOfUser(q: Queryable, tenantId: string, userId: string, error: string): Promise<Array<{ id: string; sessionId: string }>> {
      return (
        await q.query<{ id: string; sessionId: string }>(
          `update agent_turns set status = 'failed', error = $3
            where tenant_id = $1 and status = 'queued'
              and session_id in (select id from agent_sessions where tenant_id = $1 and owner_id = $2)
           returning id, session_id as "sessionId"`,
          [tenantId, userId, error],
        )
      ).rows;
    },

    /**
     * Turns in flight whose owner has no runtime recorded anywhere (its host died before it could say
     * so, or saying so failed): lost, marked so and returned, each to exactly one caller. Across tenants:
     * a serve starting checks what serves before it left behind.
     */
    async loseOrphanedTurns(q: Queryable, error: string): Promise<Array<{ id: string; sessionId: string; tenantId: string; ownerId: string }>> {
      return (
        await q.query<{ id: string; sessionId: string; tenantId: string; ownerId: string }>(
          `update agent_turns t set status = 'lost', error = $1
             from agent_sessions s
            where s.id = t.session_id and s.tenant_id = t.tenant_id
              and t.status = 'sent' and t.sent_at > now() - interval '6 hours'
              and not exists (select 1 from agent_runtimes r where r.user_id = s.owner_id)
           returning t.id, t.session_id as "sessionId", t.tenant_id as "tenantId", s.owner_id as "ownerId"`,
          [error],
        )
      ).rows;
    },

    /** One turn handed over whose runtime went away before it ended: lost. False when it was not in flight. */
    async loseTurn(q: Queryable, tenantId: string, turnId: string, error: string): Promise<boolean> {
      const { rows } = await q.query(`update agent_turns set status = 'lost', error = $3, sent_at = coalesce(sent_at, now()) where id = $1 and tenant_id = $2 and status in ('sending', 'sent') returning id`, [
        turnId,
        tenantId,
        error,
      ]);
      return rows.length > 0;
    },

    /**
     * The session's turns lost with their runtime (recent ones, oldest first), with what their answers had
     * streamed when they were cut: what its transcript must say.
     */
    async lostTurns(q: Queryable, tenantId: string, sessionId: string): Promise<Array<{ id: string; messageId: string; error: string; sentAt: Date; partial: PartialAnswer | null }>> {
      const { rows } = await q.query<{ id: string; messageId: string; error: string; sentAt: Date; partial: PartialAnswer | null }>(
        `select id, message_id as "messageId", coalesce(error, '') as error, coalesce(sent_at, created_at) as "sentAt", partial from agent_turns
          where tenant_id = $1 and session_id = $2 and status = 'lost' order by created_at desc limit 50`,
        [tenantId, sessionId],
      );
      return rows.reverse();
    },

    /** How a turn ended, where it ended badly (lost with its runtime, or given up): what a chat reply says. */
    async failedTurn(q: Queryable, tenantId: string, sessionId: string, turnId: string): Promise<{ status: 'lost' | 'failed'; error: string | null } | null> {
      const { rows } = await q.query<{ status: 'lost' | 'failed'; error: string | null }>(
        `select status, error from agent_turns where id = $1 and tenant_id = $2 and session_id = $3 and status in ('lost', 'failed')`,
        [turnId, tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /**
     * Records how a send attempt ended: 'sent' (handed to the runtime, its end still to come), 'done'
     * (it had ended by the time we looked), 'failed' (given up).
     */
    async finishTurn(q: Queryable, tenantId: string, turnId: string, status: 'sent' | 'done' | 'failed', error?: string): Promise<void> {
      await q.query(`update agent_turns set status = $3, error = $4, sent_at = case when $3 in ('sent', 'done') then coalesce(sent_at, now()) else sent_at end where id = $1 and tenant_id = $2`, [
        turnId,
        tenantId,
        status,
        error ?? null,
      ]);
    },

    /**
     * USD the session's latest turn has cost so far (model calls recorded since that turn was accepted).
     * Two statements on purpose: with the turn's start known, the sum reads the session's few records
     * since then by index (usage_records_session_idx); as one statement the start was a value unknown
     * to the planner, which then scanned every record of the tenant (~4 ms at 40,000, before every call).
     */
    async turnSpent(q: Queryable, tenantId: string, sessionId: string): Promise<number> {
      const turn = await q.query<{ since: Date | null }>(`select max(created_at) as since from agent_turns where session_id = $2 and tenant_id = $1`, [tenantId, sessionId]);
      const { rows } = await q.query<{ spent: string | null }>(
        `select sum(cost_usd)::text as spent from usage_records where session_id = $2 and created_at >= $3 and tenant_id = $1`,
        [tenantId, sessionId, turn.rows[0]?.since ?? new Date(0)],
      );
      return Number(rows[0].spent ?? 0);
    },
  };
}

export type TurnsRepo = ReturnType<typeof createTurnsRepo>;
