import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs, { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { format } from 'node:util';
import { waitUntil } from './poll.js';
import type { TestEnv } from './test-env.js';

/*
 * Two ways to run `aws <args>` in a test:
 *
 * - runCommand (most CLI tests): the command runs inside the test process, through oclif's own `run` on
 *   the built dist/ commands, with the environment, working directory, stdin, argv and no-TTY streams a
 *   subprocess would have, its stdout and stderr captured and its exit code taken from oclif's exit
 *   errors. It skips what every subprocess pays again and again (node, oclif and the modules' start-up).
 *   Commands run one at a time (process.env, cwd, argv and the streams are the process's; whatever
 *   else the test process prints meanwhile lands in the result too), and the pool must be `forks`
 *   (process.chdir is refused in worker threads).
 * - runCli, startServe, runInTerminal (subprocesses, kept where the separate process is the point):
 *   - serve and worker (serve.both.test.ts, token-cli, demo-mode's refusals): they run until a signal, install
 *     signal handlers and may call process.exit; runCommand refuses them, and `audit tail --follow`
 *     (admin-cli: streams until SIGTERM) and a bare `aws runner`;
 *   - cli.both.test.ts: `init --yes` on a fresh install (hosting the embedded database itself), usage errors
 *     and their exit code, the compile cache, an old Node, and the worker's refusal of the embedded
 *     database; fast-help.test.ts: help printed from the manifest without loading oclif, and the errors
 *     oclif still gives. bin/run.js's own start-up is only exercised there (runCommand calls oclif);
 *   - runtime-cli.both.test.ts: a key piped on a real stdin (`provider add --api-key-stdin`; the other piped
 *     secrets use runCommand's `input`);
 *   - prompts in a pseudo-terminal (runInTerminal: init-interactive, gateway, runtime and skill tests);
 *   - suites outside test/cli (integration, security, api) that start a second process on purpose (a
 *     `backup create` while serve runs, as the operator's timer does; runner hosts in their namespaces).
 *   - the benchmarks (test/bench): the serve and worker they measure, and their helper processes (a
 *     scripted model, a bare opencode), through startServe and spawnUntil.
 */

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

/** Runs one in-process command at a time: process.env, cwd, argv and the standard streams are process-wide. */
let queue: Promise<unknown> = Promise.resolve();

/**
 * Runs `aws <args>` inside the test process, as runCli would run it in a subprocess (same options, same
 * result). The command opens and closes its own core, as the binary does (BaseCommand's finally).
 */
export function runCommand(args: string[], options: { env?: TestEnv; extraEnv?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; input?: string } = {}): Promise<CliResult> {
  // These run until a signal and may end the process themselves (process.exit): never in the test's.
  const longRunning = !args.includes('--help') && (['serve', 'worker'].includes(args[0]) || (args[0] === 'runner' && (args[1] === undefined || args[1].startsWith('-'))) || (args[0] === 'audit' && args.includes('--follow')));
  if (longRunning) return Promise.reject(new Error(`\`aws ${args.join(' ')}\` runs until a signal: use runCli or startServe`));
  const run = queue.then(() => runInProcess(args, options));
  queue = run.catch(() => {});
  return run;
}

async function runInProcess(args: string[], options: { env?: TestEnv; extraEnv?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; input?: string }): Promise<CliResult> {
  const started = Date.now();
  const { run } = await import('@oclif/core');
  const { handle, Exit } = await import('@oclif/core/handle');

  let stdout = '';
  let stderr = '';
  const sink = (fd: number, chunk: unknown) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
    if (fd === 1) stdout += text;
    else stderr += text;
  };
  const env = cleanEnv({ ...(options.env ? { AGENTWS_CONFIG: options.env.configPath } : {}), ...options.extraEnv });
  const saved = {
    env: { ...process.env },
    cwd: process.cwd(),
    argv: process.argv,
    exitCode: process.exitCode,
    out: process.stdout.write,
    err: process.stderr.write,
    writeSync: fs.writeSync,
    console: { log: console.log, info: console.info, warn: console.warn, error: console.error, debug: console.debug },
    stdin: Object.getOwnPropertyDescriptor(process, 'stdin')!,
    tty: [process.stdout.isTTY, process.stderr.isTTY],
    exit: Exit.exit,
  };
  const lock = borrowEmbeddedLock(options.env, options.extraEnv);
  let code: number | null = 0;
  try {
    // The variables a subprocess would get, and only those (the runner's own VITEST_* stay: vitest reads them).
    for (const k of Object.keys(process.env)) if (!k.startsWith('VITEST')) delete process.env[k];
    Object.assign(process.env, env);
    process.chdir(options.cwd ?? options.env?.dir ?? ROOT);
    process.argv = [process.execPath, BIN, ...args];
    process.exitCode = undefined;
    process.stdout.write = ((chunk: unknown, ...rest: unknown[]) => (sink(1, chunk), callbackOf(rest)?.(), true)) as typeof process.stdout.write;
    process.stderr.write = ((chunk: unknown, ...rest: unknown[]) => (sink(2, chunk), callbackOf(rest)?.(), true)) as typeof process.stderr.write;
    // The CLI's logger writes synchronously to fd 2 (pino.destination), past process.stderr.
    fs.writeSync = ((fd: number, data: unknown, ...rest: unknown[]) => {
      if (fd !== 1 && fd !== 2) return (saved.writeSync as (...a: unknown[]) => number)(fd, data, ...rest);
      sink(fd, data);
      return typeof data === 'string' ? Buffer.byteLength(data) : (data as Uint8Array).byteLength;
    }) as typeof fs.writeSync;
    // oclif's ux and error handler print with console (which vitest redirects to its reporter).
    console.log = console.info = console.debug = (...a: unknown[]) => sink(1, format(...a) + '\n');
    console.warn = console.error = (...a: unknown[]) => sink(2, format(...a) + '\n');
    // stdin: closed (runCli's 'ignore'), or a pipe that delivers `input` and then ends; never a terminal.
    const stdin = Readable.from(options.input === undefined ? [] : [Buffer.from(options.input)]) as Readable & { isTTY?: boolean };
    stdin.isTTY = false;
    Object.defineProperty(process, 'stdin', { value: stdin, configurable: true, enumerable: true });
    setTty(false, false);
    // The binary ends in oclif's error handler, which prints and calls process.exit: take its code instead.
    Exit.exit = ((n = 0) => {
      code = n;
    }) as typeof Exit.exit;
    const timeoutMs = options.timeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new Error(`command timed out after ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
      }, timeoutMs);
    });
    try {
      // A fresh oclif Config each time (a few ms from the manifest): root help leaves a reused one unable
      // to find spaced command ids ("Command tenant:seed not found").
      await Promise.race([run(args, { root: ROOT }), timeout]);
      code = typeof process.exitCode === 'number' ? process.exitCode : 0;
    } catch (err) {
      if (timedOut) throw err;
      await handle(err instanceof Error ? err : new Error(String(err)));
    } finally {
      clearTimeout(timer);
    }
  } finally {
    lock?.restore();
    Exit.exit = saved.exit;
    Object.defineProperty(process, 'stdin', saved.stdin);
    setTty(saved.tty[0], saved.tty[1]);
    console.log = saved.console.log;
    console.info = saved.console.info;
    console.warn = saved.console.warn;
    console.error = saved.console.error;
    console.debug = saved.console.debug;
    fs.writeSync = saved.writeSync;
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    process.exitCode = saved.exitCode;
    process.argv = saved.argv;
    process.chdir(saved.cwd);
    for (const k of Object.keys(process.env)) delete process.env[k];
    Object.assign(process.env, saved.env);
  }
  return { code, stdout, stderr, ms: Date.now() - started };
}

const callbackOf = (rest: unknown[]) => rest.find((r): r is () => void => typeof r === 'function');

function setTty(out: boolean | undefined, err: boolean | undefined): void {
  (process.stdout as { isTTY?: boolean }).isTTY = out;
  (process.stderr as { isTTY?: boolean }).isTTY = err;
}

/**
 * A subprocess finds the embedded database hosted by the test process (a suite's openDatabase, or the
 * test app) through the lock file naming the test process, and connects to its socket. The same command
 * in the test process would read its own pid there, take the lock for a dead host's and open PGlite a
 * second time. So, for the command's duration, the lock names the test runner's parent process (alive,
 * hence "another host"): the command connects to the socket exactly as the subprocess would.
 */
function borrowEmbeddedLock(env: TestEnv | undefined, extraEnv: Record<string, string | undefined> | undefined): { restore(): void } | null {
  const dataDir = extraEnv?.AGENTWS_DATA_DIR ?? env?.vars.AGENTWS_DATA_DIR;
  if (!dataDir) return null;
  const lock = join(dataDir, 'run', 'embedded.lock');
  let owner: string;
  try {
    owner = readFileSync(lock, 'utf8').trim();
  } catch {
    return null;
  }
  if (owner !== String(process.pid)) return null;
  writeFileSync(lock, String(process.ppid));
  return {
    restore() {
      try {
        if (readFileSync(lock, 'utf8').trim() === String(process.ppid)) writeFileSync(lock, owner);
      } catch {
        // the host was released meanwhile
      }
    },
  };
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

/**
 * Starts `aws serve` (or `aws worker`) on an ephemeral port and waits until it logs that it is ready.
 * For the benchmarks: `wrap` runs it under another command (pinned to a CPU with taskset), and with
 * `logFile` its log goes straight to that file, as a journal would take it, rather than through a pipe
 * this process must keep reading (a busy measuring process would otherwise slow serve's logging); the
 * file is then read for the ready line; `bin` runs another build's bin/run.js (a bench comparing two).
 */
export async function startServe(
  env: Pick<TestEnv, 'dir' | 'configPath'>,
  options: { command?: string[]; readyMsg?: string; extraEnv?: Record<string, string>; wrap?: (cmd: string, args: string[]) => [string, string[]]; logFile?: string; bin?: string } = {},
): Promise<ServeProcess> {
  const [cmd, args] = (options.wrap ?? ((c, a) => [c, a]))(process.execPath, [options.bin ?? BIN, ...(options.command ?? ['serve'])]);
  const spawnEnv = cleanEnv({ AGENTWS_CONFIG: env.configPath, ...options.extraEnv });
  const readyMsg = options.readyMsg ?? 'agentws ready';
  const urlOf = (line: string) => (line.includes(`"msg":"${readyMsg}"`) ? ((JSON.parse(line) as { url?: string }).url ?? '') : undefined);
  let child: ChildProcess;
  let url: string;
  let logs: () => string;
  if (options.logFile) {
    const logFile = options.logFile;
    const fd = openSync(logFile, 'a');
    child = spawn(cmd, args, { cwd: env.dir, env: spawnEnv, stdio: ['ignore', fd, 'inherit'] });
    closeSync(fd); // the child has its own
    logs = () => readFileSync(logFile, 'utf8');
    try {
      url = await waitUntil(
        () => `${readyMsg}:\n${logs()}`,
        () => {
          const found = logs().split('\n').map(urlOf).find((u) => u !== undefined);
          if (found === undefined && child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before ready:\n${logs()}`);
          return found;
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      );
    } catch (err) {
      // SIGTERM first: a serve that got as far as starting its managed runtime stops it on the way out.
      await stopChild(child, 'SIGTERM', 5000);
      throw err;
    }
  } else {
    ({ child, value: url, output: logs } = await spawnUntil(cmd, args, { cwd: env.dir, env: spawnEnv, keepOutput: true }, urlOf));
  }
  return { url, child, logs, stop: (signal = 'SIGTERM') => stopChild(child, signal) };
}

