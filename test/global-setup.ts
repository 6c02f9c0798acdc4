import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

/**
 * Runs once before all suites:
 * - finds a PostgreSQL with pgvector for the suites (AGENTWS_TEST_DATABASE_URL, or whatever
 *   `install.sh --with-postgres` sets up, installing PostgreSQL and building pgvector when missing);
 * - prepares an initialised PGlite data directory the embedded suites copy instead of running initdb
 *   each time (a few seconds each on two cores).
 */
const ROOT = new URL('..', import.meta.url).pathname;
export const PGLITE_TEMPLATE = join(ROOT, 'node_modules', '.cache', 'agentws-test', 'pglite-template');

export default async function setup(project: TestProject) {
  if (!existsSync(join(ROOT, 'dist', 'commands'))) {
    throw new Error('dist/ is missing: run `npm run build` (npm test does it for you)');
  }
  const url = await findPostgres();
  project.provide('adminDatabaseUrl', url);
  project.provide('pgliteTemplate', await pgliteTemplate());
}

async function canUse(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    const { rowCount } = await client.query(`select 1 from pg_available_extensions where name = 'vector'`);
    return rowCount === 1;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function findPostgres(): Promise<string> {
  const given = process.env.AGENTWS_TEST_DATABASE_URL;
  if (given) {
    if (await canUse(given)) return given;
    throw new Error(`AGENTWS_TEST_DATABASE_URL=${given.replace(/:[^:@/]*@/, ':****@')} is not reachable or lacks pgvector`);
  }
  const local = 'postgres://postgres@127.0.0.1:5432/postgres';
  if (await canUse(local)) return local;
  // Set it up: install.sh is idempotent and prints the URL that works.
  process.stderr.write('[test] PostgreSQL with pgvector not found: running `bash install.sh --with-postgres --no-systemd --no-npm`\n');
  const r = spawnSync('bash', ['install.sh', '--with-postgres', '--no-systemd', '--no-npm'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const line = r.stdout.split('\n').find((l) => l.startsWith('AGENTWS_TEST_DATABASE_URL='));
  if (r.status !== 0 || !line) throw new Error('could not set up PostgreSQL with pgvector (see the output above); set AGENTWS_TEST_DATABASE_URL to one you have');
  const url = line.slice('AGENTWS_TEST_DATABASE_URL='.length).trim();
  if (!(await canUse(url))) throw new Error(`install.sh reported ${url} but it does not answer`);
  return url;
}

async function pgliteTemplate(): Promise<string> {
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

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
    pgliteTemplate: string;
  }
}
