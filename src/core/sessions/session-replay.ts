import { sseFrame } from '../../lib/sse-frame.js';

/** Each session keeps its last REPLAY_EVENTS events, so a client reconnecting with Last-Event-ID gets what it missed... */
const REPLAY_EVENTS = 500;
/** ...and at most this many bytes of them (tool outputs can be large); the older ones go first. */
const REPLAY_BYTES = 512 * 1024;
/** A subscriber that cannot keep up (this much unsent) is dropped; it may reconnect with Last-Event-ID. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Buffers of sessions nobody watches are dropped after this long without events. */
const IDLE_BUFFER_MS = 15 * 60_000;
/**
 * A client reconnecting with an id this serve has not had yet (read from another serve that is ahead of
 * this one on the bus) gets nothing until that event arrives here, then what follows it; if it does not
 * come within this long, what came meanwhile after it by id (as for an id no longer buffered).
 */
const IN_FLIGHT_WAIT_MS = 5000;
/** An event whose id was stamped further than this from now cannot still be on its way over the bus. */
const IN_FLIGHT_AGE_MS = 10_000;

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

interface SessionState {
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

/**
 * The subscribers of each session's stream in this process and the replay buffer of its recent events
 * (ids are the runtime's own ascending event ids): delivery to the subscribers, replay after a
 * Last-Event-ID, and the wait for an event still on its way over the bus (`crossProcess`: several serves).
 */
export function createSessionReplay(o: { crossProcess: boolean }) {
  const sessions = new Map<string, SessionState>();
  let subscriberCount = 0;

  const state = (id: string): SessionState => {
    let s = sessions.get(id);
    if (!s) sessions.set(id, (s = { buffer: [], bufferBytes: 0, subscribers: new Set(), lastEventAt: Date.now() }));
    return s;
  };

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
    if (!o.crossProcess) return false;
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

  return {
    /** The session's buffer and subscribers, made on first use. */
    state,
    deliver,

    /**
     * Adds a subscriber to a session (ownership is checked by the caller). With `lastEventId`, first
     * replays the buffered events after it (or, when that event is still on its way here, starts after it
     * once it comes). Returns the function that removes the subscriber.
     */
    subscribe(sessionId: string, out: Subscriber, lastEventId?: string, stored: StreamEvent[] = [], so: { recheck?: () => Promise<boolean>; viewer?: boolean } = {}): () => void {
      const s = state(sessionId);
      const sub: Sub = { out, awaiting: null, replayed: null, recheck: so.recheck ?? null, viewer: so.viewer ?? false };
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
     * Asks the session's followers (its viewers only, with `viewersOnly`) whether they may still read it;
     * one who may no longer is sent `gone()` and dropped.
     */
    async recheck(sessionId: string, gone: () => string, ro: { viewersOnly?: boolean } = {}): Promise<void> {
      const s = sessions.get(sessionId);
      if (!s) return;
      await Promise.all(
        [...s.subscribers].filter((sub) => sub.recheck && (!ro.viewersOnly || sub.viewer)).map(async (sub) => {
          const still = await sub.recheck!().catch(() => false);
          if (still || !s.subscribers.has(sub)) return;
          sub.out.write(gone());
          drop(s, sub);
        }),
      );
    },

    /** The sessions followed here by another person (a share), whose access is checked again now and then. */
    sessionsWithViewers(): string[] {
      return [...sessions].filter(([, s]) => [...s.subscribers].some((sub) => sub.viewer)).map(([id]) => id);
    },

    /** Writes a frame to every subscriber of every session (the heartbeat). */
    writeAll(frame: string): void {
      for (const s of sessions.values()) for (const sub of s.subscribers) sub.out.write(frame);
    },

    /** Ends a deleted session's streams and forgets it. */
    closeSession(sessionId: string): void {
      const s = sessions.get(sessionId);
      if (!s) return;
      for (const sub of [...s.subscribers]) drop(s, sub);
      sessions.delete(sessionId);
    },

    /** Forgets the buffers of sessions nobody watches that have been quiet for IDLE_BUFFER_MS. */
    sweepIdle(now: number): void {
      for (const [id, s] of sessions) {
        if (s.subscribers.size === 0 && now - s.lastEventAt > IDLE_BUFFER_MS) sessions.delete(id);
      }
    },

    /** Ends every stream (shutdown). */
    dropAll(): void {
      for (const s of sessions.values()) for (const sub of [...s.subscribers]) drop(s, sub);
    },

    get stats() {
      return { sessions: sessions.size, subscribers: subscriberCount };
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
