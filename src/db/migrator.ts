import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Umzug } from 'umzug';
import { packageRoot } from '../lib/package-root.js';
import { UnavailableError, ValidationError } from '../kernel/errors.js';
import type { Database } from './database.js';

/**
 * Schema migrations: numbered SQL files in migrations/, applied in order by umzug and recorded in
 * schema_migrations. A file holds its up part, then optionally a line `-- migrate:down` and the down part.
 *
 * Two processes may run migrations at once (two `aws migrate`, or serve starting beside one). On
 * PostgreSQL an advisory lock serialises whole runs; in addition each migration re-checks, inside its own
 * transaction and under a table lock, that it has not been applied meanwhile. The second guard is what
 * protects the embedded mode, where advisory locks do not exclude.
 */
const MIGRATIONS_TABLE = 'schema_migrations';
const LOCK_KEY = 7_240_301_119; // arbitrary, fixed: "agentws migrations"
const DOWN_MARKER = /^--\s*migrate:down\s*$/m;

export interface MigrationFile {
  name: string;
  up: string;
  down: string | null;
}

export interface MigrationStatus {
  name: string;
  appliedAt: Date | null;
}

export function migrationsDir(): string {
  return join(packageRoot(), 'migrations');
}

export function readMigrations(dir = migrationsDir()): MigrationFile[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const text = readFileSync(join(dir, file), 'utf8');
      const [up, down] = text.split(DOWN_MARKER);
      return { name: file.replace(/\.sql$/, ''), up: up.trim(), down: down?.trim() || null };
    });
}

export function createMigrator(db: Database, files: MigrationFile[] = readMigrations()) {
  const ensureTable = () =>
    db.query(`create table if not exists ${MIGRATIONS_TABLE} (name text primary key, applied_at timestamptz not null default now())`);

  const applied = async (): Promise<Map<string, Date>> => {
    await ensureTable();
    const { rows } = await db.query<{ name: string; applied_at: Date }>(`select name, applied_at from ${MIGRATIONS_TABLE}`);
    return new Map(rows.map((r) => [r.name, r.applied_at]));
  };

  // umzug (and its command-line parser's ~150 modules) is loaded when a migration is applied or reverted,
  // not by every command that opens the database.
  let umzugLoaded: Promise<Umzug> | undefined;
  const loadUmzug = () => (umzugLoaded ??= import('umzug').then(({ Umzug }) => makeUmzug(Umzug)));
  const makeUmzug = (Umzug: typeof import('umzug').Umzug) => new Umzug({
    logger: undefined,
    migrations: files.map((file) => ({
      name: file.name,
      up: () =>
        db.transaction(async (tx) => {
          await tx.query(`lock table ${MIGRATIONS_TABLE} in exclusive mode`);
          const { rowCount } = await tx.query(`select 1 from ${MIGRATIONS_TABLE} where name = $1`, [file.name]);
          if (rowCount) return; // applied by a concurrent run
          await tx.query(file.up);
          await tx.query(`insert into ${MIGRATIONS_TABLE} (name) values ($1)`, [file.name]);
        }),
      down: () =>
        db.transaction(async (tx) => {
          if (!file.down) throw new ValidationError(`migration ${file.name} has no down part`);
          await tx.query(`lock table ${MIGRATIONS_TABLE} in exclusive mode`);
          await tx.query(file.down);
          await tx.query(`delete from ${MIGRATIONS_TABLE} where name = $1`, [file.name]);
        }),
    })),
    storage: {
      executed: async () => [...(await applied()).keys()],
      // Recorded inside each migration's own transaction above, so nothing to do here.
      logMigration: async () => {},
      unlogMigration: async () => {},
    },
  });

  /** Holds the run-wide lock (PostgreSQL only) on one dedicated connection while fn runs. */
  const withLock = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (db.mode !== 'postgres') return fn();
    const client = await db.pool.connect();
    try {
      await client.query('select pg_advisory_lock($1)', [LOCK_KEY]);
      return await fn();
    } finally {
      await client.query('select pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
      client.release();
    }
  };

  return {
    /** Every known migration with when it was applied (null = pending). */
    async status(): Promise<MigrationStatus[]> {
      const done = await applied();
      return files.map((f) => ({ name: f.name, appliedAt: done.get(f.name) ?? null }));
    },
    async pending(): Promise<string[]> {
      const done = await applied();
      return files.filter((f) => !done.has(f.name)).map((f) => f.name);
    },
    /** Fails with a clear fix when the server lacks pgvector, before any migration half-applies. */
    async checkPrerequisites(): Promise<void> {
      const { rowCount } = await db.query(`select 1 from pg_available_extensions where name = 'vector'`);
      if (!rowCount) {
        throw new UnavailableError('the PostgreSQL server does not have the pgvector extension (needed for memory search)', {
          code: 'pgvector_missing',
          hint: 'Install pgvector >= 0.5 on the database server: `sudo ./install.sh --with-postgres` builds it for Debian, or install your distribution\'s postgresql-<version>-pgvector package.',
        });
      }
    },
    withLock,
    /** Applies one migration by name. Call inside withLock (the CLI does, to show progress per step). */
    async applyOne(name: string): Promise<void> {
      const { RerunBehavior } = await import('umzug');
      await (await loadUmzug()).up({ migrations: [name], rerun: RerunBehavior.SKIP });
    },
    /** Applies every pending migration in order; returns their names. */
    async up(): Promise<string[]> {
      await this.checkPrerequisites();
      return withLock(async () => {
        const done: string[] = [];
        for (const name of await this.pending()) {
          await this.applyOne(name);
          done.push(name);
        }
        return done;
      });
    },
    /** Reverts the most recent migration (development only). Returns its name, or null if none is applied. */
    async down(): Promise<string | null> {
      return withLock(async () => {
        const umzug = await loadUmzug();
        const [last] = await umzug.executed().then((list) => list.slice(-1));
        if (!last) return null;
        await umzug.down({ migrations: [last.name] });
        return last.name;
      });
    },
  };
}

export type Migrator = ReturnType<typeof createMigrator>;
