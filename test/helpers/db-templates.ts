import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDatabase } from '../../src/db/database.js';
import { acquireEmbedded, EMBEDDED_PORT } from '../../src/db/embedded-host.js';
import { createMigrator, migrationsDir } from '../../src/db/migrator.js';

/**
 * Databases for the tests, made fast: every suite used to create an empty database and run all the
 * migrations on it. Instead one migrated template is made per version of migrations/ (its name carries
 * a hash of the folder, so it is reused by later runs until a migration changes) and each suite gets a
 * copy: `CREATE DATABASE ... TEMPLATE` on PostgreSQL, a copied data directory on the embedded mode.
 * Also the bookkeeping of databases kept after a failed suite (see test-env.ts).
 */
const ROOT = new URL('../..', import.meta.url).pathname;
const CACHE_DIR = join(ROOT, 'node_modules', '.cache', 'agentws-test');
/** An initialised (initdb'd, unmigrated) PGlite data directory. */
const PGLITE_TEMPLATE = join(CACHE_DIR, 'pglite-template');
/** Lines `{ "at": ms, "db": name|null, "dir": path }` of installations kept after a failed suite. */
const KEPT_LIST = join(CACHE_DIR, 'kept.jsonl');
const KEEP_FOR_MS = 24 * 3600_000;

/** A short hash of the migration files (names and contents): the templates' version. */
function migrationsHash(dir = migrationsDir()): string {
  const h = createHash('sha256');
  for (const f of readdirSync(dir).sort()) h.update(f).update('\0').update(readFileSync(join(dir, f))).update('\0');
  return h.digest('hex').slice(0, 12);
}

/** The PostgreSQL server the tests and benchmarks use when AGENTWS_TEST_DATABASE_URL names none. */
export const defaultAdminUrl = () => process.env.AGENTWS_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export const scratchName = (prefix: string) => `${prefix}_${randomBytes(5).toString('hex')}`;

function databaseUrl(adminUrl: string, name: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function withAdmin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates database `name`, a copy of `template` when given; retries while another session holds the template. */
export async function createScratchDatabase(adminUrl: string, name: string, template?: string): Promise<string> {
  await withAdmin(adminUrl, async (c) => {
    for (let attempt = 0; ; attempt++) {
      try {
        await c.query(template ? `create database ${name} template ${template}` : `create database ${name}`);
        return;
      } catch (err) {
        // 55006 object_in_use: "source database is being accessed by other users" (a copy being made).
        if ((err as { code?: string }).code !== '55006' || attempt >= 50) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  });
  return databaseUrl(adminUrl, name);
}

export async function dropScratchDatabase(adminUrl: string, name: string): Promise<void> {
  await withAdmin(adminUrl, (c) => c.query(`drop database if exists ${name} with (force)`));
}

/**
 * The migrated PostgreSQL template `agentws_tpl_<hash>`: made once (migrated in a database of a passing
 * name, then renamed, so concurrent runs never copy a half-migrated one) and closed to connections, so
 * nothing but `CREATE DATABASE ... TEMPLATE` touches it (a template must have no sessions while copied).
 */
export async function postgresTemplate(adminUrl: string): Promise<string> {
  const name = `agentws_tpl_${migrationsHash()}`;
  const exists = async () => withAdmin(adminUrl, async (c) => (await c.query(`select 1 from pg_database where datname = $1`, [name])).rowCount === 1);
  if (await exists()) return name;
  const building = scratchName(`agentws_tplb`);
  const url = await createScratchDatabase(adminUrl, building);
  const db = createDatabase('postgres', { connectionString: url }, 2);
  try {
    await createMigrator(db).up();
  } finally {
    await db.close();
  }
  try {
    await withAdmin(adminUrl, async (c) => {
      await c.query(`alter database ${building} rename to ${name}`);
      await c.query(`alter database ${name} with allow_connections false`);
    });
  } catch (err) {
    await dropScratchDatabase(adminUrl, building);
    if (!(await exists())) throw err; // else another run made it first
  }
  return name;
}

/** The initialised PGlite data directory the embedded suites copy instead of running initdb each time. */
export async function pgliteTemplate(): Promise<string> {
  if (existsSync(join(PGLITE_TEMPLATE, 'PG_VERSION'))) return PGLITE_TEMPLATE;
  rmSync(PGLITE_TEMPLATE, { recursive: true, force: true });
  mkdirSync(PGLITE_TEMPLATE, { recursive: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const { vector } = await import('@electric-sql/pglite-pgvector');
  const db = await PGlite.create({ dataDir: PGLITE_TEMPLATE, extensions: { vector } });
  await db.query('select 1');
  await db.close();
  return PGLITE_TEMPLATE;
}

/** The migrated PGlite data directory `pglite-migrated-<hash>`: migrated in a scratch directory, then moved in place. */
export async function pgliteMigratedTemplate(): Promise<string> {
  const target = join(CACHE_DIR, `pglite-migrated-${migrationsHash()}`);
  if (existsSync(join(target, 'PG_VERSION'))) return target;
  // Short path: the embedded host's Unix socket lives under it (108-byte limit).
  const dataDir = mkdtempSync(join(tmpdir(), 'aws-tpl-'));
  try {
    cpSync(await pgliteTemplate(), join(dataDir, 'pglite'), { recursive: true });
    const handle = await acquireEmbedded(dataDir);
    const db = createDatabase('embedded', { host: handle.socketDir, port: EMBEDDED_PORT, user: 'postgres', database: 'postgres' }, 2, () => handle.release());
    try {
      await createMigrator(db).up();
    } finally {
      await db.close();
    }
    try {
      renameSync(join(dataDir, 'pglite'), target);
    } catch (err) {
      if (!existsSync(join(target, 'PG_VERSION'))) throw err; // else another run made it first
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  return target;
}

/** Records an installation kept after its suite failed; global setup drops it after a day. */
export function recordKept(entry: { db: string | null; dir: string }): void {
  mkdirSync(CACHE_DIR, { recursive: true });
  appendFileSync(KEPT_LIST, JSON.stringify({ at: Date.now(), ...entry }) + '\n');
}

function readKept(): Array<{ at: number; db: string | null; dir: string }> {
  if (!existsSync(KEPT_LIST)) return [];
  return readFileSync(KEPT_LIST, 'utf8').split('\n').filter(Boolean).flatMap((l) => {
    try {
      return [JSON.parse(l)];
    } catch {
      return [];
    }
  });
}

/** Drops what failed suites kept more than a day ago (databases and directories); keeps the rest listed. */
export async function dropOldKept(adminUrl: string, now = Date.now()): Promise<void> {
  const kept = readKept();
  const young = kept.filter((k) => now - k.at < KEEP_FOR_MS);
  for (const k of kept.filter((k) => now - k.at >= KEEP_FOR_MS)) {
    if (k.db) await dropScratchDatabase(adminUrl, k.db).catch(() => {});
    rmSync(k.dir, { recursive: true, force: true });
  }
  if (young.length !== kept.length) writeFileSync(KEPT_LIST, young.map((k) => JSON.stringify(k) + '\n').join(''));
}

/** Installations kept since `since` (this run), for the end-of-run line. */
export const keptSince = (since: number) => readKept().filter((k) => k.at >= since && existsSync(k.dir) && statSync(k.dir).isDirectory());
