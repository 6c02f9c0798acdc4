import type { Tx } from '../../db/database.js';
import type { Logger } from '../../kernel/logger.js';
import type { SessionRow } from './sessions.repo.js';
import type { StoredEvent } from './turns.repo.js';

/**
 * What happens to turns and sessions, as the capabilities that follow them need to hear it: the plan
 * runner (a step's turn ended, a child session moved, a turn no longer wanted), learned skills (a turn
 * to record, a skill loaded, a session deleted) and the chat gateways (an answer to send back). The
 * sessions capability says what happened here; the others subscribe in the composition root. Nothing
 * here knows who listens, so the sessions code imports none of them (and they may import it: no circle).
 *
 * In-process only: each process hears what it produces (the cross-process parts are the jobs the
 * listeners queue). Two kinds: `emit` tells and goes on (a listener's failure is logged, never the
 * emitter's); `within` runs every listener inside the emitter's transaction and waits for them, so what
 * they write commits or rolls back with the cause.
 */
export interface TurnEventMap {
  /** A turn's answer is complete (the runtime went idle after it). */
  'turn.ended': { session: { id: string; tenantId: string; planId: string | null }; eventId: string; end?: StoredEvent };
  /** A chat user's (not a web user's) top-level turn ended: their answer goes back through their gateway. */
  'turn.chat_ended': { tenantId: string; sessionId: string; eventId: string };
  /** A turn ended without an answer: given up, or lost with its runtime. */
  'turn.failed': { session: SessionRow; turnId: string };
  /** Something happened in a session that belongs to a plan (its child sessions' activity). */
  'session.plan_activity': { tenantId: string; sessionId: string };
}

export interface TurnTxEventMap {
  /** A session is being deleted (in this transaction). */
  'session.deleting': { tx: Tx; tenantId: string; sessionId: string };
  /** A turn loaded a learned skill (recorded in this transaction). */
  'skill.loaded': { tx: Tx; tenantId: string; sessionId: string; name: string; callId: string };
}

/** Before a turn is sent: a listener that says why it is no longer wanted stops it (e.g. its plan was cancelled). */
export type TurnVeto = (s: SessionRow, turnId: string) => Promise<string | null>;

export function createTurnEvents(log: Logger) {
  const listeners = new Map<string, Array<(payload: never) => unknown>>();
  const vetoes: TurnVeto[] = [];
  const of = (name: string) => listeners.get(name) ?? [];
  return {
    on<K extends keyof TurnEventMap | keyof TurnTxEventMap>(name: K, fn: (payload: K extends keyof TurnEventMap ? TurnEventMap[K] : K extends keyof TurnTxEventMap ? TurnTxEventMap[K] : never) => unknown): void {
      listeners.set(name, [...of(name), fn as (payload: never) => unknown]);
    },
    emit<K extends keyof TurnEventMap>(name: K, payload: TurnEventMap[K]): void {
      for (const fn of of(name)) {
        try {
          void Promise.resolve((fn as (p: TurnEventMap[K]) => unknown)(payload)).catch((err) => log.error({ err: (err as Error).message, event: name }, 'a turn event listener failed'));
        } catch (err) {
          log.error({ err: (err as Error).message, event: name }, 'a turn event listener failed');
        }
      }
    },
    async within<K extends keyof TurnTxEventMap>(name: K, payload: TurnTxEventMap[K]): Promise<void> {
      for (const fn of of(name)) await (fn as (p: TurnTxEventMap[K]) => unknown)(payload);
    },
    veto(fn: TurnVeto): void {
      vetoes.push(fn);
    },
    /** The first reason a listener gives not to send the turn; null: send it. */
    async unwanted(s: SessionRow, turnId: string): Promise<string | null> {
      for (const v of vetoes) {
        const why = await v(s, turnId);
        if (why) return why;
      }
      return null;
    },
  };
}

export type TurnEvents = ReturnType<typeof createTurnEvents>;