/** Sends the signal and resolves once the process exited (SIGKILL after `killAfterMs`, if given), with its code and how long it took. */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', killAfterMs?: number): Promise<{ code: number | null; ms: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    if (child.exitCode !== null || child.signalCode !== null) return resolve({ code: child.exitCode, ms: 0 });
    const timer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, ms: Date.now() - t0 });
    });
    child.kill(signal);
  });
}

/**
 * Spawns a process and resolves once a line of its stdout makes `ready` return a value (an address it
 * printed, say), with that value; rejects if it exits first or is not ready in `timeoutMs` (then it is
 * killed). Its output (stdout and stderr) is kept for `output()` until ready, and after that too with
 * `keepOutput` (a long-running helper's output is otherwise read and dropped).
 */
export function spawnUntil<T>(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number; keepOutput?: boolean },
  ready: (line: string) => T | undefined,
): Promise<{ child: ChildProcess; value: T; output(): string }> {
  const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let out = '';
  let pending = '';
  let done = false;
  const keep = (d: Buffer) => {
    if (!done || opts.keepOutput) out += d;
  };
  child.stderr!.on('data', keep);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`not ready in ${timeoutMs / 1000} s:\n${out}`));
    }, timeoutMs);
    child.stdout!.on('data', (d: Buffer) => {
      keep(d);
      if (done) return;
      // Whole lines only: a line split across two reads is looked at once it is complete.
      const lines = (pending + d).split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const value = ready(line);
        if (value === undefined) continue;
        done = true;
        clearTimeout(timer);
        resolve({ child, value, output: () => out });
        return;
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!done) reject(new Error(`exited with ${code} before ready:\n${out}`));
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
