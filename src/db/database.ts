import pg from 'pg';

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
    query: (text, values) => pool.query(text, values as unknown[]),
    async transaction(fn) {
      const client = await pool.connect();
      const hooks: Array<() => void> = [];
      try {
        await client.query('BEGIN');
        const tx: Tx = {
          query: (text, values) => client.query(text, values as unknown[]),
          afterCommit: (hook) => void hooks.push(hook),
        };
        const result = await fn(tx);
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
