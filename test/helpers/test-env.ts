import { cpSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject, type ProvidedContext } from 'vitest';
import type { Config } from '../../src/config/config.schema.js';
import { loadConfig } from '../../src/config/load-config.js';
import { processHome } from '../../src/lib/process-state.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { createScratchDatabase, defaultAdminUrl, dropScratchDatabase, pgliteMigratedTemplate, pgliteTemplate, postgresTemplate, recordKept, scratchName } from './db-templates.js';
import { suiteHasFailed } from './suite-outcome.js';

export type DbMode = 'postgres' | 'embedded';
/** Which backend this project of the suite runs on (see vitest.config.ts). */
export const DB_MODE: DbMode = process.env.TEST_DB_MODE === 'postgres' ? 'postgres' : 'embedded';

export interface TestEnv {
  mode: DbMode;
  dir: string;
  dataDir: string;
  databaseUrl: string | null;
  configPath: string;
  vars: Record<string, string>;
  /** Parses the env's config file exactly as the CLI would. */
  config(): Config;
  /** Rewrites the config file with extra or changed variables. */
  writeConfig(extra?: Record<string, string>): void;
  cleanup(): Promise<void>;
  /** Keeps it for inspection (as cleanup() does when the suite has failed): for a set-up that threw before a cleanup could be arranged. */
  keep(): void;
}

/**
 * A fresh, isolated installation for one test: a temp directory with a config file, and either a new
 * PostgreSQL database or a new embedded data directory (copied from an initialised template).
 * `migrated: true` makes it a copy of the migrated template global setup prepared (what startTestApp and
 * openTestCore want: copying is much faster than migrating); without it the database is empty, as the
 * suites about migrating, upgrading and `aws migrate` need. `initialiseEmbedded: false` leaves the
 * embedded data directory out altogether (for `aws init` and the like).
 * When the suite has failed by the time cleanup() runs, the installation is kept for inspection (its
 * name is printed at the end of the run; a later run drops it after a day).
 */
export async function createTestEnv(options: { mode?: DbMode; vars?: Record<string, string>; initialiseEmbedded?: boolean; migrated?: boolean } = {}): Promise<TestEnv> {
  const mode = options.mode ?? DB_MODE;
  // Short path: the embedded database's Unix socket lives under it (108-byte limit).
  const dir = mkdtempSync(join(tmpdir(), 'aws-t-'));
  const dataDir = join(dir, 'data');
  let databaseUrl: string | null = null;
  let dbName: string | null = null;
  if (mode === 'embedded') {
    const template = await provided(options.migrated ? 'pgliteMigratedTemplate' : 'pgliteTemplate');
    if (options.initialiseEmbedded !== false) cpSync(template, join(dataDir, 'pglite'), { recursive: true });
  } else {
    dbName = scratchName('agentws_t');
    databaseUrl = await createScratchDatabase(await provided('adminDatabaseUrl'), dbName, options.migrated ? await provided('postgresMigratedTemplate') : undefined);
  }
  const configPath = join(dir, 'config.env');
  const vars: Record<string, string> = {
    AGENTWS_DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl ?? '',
    AGENTWS_HOST: '127.0.0.1',
    AGENTWS_PORT: '0',
    AGENTWS_LOG_LEVEL: 'info',
    AGENTWS_JWT_SECRET: randomSecret(32),
    AGENTWS_ENCRYPTION_KEY: randomSecret(32),
    AGENTWS_API_KEY: randomSecret(32),
    ...options.vars,
  };
  const env: TestEnv = {
    mode,
    dir,
    dataDir,
    databaseUrl,
    configPath,
    vars,
    config: () => loadConfig({ configPath, env: {} }),
    writeConfig(extra = {}) {
      Object.assign(vars, extra);
      writeFileSync(configPath, Object.entries(vars).map(([k, v]) => `${k}=${v}`).join('\n') + '\n', { mode: 0o600 });
    },
    async cleanup() {
      // A test that failed half-way may leave a process of this installation running (a managed runtime
      // whose serve was killed): stop it before its directory goes.
      killProcessesUnder(dir);
      if (suiteHasFailed()) return env.keep();
      if (dbName) await dropScratchDatabase(await provided('adminDatabaseUrl'), dbName).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
    keep: () => recordKept({ db: dbName, dir }),
  };
  env.writeConfig();
  return env;
}

/**
 * What global setup provides (test/global-setup.ts); outside vitest (the benchmarks, test/bench) the same
 * values worked out here: the templates are made, or found from an earlier run, the same way.
 */
async function provided<K extends keyof ProvidedContext>(key: K): Promise<ProvidedContext[K]> {
  let value: ProvidedContext[K] | undefined;
  try {
    value = inject(key);
  } catch {
    // not inside a vitest worker
  }
  if (value !== undefined) return value;
  const fallback: { [k in keyof ProvidedContext]: () => Promise<ProvidedContext[k]> } = {
    adminDatabaseUrl: async () => defaultAdminUrl(),
    pgliteTemplate,
    pgliteMigratedTemplate,
    postgresMigratedTemplate: () => postgresTemplate(defaultAdminUrl()),
  };
  return (fallback[key] as () => Promise<ProvidedContext[K]>)();
}

/** SIGKILLs every process (but this one) whose HOME or working directory lies under `dir`, a test env's own temp directory. */
function killProcessesUnder(dir: string): number[] {
  const killed: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      if (!isUnder(processHome(pid) ?? '', dir) && !isUnder(cwd, dir)) continue;
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return killed;
}

const isUnder = (path: string, dir: string) => path === dir || path.startsWith(dir + '/');
