import { EventEmitter } from 'node:events';
import pg from 'pg';
import { assertChannel, type EventBus, type EventHandler } from '../core/events.js';
import type { Logger } from '../core/logger.js';
import type { Database, Tx } from './database.js';

/** Embedded mode: every part runs in one process, so an EventEmitter is the whole bus. */
export function createInProcessBus(): EventBus {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const deliver = (channel: string, payload: unknown) => queueMicrotask(() => emitter.emit(channel, payload));
  return {
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
 * PostgreSQL mode: NOTIFY to publish (inside the causing transaction, so delivery follows commit), and one
 * dedicated LISTEN connection per process shared by all subscribers. The connection is re-established
 * with back-off if it drops; events sent while it was down are lost, so subscribers that must not miss
 * anything re-read state after `reconnected` (as SPEC.md's gateway stream clients do).
 */
/** NOTIFY's payload limit is 8000 bytes; a little under it. */
const MAX_NOTIFY_BYTES = 7900;
/** The key of a notification that stands for a payload kept in bus_payloads. */
const REF = '$busPayload';

export function createPostgresBus(db: Database, log: Logger): EventBus {
  const handlers = new Map<string, Set<EventHandler>>();
  let client: pg.Client | null = null;
  let connecting: Promise<pg.Client> | null = null;
  let closed = false;
  let delivery: Promise<void> = Promise.resolve();
  let largeSent = 0;

  const quote = (channel: string) => `"${channel}"`;

  const connect = (): Promise<pg.Client> => {
    if (client) return Promise.resolve(client);
    connecting ??= (async () => {
      let delay = 100;
      for (;;) {
        const c = new pg.Client(db.connection);
        try {
          await c.connect();
          c.on('notification', (msg) => {
            if (!handlers.has(msg.channel)) return;
            let payload: unknown = null;
            try {
              payload = msg.payload ? JSON.parse(msg.payload) : null;
            } catch {
              log.warn({ channel: msg.channel }, 'ignored a non-JSON notification');
              return;
            }
            const ref = (payload as { [REF]?: unknown } | null)?.[REF];
            // Handed on in arrival order, also when one of them has to be read from its row first.
            delivery = delivery.then(async () => {
              if (typeof ref === 'string' || typeof ref === 'number') {
                const row = (await db.query<{ payload: string }>('select payload from bus_payloads where id = $1', [ref]).catch(() => null))?.rows[0];
                if (!row) return void log.warn({ channel: msg.channel }, 'a large event was gone before it was read');
                payload = JSON.parse(row.payload);
              }
              for (const h of handlers.get(msg.channel) ?? []) h(payload);
            });
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
    async publish(channel, payload, tx?: Tx) {
      assertChannel(channel);
      const text = JSON.stringify(payload ?? null);
      if (Buffer.byteLength(text) <= MAX_NOTIFY_BYTES) {
        await (tx ?? db).query('select pg_notify($1, $2)', [channel, text]);
        return;
      }
      // Too large for NOTIFY: the row carries it, the notification its id (in the same transaction).
      await (tx ?? db).query(`with p as (insert into bus_payloads (payload) values ($2) returning id) select pg_notify($1, json_build_object('${REF}', (select id from p))::text)`, [channel, text]);
      if (++largeSent % 100 === 1) void db.query(`delete from bus_payloads where created_at < now() - interval '5 minutes'`).catch(() => {});
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
