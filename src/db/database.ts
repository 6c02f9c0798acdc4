import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';

/**
 * Marks code running inside a transaction. A query on the pool from there is a bug: on the embedded
 * database it deadlocks (the one backend session waits for the open transaction, which waits for the
 * query), and on PostgreSQL it reads outside the transaction. It fails at once instead.
 */
const inTransaction = new AsyncLocalStorage<true>();

export class PoolInsideTransactionError extends Error {
  constructor() {
    super('a query went to the connection pool from inside a transaction: pass the transaction (tx) instead');
  }
}

/** Anything that runs a query: the pool, or a client inside a transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** A transaction in progress. afterCommit hooks run only if it commits (used for in-process events). */
export interface Tx extends Queryable {
  afterCommit(fn: () => void): void;
}

export interface Database extends Queryable {
  readonly mode: 'embedded' | 'postgres';
  /** Connection settings for the other pools a process opens (job queue, LISTEN client). */
  readonly connection: pg.ClientConfig;
  readonly pool: pg.Pool;
  /**
   * A query run on every request: on PostgreSQL it is a named prepared statement, so the server plans
   * it once per connection (planning a small join costs ~1 ms, execution ~0.1 ms). On the embedded
   * database every connection shares one session, where names would collide, so it runs unnamed.
   */
  hot<R extends pg.QueryResultRow = pg.QueryResultRow>(name: string, text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Runs fn in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function createDatabase(mode: Database['mode'], connection: pg.ClientConfig, poolMax: number, onClose?: () => Promise<void>): Database {
  const pool = new pg.Pool({ ...connection, max: poolMax, idleTimeoutMillis: 30_000 });
  // An idle client losing its server (restart, embedded host gone) must not crash the process.
  pool.on('error', () => {});
  let closed = false;
  return {
    mode,
    connection,
    pool,
    query: (text, values) => {
      if (inTransaction.getStore()) return Promise.reject(new PoolInsideTransactionError());
      return pool.query(text, values as unknown[]);
    },
    hot(name, text, values) {
      if (inTransaction.getStore()) return Promise.reject(new PoolInsideTransactionError());
      return mode === 'postgres' ? pool.query({ name, text, values: values as unknown[] }) : pool.query(text, values as unknown[]);
    },
    async transaction(fn) {
      if (inTransaction.getStore()) throw new PoolInsideTransactionError();
      const client = await pool.connect();
      const hooks: Array<() => void> = [];
      try {
        await client.query('BEGIN');
        const tx: Tx = {
          query: (text, values) => client.query(text, values as unknown[]),
          afterCommit: (hook) => void hooks.push(hook),
        };
        const result = await inTransaction.run(true, () => fn(tx));
        await client.query('COMMIT');
        for (const hook of hooks) hook();
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
      await onClose?.();
    },
  };
}
