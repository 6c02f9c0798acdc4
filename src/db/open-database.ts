import type { Config } from '../config/config.schema.js';
import { UnavailableError } from '../kernel/errors.js';
import { createDatabase, type Database } from './database.js';
import { acquireEmbedded, EMBEDDED_PORT } from './embedded-host.js';

/** Opens the database the config names: the embedded host (hosting it when nobody else does) or PostgreSQL. */
export async function openDatabase(config: Config): Promise<Database> {
  if (config.database.mode === 'embedded') {
    const handle = await acquireEmbedded(config.dataDir);
    const db = createDatabase(
      'embedded',
      { host: handle.socketDir, port: EMBEDDED_PORT, user: 'postgres', database: 'postgres' },
      config.database.poolMax,
      () => handle.release(),
    );
    await ping(db, 'the embedded database').catch(async (err) => {
      await db.close();
      throw err;
    });
    return db;
  }
  const db = createDatabase('postgres', { connectionString: config.database.url! }, config.database.poolMax);
  await ping(db, `PostgreSQL at ${describeUrl(config.database.url!)}`).catch(async (err) => {
    await db.close();
    throw err;
  });
  return db;
}

async function ping(db: Database, what: string): Promise<void> {
  try {
    await db.query('select 1');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new UnavailableError(`cannot reach ${what}: ${e.code ?? ''} ${e.message}`.replace(/\s+/g, ' ').trim(), {
      code: 'database_unavailable',
      hint: 'Check DATABASE_URL and that the server is running (`sudo ./install.sh --with-postgres` sets one up).',
      cause: err,
    });
  }
}

/** host:port/db of a URL, without credentials: safe to show in errors and logs. */
function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}
