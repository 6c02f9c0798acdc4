import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { dropOldKept, keptSince, pgliteMigratedTemplate, pgliteTemplate, postgresTemplate } from './helpers/db-templates.js';

/**
 * Runs once before all suites:
 * - finds a PostgreSQL with pgvector for the suites (AGENTWS_TEST_DATABASE_URL, or whatever
 *   `install.sh --with-postgres` sets up, installing PostgreSQL and building pgvector when missing);
 * - prepares an initialised PGlite data directory the embedded suites copy instead of running initdb
 *   each time (a few seconds each on two cores);
 * - prepares the migrated templates (a PostgreSQL database, a PGlite data directory) that createTestEnv
 *   copies for suites wanting a migrated installation, instead of migrating each one (test/helpers/db-templates.ts);
 * - drops what failed suites of earlier runs kept more than a day ago, and at the end of the run names
 *   what this run's failed suites kept for inspection.
 */
const ROOT = new URL('..', import.meta.url).pathname;

export default async function setup(project: TestProject) {
  if (!existsSync(join(ROOT, 'dist', 'commands'))) {
    throw new Error('dist/ is missing: run `npm run build` (npm test does it for you)');
  }
  const startedAt = Date.now();
  const url = await findPostgres();
  await dropOldKept(url);
  project.provide('adminDatabaseUrl', url);
  project.provide('pgliteTemplate', await pgliteTemplate());
  project.provide('postgresMigratedTemplate', await postgresTemplate(url));
  project.provide('pgliteMigratedTemplate', await pgliteMigratedTemplate());
  return () => {
    const kept = keptSince(startedAt);
    if (kept.length) process.stderr.write(`\nkept for inspection (failed suites; dropped after a day by a later run):\n${kept.map((k) => `  ${k.db ? `database ${k.db}, ` : ''}${k.dir}\n`).join('')}`);
  };
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

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
    pgliteTemplate: string;
    postgresMigratedTemplate: string;
    pgliteMigratedTemplate: string;
  }
}
