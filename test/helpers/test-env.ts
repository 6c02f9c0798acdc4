import { cpSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import type { Config } from '../../src/config/config.schema.js';
import { loadConfig } from '../../src/config/load-config.js';
import { processHome } from '../../src/lib/process-state.js';
import { randomSecret } from '../../src/lib/secrets.js';

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
}

/**
 * A fresh, isolated installation for one test: a temp directory with a config file, and either a new
 * PostgreSQL database or a new embedded data directory (copied from an initialised template).
 */
export async function createTestEnv(options: { mode?: DbMode; vars?: Record<string, string>; initialiseEmbedded?: boolean } = {}): Promise<TestEnv> {
  const mode = options.mode ?? DB_MODE;
  // Short path: the embedded database's Unix socket lives under it (108-byte limit).
  const dir = mkdtempSync(join(tmpdir(), 'aws-t-'));
  const dataDir = join(dir, 'data');
  let databaseUrl: string | null = null;
  let dbName: string | null = null;
  if (mode === 'embedded') {
    if (options.initialiseEmbedded !== false) cpSync(inject('pgliteTemplate'), join(dataDir, 'pglite'), { recursive: true });
  } else {
    const admin = inject('adminDatabaseUrl');
    dbName = `agentws_t_${randomSecret(6).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
    await withAdmin(admin, (c) => c.query(`create database ${dbName}`));
    const u = new URL(admin);
    u.pathname = `/${dbName}`;
    databaseUrl = u.toString();
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
      if (dbName) {
        await withAdmin(inject('adminDatabaseUrl'), (c) => c.query(`drop database if exists ${dbName} with (force)`)).catch(() => {});
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  env.writeConfig();
  return env;
}

/** SIGKILLs every process (but this one) whose HOME or working directory lies under `dir`, a test env's own temp directory. */
export function killProcessesUnder(dir: string): number[] {
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

async function withAdmin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
