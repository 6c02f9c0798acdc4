import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import os from 'node:os';

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
