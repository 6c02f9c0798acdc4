import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { cleanEnv, startServe as startTestServe } from '../helpers/cli.js';
import { createScratchDatabase, defaultAdminUrl, dropScratchDatabase, scratchName } from '../helpers/db-templates.js';

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

export function report(name: string, rows: Record<string, string | number>, verdict: { ok: boolean; target: string }) {
  process.stdout.write(`\n## ${name}\n`);
  for (const [k, v] of Object.entries(rows)) process.stdout.write(`  ${k.padEnd(34)} ${v}\n`);
  process.stdout.write(`  ${'target'.padEnd(34)} ${verdict.target}  ->  ${verdict.ok ? 'MET' : 'NOT MET'}\n`);
  return verdict.ok;
}

/**
 * On a machine with few cores the load generator, the server and their helper threads fight over the
 * same CPUs and the scheduler moves them around, which makes throughput swing ±25% between runs. Pinning
 * the server under test to CPU 0 and this process (autocannon) to CPU 1 gives both runs of a comparison
 * the same conditions. No-op where taskset is missing or there is a single CPU.
 */
export function pinned(cmd: string, args: string[]): [string, string[]] {
  return canPin() ? ['taskset', ['-c', '0', cmd, ...args]] : [cmd, args];
}

let pinChecked: boolean | undefined;
function canPin(): boolean {
  if (pinChecked === undefined) {
    pinChecked = os.cpus().length >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
    if (pinChecked) spawnSync('taskset', ['-pc', '1', String(process.pid)]);
  }
  return pinChecked;
}

const adminUrl = defaultAdminUrl;

/** A fresh (empty) PostgreSQL database for a benchmark, made as the tests make theirs; dropped by the returned function. */
export async function scratchDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = scratchName(prefix);
  const url = await createScratchDatabase(adminUrl(), name);
  return { url, drop: () => dropScratchDatabase(adminUrl(), name) };
}

export interface BenchServe {
  child: ChildProcess;
  url: string;
  /** What `aws init --json` printed (tenant, operator, ...). */
  init: { tenant: { id: string }; operator: { id: string } };
  /** The config file `aws init` wrote (KEY=value). */
  config: string;
}

/**
 * `aws init` + `aws serve` in its own folder (PostgreSQL when a URL is given, else embedded), pinned to
 * CPU 0, logging to a file as a journal would (the tests' startServe); resolves once serve logs that it is ready.
 */
export async function startServe(bin: string, dir: string, databaseUrl?: string, extraEnv: Record<string, string> = {}): Promise<BenchServe> {
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'config.env');
  const init = spawnSync(process.execPath, [bin, 'init', '--yes', '--json', '--port', '0', '--no-demo', ...(databaseUrl ? ['--database-url', databaseUrl] : [])], { cwd: dir, env: cleanEnv({ AGENTWS_CONFIG: configPath, ...extraEnv }), encoding: 'utf8' });
  if (init.status !== 0) throw new Error(init.stderr);
  const serve = await startTestServe({ dir, configPath }, { bin, extraEnv, wrap: pinned, logFile: join(dir, 'serve.log') });
  return { child: serve.child, url: serve.url, init: JSON.parse(init.stdout), config: readFileSync(configPath, 'utf8') };
}
