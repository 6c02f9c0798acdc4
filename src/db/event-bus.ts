import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { assertChannel, type EventBus, type EventHandler } from '../kernel/events.js';
import type { Logger } from '../kernel/logger.js';
import type { Database, Tx } from './database.js';

/** Embedded mode: every part runs in one process, so an EventEmitter is the whole bus. */
export function createInProcessBus(): EventBus {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const deliver = (channel: string, payload: unknown) => queueMicrotask(() => emitter.emit(channel, payload));
  return {
    shared: false,
    async publish(channel, payload, tx?: Tx) {
      assertChannel(channel);
      // Round-trip through JSON so subscribers see what they would see across processes.
      const copy = JSON.parse(JSON.stringify(payload ?? null));
      if (tx) tx.afterCommit(() => deliver(channel, copy));
      else deliver(channel, copy);
    },
    async subscribe(channel, handler) {
      assertChannel(channel);
      emitter.on(channel, handler);
      return async () => void emitter.off(channel, handler);
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/**
 * NOTIFY takes payloads under 8000 bytes. A larger one (a session event carrying a tool's output) is cut
 * into pieces of at most PIECE_BYTES, each marked `~<message> <index> <count> ` (JSON never starts with
 * `~`), all sent by one statement, so in one transaction. PostgreSQL appends a transaction's notifications
 * to its queue together at commit, under a lock that serialises committing notifiers, so every listener
 * gets the pieces one after another, in the same place among the other notifications, and puts the
 * message back together when the last one arrives: the order of messages is the same for every listener,
 * large or small.
 *
 * Chosen over a table of large payloads referenced by id from the notification: nothing is written but
 * the notifications, a listener needs no query (which would hold up every notification behind a large
 * one by a round trip, in every process), there is nothing to prune and no migration, and a listener
 * never finds a row already gone. The cost is the queue's: it holds the pieces until every listener has
 * read them, as it does any notification.
 */
const PIECE_BYTES = 7800;
const PIECE_MARK = '~';
/** Pieces of a message not completed within this long are dropped (their sender's transaction died half-read: cannot happen, but bound it). */
const PIECES_TTL_MS = 60_000;

/** Cuts UTF-8 text into pieces of at most `max` bytes, never inside a character. */
export function utf8Pieces(text: string, max: number): string[] {
  const buf = Buffer.from(text, 'utf8');
  const out: string[] = [];
  for (let a = 0; a < buf.length; ) {
    let b = Math.min(a + max, buf.length);
    // A continuation byte (10xxxxxx) is inside a character: cut before the character starts.
    while (b < buf.length && (buf[b] & 0xc0) === 0x80) b--;
    out.push(buf.toString('utf8', a, b));
    a = b;
  }
  return out;
}

/**
 * PostgreSQL mode: NOTIFY to publish (inside the causing transaction, so delivery follows commit), and one
 * dedicated LISTEN connection per process shared by all subscribers. The connection is re-established
 * with back-off if it drops; events sent while it was down are lost, so subscribers that must not miss
 * anything re-read state after `reconnected` (as SPEC.md's gateway stream clients do).
 */
function createPostgresBus(db: Database, log: Logger): EventBus {
  const handlers = new Map<string, Set<EventHandler>>();
  let client: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let closed = false;
  // Names this process's multi-piece messages apart from every other process's.
  const origin = randomBytes(6).toString('hex');
  let sequence = 0;

  const quote = (channel: string) => `"${channel}"`;

  const connect = (): Promise<pg.Client> => {
    if (client) return Promise.resolve(client);
    connecting ??= (async () => {
      let delay = 100;
      for (;;) {
        const c = new pg.Client(db.connection);
        // Messages in pieces, by `<channel> <message>`: per connection (one lost half-way is gone).
        const partial = new Map<string, { parts: string[]; got: number; at: number }>();
        const reassemble = (channel: string, piece: string): string | null => {
          const s1 = piece.indexOf(' ');
          const s2 = piece.indexOf(' ', s1 + 1);
          const s3 = piece.indexOf(' ', s2 + 1);
          const index = Number(piece.slice(s1 + 1, s2));
          const count = Number(piece.slice(s2 + 1, s3));
          if (s1 < 2 || s3 < 0 || !Number.isInteger(index) || !Number.isInteger(count) || index < 0 || index >= count || count > 1e6) return null;
          const key = `${channel} ${piece.slice(1, s1)}`;
          let m = partial.get(key);
          if (!m) {
            const now = Date.now();
            for (const [k, old] of partial) if (now - old.at > PIECES_TTL_MS) partial.delete(k);
            partial.set(key, (m = { parts: new Array<string>(count), got: 0, at: now }));
          }
          if (m.parts[index] === undefined) m.got++;
          m.parts[index] = piece.slice(s3 + 1);
          if (m.got < count) return null;
          partial.delete(key);
          return m.parts.join('');
        };
        try {
          await c.connect();
          c.on('notification', (msg) => {
            const set = handlers.get(msg.channel);
            if (!set) return;
            let text: string | null = msg.payload ?? '';
            if (text.startsWith(PIECE_MARK)) text = reassemble(msg.channel, text);
            if (text === null) return;
            let payload: unknown = null;
            try {
              payload = text ? JSON.parse(text) : null;
            } catch {
              log.warn({ channel: msg.channel }, 'ignored a non-JSON notification');
              return;
            }
            for (const h of set) h(payload);
          });
          c.on('error', (err) => {
            log.warn({ err: err.message }, 'event bus connection lost; reconnecting');
            client = null;
            c.end().catch(() => {});
            if (!closed && handlers.size) void connect();
          });
          for (const channel of handlers.keys()) await c.query(`listen ${quote(channel)}`);
          client = c;
          return c;
        } catch (err) {
          await c.end().catch(() => {});
          if (closed) throw err;
          log.warn({ err: (err as Error).message, retryInMs: delay }, 'event bus cannot connect; retrying');
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 5000);
        }
      }
    })().finally(() => {
      connecting = null;
    });
    return connecting;
  };

  return {
    shared: true,
    async publish(channel, payload, tx?: Tx) {
      assertChannel(channel);
      const text = JSON.stringify(payload ?? null);
      // At most 3 bytes per UTF-16 unit: most payloads need no count.
      if (text.length * 3 <= PIECE_BYTES || Buffer.byteLength(text) <= PIECE_BYTES) {
        await (tx ?? db).query('select pg_notify($1, $2)', [channel, text]);
        return;
      }
      const parts = utf8Pieces(text, PIECE_BYTES);
      const id = `${origin}.${++sequence}`;
      // One statement: one transaction (or the caller's), so the pieces reach the queue together.
      await (tx ?? db).query('select pg_notify($1, p) from unnest($2::text[]) as p', [channel, parts.map((p, i) => `${PIECE_MARK}${id} ${i} ${parts.length} ${p}`)]);
    },
    async subscribe(channel, handler) {
      assertChannel(channel);
      let set = handlers.get(channel);
      const first = !set;
      if (!set) handlers.set(channel, (set = new Set()));
      set.add(handler);
      const c = await connect();
      if (first) await c.query(`listen ${quote(channel)}`);
      return async () => {
        set!.delete(handler);
        if (set!.size === 0 && handlers.get(channel) === set) {
          handlers.delete(channel);
          await client?.query(`unlisten ${quote(channel)}`).catch(() => {});
        }
      };
    },
    async close() {
      closed = true;
      handlers.clear();
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}

export function createEventBus(db: Database, log: Logger): EventBus {
  return db.mode === 'postgres' ? createPostgresBus(db, log) : createInProcessBus();
}
