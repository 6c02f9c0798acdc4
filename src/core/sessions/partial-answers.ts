import type { Database } from '../../db/database.js';
import type { Logger } from '../../kernel/logger.js';
import type { SessionDomainEvent } from '../runtime/event-mapper.js';
import type { PartialAnswer, TurnsRepo } from './turns.repo.js';

/**
 * What a turn's answer has streamed so far, kept where a runtime that dies mid-answer cannot take it
 * along. opencode 1.18 streams an answer's text as deltas and stores a text part's text only when the
 * part ends, so a runtime killed (or its serve) mid-answer leaves the part empty in its own store, while
 * the person had read it on the stream. The process that follows the runtime's events (session-stream.ts)
 * feeds them here; each turn's text is saved with the turn (agent_turns.partial) at most once a
 * second while it streams, so a serve killed outright loses at most the last second of it, and at once
 * when the runtime goes away or the service stops. A turn that ends normally drops it (the runtime's
 * own message is the answer then); a lost turn's transcript shows it (sessions.service withLostTurns).
 */

/** One turn's answer as it streams: its text parts by assistant message, in the order they came. */
interface Streaming {
  tenantId: string;
  userId: string;
  sessionId: string;
  answer: PartialAnswer;
  chars: number;
  dirty: boolean;
  timer: NodeJS.Timeout | null;
  saving: Promise<void> | null;
}

/** Text kept per turn at most (an answer longer than this keeps its beginning). */
const MAX_CHARS = 200_000;
/**
 * Turns followed per user at most: a user's runtime runs a few at once (plans); the agent can drive its
 * runtime's API and so make up answers to prompts that do not exist, which must not grow this without end.
 */
const MAX_TURNS_PER_USER = 8;
/** Messages and parts remembered at most (a bound against a runtime that invents endless ids). */
const MAX_TRACKED = 20_000;

export function createPartialAnswers(deps: { db: Database; repo: Pick<TurnsRepo, 'savePartial'>; log: Logger; everyMs?: number }) {
  const log = deps.log;
  const everyMs = deps.everyMs ?? 1000;
  /** By the turn's prompt (the user message the answer's messages name as parent). */
  const turns = new Map<string, Streaming>();
  /** Assistant message -> the prompt it answers. */
  const parentOf = new Map<string, string>();
  /** Text parts seen (deltas of other parts, reasoning, are not the answer). */
  const textParts = new Set<string>();
  /** Prompts whose answers are not followed: no turn of the session and user has them. */
  const ignored = new Set<string>();

  function save(key: string, t: Streaming): Promise<void> {
    if (t.timer) clearTimeout(t.timer);
    t.timer = null;
    if (!t.dirty) return t.saving ?? Promise.resolve();
    t.dirty = false;
    const copy = t.answer.map((m) => ({ messageId: m.messageId, parts: m.parts.map((p) => ({ ...p })) }));
    const previous = t.saving ?? Promise.resolve();
    // One save at a time per turn, in order: a slow one is never overtaken by an older copy.
    t.saving = previous
      .then(async () => {
        if (await deps.repo.savePartial(deps.db, { tenantId: t.tenantId, userId: t.userId, sessionId: t.sessionId, messageId: key }, copy)) return;
        // No such turn of this session and user (a prompt id the runtime made up): not followed any longer.
        if (t.timer) clearTimeout(t.timer);
        turns.delete(key);
        if (ignored.size >= MAX_TRACKED) ignored.clear();
        ignored.add(key);
      })
      .catch((err) => log.warn({ err: (err as Error).message }, 'could not save a streaming answer'));
    return t.saving;
  }

  function schedule(key: string, t: Streaming): void {
    t.dirty = true;
    if (!t.timer) {
      t.timer = setTimeout(() => void save(key, t), everyMs);
      t.timer.unref();
    }
  }

  function streamingOf(ref: { tenantId: string; ownerId: string; id: string }, messageId: string): [string, Streaming] | null {
    const key = parentOf.get(messageId);
    if (!key || ignored.has(key)) return null;
    let t = turns.get(key);
    if (!t) {
      if (turns.size >= MAX_TRACKED || [...turns.values()].filter((x) => x.userId === ref.ownerId).length >= MAX_TURNS_PER_USER) return null;
      turns.set(key, (t = { tenantId: ref.tenantId, userId: ref.ownerId, sessionId: ref.id, answer: [], chars: 0, dirty: false, timer: null, saving: null }));
    }
    // Another session's prompt id: not this session's answer.
    return t.sessionId === ref.id ? [key, t] : null;
  }

  function partOf(t: Streaming, messageId: string, partId: string): { id: string; text: string } {
    let m = t.answer.find((x) => x.messageId === messageId);
    if (!m) t.answer.push((m = { messageId, parts: [] }));
    let p = m.parts.find((x) => x.id === partId);
    if (!p) m.parts.push((p = { id: partId, text: '' }));
    return p;
  }

  /** Forgets a session's turns (its turn ended: the runtime has the answer). */
  function forgetSession(sessionId: string): void {
    for (const [key, t] of turns) {
      if (t.sessionId !== sessionId) continue;
      if (t.timer) clearTimeout(t.timer);
      turns.delete(key);
    }
  }

  return {
    /** One event of a runtime, of a session its own user owns (`ref`), as the session stream handles it. */
    seen(ref: { tenantId: string; ownerId: string; id: string }, ev: SessionDomainEvent): void {
      if (ev.kind === 'assistantMessage') {
        if (ev.parentId && !parentOf.has(ev.messageId)) {
          if (parentOf.size >= MAX_TRACKED) parentOf.clear();
          parentOf.set(ev.messageId, ev.parentId);
        }
        return;
      }
      if (ev.kind === 'turnIdle') return forgetSession(ref.id);
      if (ev.kind !== 'textPart' && ev.kind !== 'textDelta') return;
      if (ev.kind === 'textPart') {
        if (textParts.size >= MAX_TRACKED) textParts.clear();
        textParts.add(ev.partId);
      } else if (!textParts.has(ev.partId)) return;
      const found = streamingOf(ref, ev.messageId);
      if (!found) return;
      const [key, t] = found;
      const p = partOf(t, ev.messageId, ev.partId);
      const before = p.text.length;
      // A part update carries the whole text so far; a delta the next piece of it.
      const next = ev.kind === 'textPart' ? (ev.text.length >= p.text.length ? ev.text : p.text) : p.text + ev.delta;
      p.text = next.slice(0, Math.max(before, MAX_CHARS - (t.chars - before)));
      t.chars += p.text.length - before;
      if (p.text.length !== before) schedule(key, t);
    },

    /** Saves now what the turns of this user's runtime streamed (it went away: its answers end here). */
    async flushUser(userId: string): Promise<void> {
      await Promise.all([...turns].filter(([, t]) => t.userId === userId).map(([key, t]) => save(key, t)));
    },

    /** Saves now everything still streaming (the service stops), and forgets it. */
    async flushAll(): Promise<void> {
      await Promise.all([...turns].map(([key, t]) => save(key, t)));
      turns.clear();
    },

    get tracked(): number {
      return turns.size;
    },
  };
}
