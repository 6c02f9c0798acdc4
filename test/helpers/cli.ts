import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { TestEnv } from './test-env.js';

export const ROOT = new URL('../..', import.meta.url).pathname;
export const BIN = join(ROOT, 'bin', 'run.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The environment a command gets: only what a clean shell has, never the developer's AGENTWS_* or DATABASE_URL. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'TERM'];
  const env: NodeJS.ProcessEnv = { NO_COLOR: '1' };
  for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

/**
 * Runs `aws <args>` as a real subprocess with no TTY, as cron or CI would: stdin closed, or, with
 * `input`, a pipe that delivers it and then ends (`printf %s "$KEY" | aws ...`).
 */
export function runCli(args: string[], options: { env?: TestEnv; extraEnv?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; input?: string } = {}): Promise<CliResult> {
  const started = Date.now();
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd ?? options.env?.dir ?? ROOT,
    env: cleanEnv({ ...(options.env ? { AGENTWS_CONFIG: options.env.configPath } : {}), ...options.extraEnv }),
    stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  // The command may exit before reading it all (e.g. on a usage error): that is not the test's failure.
  child.stdin?.on('error', () => {});
  child.stdin?.end(options.input);
  return collect(child, started, options.timeoutMs ?? 60_000);
}

function collect(child: ChildProcess, started: number, timeoutMs: number): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`command timed out after ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      // Let the pipes drain.
      setImmediate(() => resolve({ code, stdout, stderr, ms: Date.now() - started }));
    });
  });
}

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  logs(): string;
  /** Sends the signal and resolves with the exit code and how long the exit took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; ms: number }>;
}

/** Starts `aws serve` (or `aws worker`) on an ephemeral port and waits until it logs that it is ready. */
export function startServe(env: TestEnv, options: { command?: string[]; readyMsg?: string; extraEnv?: Record<string, string> } = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, ...(options.command ?? ['serve'])], {
    cwd: env.dir,
    env: cleanEnv({ AGENTWS_CONFIG: env.configPath, ...options.extraEnv }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const readyMsg = options.readyMsg ?? 'agentws ready';
  let ready = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`not ready in 30 s:\n${out}`));
    }, 30_000);
    const onData = (d: Buffer) => {
      out += d;
      if (ready) return;
      for (const line of out.split('\n')) {
        if (!line.includes(`"msg":"${readyMsg}"`)) continue;
        clearTimeout(timer);
        ready = true;
        const url = (JSON.parse(line) as { url?: string }).url ?? '';
        resolve({
          url,
          child,
          logs: () => out,
          stop: (signal = 'SIGTERM') =>
            new Promise((res) => {
              const t0 = Date.now();
              if (child.exitCode !== null) return res({ code: child.exitCode, ms: 0 });
              child.once('exit', (code) => res({ code, ms: Date.now() - t0 }));
              child.kill(signal);
            }),
        });
        return;
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d) => (out += d));
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`exited with ${code} before ready:\n${out}`));
    });
  });
}

/** Whether util-linux's `script` is here to provide a pseudo-terminal (Debian ships it in an essential package). */
export const HAS_SCRIPT = spawnSync('script', ['--version']).status === 0;

/** Runs `aws <args>` in a pseudo-terminal, typing each answer once its question shows; resolves with the exit code and output. */
export function runInTerminal(env: TestEnv, args: string[], answers: Array<[RegExp, string]>): Promise<{ code: number | null; out: string }> {
  const cmd = [process.execPath, BIN, ...args].join(' ');
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: env.dir, stdio: ['pipe', 'pipe', 'pipe'], env: cleanEnv({ TERM: 'xterm', AGENTWS_CONFIG: env.configPath }) });
  let out = '';
  let next = 0;
  child.stdout.on('data', (d) => {
    out += d;
    if (next < answers.length && answers[next][0].test(out.slice(-4000))) {
      const keys = answers[next++][1];
      setTimeout(() => child.stdin.write(keys), 150);
    }
  });
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}
