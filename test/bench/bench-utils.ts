import { spawn, type ChildProcess } from 'node:child_process';

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
