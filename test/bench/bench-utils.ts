import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
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

/** Spawns a process and resolves once a stdout line satisfies `ready` (returning what it extracted). */
export function spawnUntil<T>(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string }, ready: (line: string) => T | undefined): Promise<{ child: ChildProcess; value: T }> {
  const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  let buf = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in 30 s: ${buf}${err}`)), 30_000);
    let done = false;
    child.stdout!.on('data', (d) => {
      if (done) return;
      buf += d;
      for (const line of buf.split('\n')) {
        const v = ready(line);
        if (v !== undefined) {
          done = true;
          clearTimeout(timer);
          return resolve({ child, value: v });
        }
      }
    });
    child.once('exit', (code) => {
      if (!done) reject(new Error(`exited ${code}: ${buf}${err}`));
    });
  });
}

export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
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
 * CPU 0, logging to a file as a journal would; resolves once serve logs that it is ready.
 */
export async function startServe(bin: string, dir: string, databaseUrl?: string, extraEnv: Record<string, string> = {}): Promise<BenchServe> {
  mkdirSync(dir, { recursive: true });
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', AGENTWS_CONFIG: join(dir, 'config.env'), ...extraEnv };
  const init = spawnSync(process.execPath, [bin, 'init', '--yes', '--json', '--port', '0', '--no-demo', ...(databaseUrl ? ['--database-url', databaseUrl] : [])], { cwd: dir, env, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(init.stderr);
  const logFile = join(dir, 'serve.log');
  const child = spawn(...pinned(process.execPath, [bin, 'serve']), { cwd: dir, env, stdio: ['ignore', openSync(logFile, 'a'), 'inherit'] });
  for (let i = 0; i < 300; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const line = readFileSync(logFile, 'utf8').split('\n').find((l) => l.includes('agentws ready'));
    if (line) return { child, url: JSON.parse(line).url as string, init: JSON.parse(init.stdout), config: readFileSync(env.AGENTWS_CONFIG, 'utf8') };
  }
  // SIGTERM first: a serve that got as far as starting its managed runtime stops it on the way out.
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    if (child.exitCode !== null) resolve();
    else child.kill('SIGTERM');
  });
  throw new Error('aws serve did not become ready:\n' + readFileSync(logFile, 'utf8'));
}
