import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { isProcessAlive, processHome } from '../../lib/process-state.js';
import { randomSecret } from '../../lib/secrets.js';
import { UnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';

/**
 * The managed agent runtime: `opencode serve` (opencode-ai 1.18.33) as a child process on loopback,
 * with its own HOME and XDG directories under the data dir (it writes config, a SQLite database and logs
 * there, and touches HOME even for `--version`) and a password generated per manager. It is restarted
 * with back-off if it dies and stopped with the service.
 *
 * Facts this relies on (measured on opencode 1.18.33): it prints exactly one stdout line,
 * `opencode server listening on http://127.0.0.1:<port>` (with `--port 0` it tries 4096 first, so the
 * port is read from that line); it needs ~3 s to start; `GET /global/health` answers
 * `{"healthy":true,"version":"1.18.33"}`; every route wants HTTP Basic auth as user `opencode`.
 */
export const OPENCODE_VERSION = '1.18.33';
const LISTENING = /opencode server listening on (http:\/\/\S+)/;
const START_TIMEOUT_MS = 30_000;
const MAX_BACKOFF_MS = 30_000;

export interface RuntimeEndpoint {
  url: string;
  /** HTTP Basic credentials for every request to the runtime. */
  authorization: string;
}

/** Path of the opencode binary that ships inside the npm package for this platform. */
export function opencodeBinary(): string {
  const require = createRequire(import.meta.url);
  const candidates = [`opencode-${process.platform}-${process.arch}`, `opencode-${process.platform}-${process.arch}-baseline`];
  for (const pkg of candidates) {
    try {
      const bin = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'opencode');
      if (existsSync(bin)) return bin;
    } catch {
      // not installed for this platform; try the next
    }
  }
  throw new UnavailableError(`no opencode ${OPENCODE_VERSION} binary for ${process.platform}-${process.arch}`, {
    code: 'runtime_unavailable',
    hint: 'Reinstall dependencies (`npm ci`) on this machine, or configure an external runtime.',
  });
}

/** The managed runtime's HOME: it identifies a runtime process as ours (see runtime-host.ts). */
export function managedRuntimeHome(dataDir: string): string {
  return join(dataDir, 'runtime', 'home');
}

/**
 * Whether `pid` is a running managed runtime of this data directory: alive (a zombie has exited) and
 * started with our runtime's HOME. A recorded pid that fails this is a runtime that is gone, or a pid
 * the system has since given to some other process.
 */
export function isManagedRuntime(pid: number | null | undefined, dataDir: string): boolean {
  return !!pid && isProcessAlive(pid) && processHome(pid) === managedRuntimeHome(dataDir);
}

/**
 * The command line that starts the runtime at the given niceness. Through coreutils' `nice`, which execs
 * the binary: every thread and every process the runtime later starts (the agent's bash, builds, tests)
 * inherits it, and the pid is still the runtime's own. (setpriority() on the child after spawn would
 * only reach its main thread on Linux; it is the fallback where `nice` is missing.)
 */
export function runtimeCommand(binary: string, args: string[], nice: number): { file: string; args: string[]; renice: boolean } {
  if (nice <= 0) return { file: binary, args, renice: false };
  const niceBin = ['/usr/bin/nice', '/bin/nice'].find((p) => existsSync(p));
  return niceBin ? { file: niceBin, args: ['-n', String(nice), binary, ...args], renice: false } : { file: binary, args, renice: true };
}

/**
 * `nice`: the runtime runs at this niceness (0-19) so that the agents' work, which can take every CPU
 * for minutes (a build, a test suite), cannot starve `aws serve` itself: measured on 2 cores, sharing a
 * core with the runtime at equal priority added tens of ms to every event serve forwards.
 */
export function createManagedRuntime(options: { dataDir: string; log: Logger; binary?: string; nice?: number }) {
  const { log } = options;
  const root = join(options.dataDir, 'runtime');
  const home = managedRuntimeHome(options.dataDir);
  const password = randomSecret(24);
  const authorization = `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}`;
  let child: ChildProcess | null = null;
  let endpoint: RuntimeEndpoint | null = null;
  let stopping = false;
  let restarts = 0;
  const listeners = new Set<(e: RuntimeEndpoint) => void>();

  const env = () => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
    OPENCODE_SERVER_PASSWORD: password,
  });

  async function launch(): Promise<RuntimeEndpoint> {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const cmd = runtimeCommand(options.binary ?? opencodeBinary(), ['serve', '--port', '0', '--hostname', '127.0.0.1'], options.nice ?? 0);
    const proc = spawn(cmd.file, cmd.args, {
      cwd: root,
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    if (cmd.renice && proc.pid) {
      try {
        setPriority(proc.pid, options.nice!);
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'could not lower the agent runtime\'s CPU priority');
      }
    }
    let stderr = '';
    proc.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new UnavailableError(`the agent runtime did not start within ${START_TIMEOUT_MS / 1000} s`, { code: 'runtime_unavailable' }));
      }, START_TIMEOUT_MS);
      proc.stdout!.on('data', (d) => {
        out += d;
        const m = LISTENING.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new UnavailableError(`the agent runtime exited with ${code} while starting: ${stderr.trim().slice(-500)}`, { code: 'runtime_unavailable' }));
      });
    });
    // Listening is not yet serving: wait until the health route answers.
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      const res = await fetch(`${url}/global/health`, { headers: { authorization } }).catch(() => null);
      if (res?.ok) break;
      if (stopping || proc.exitCode !== null || proc.signalCode !== null) throw new UnavailableError('the agent runtime stopped while starting', { code: 'runtime_unavailable' });
      if (Date.now() > deadline) throw new UnavailableError('the agent runtime does not answer its health check', { code: 'runtime_unavailable' });
      await new Promise((r) => setTimeout(r, 100));
    }
    proc.once('exit', (code, signal) => {
      if (child !== proc) return;
      child = null;
      endpoint = null;
      if (stopping) return;
      log.error({ code, signal, stderr: stderr.trim().slice(-500) }, 'agent runtime exited; restarting');
      void restart();
    });
    endpoint = { url, authorization };
    log.info({ url, runtimePid: proc.pid, nice: options.nice ?? 0 }, 'agent runtime ready');
    return endpoint;
  }

  async function restart(): Promise<void> {
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(restarts++, 6));
    await new Promise((r) => setTimeout(r, delay));
    if (stopping) return;
    try {
      const e = await launch();
      restarts = 0;
      for (const l of listeners) l(e);
    } catch (err) {
      log.error({ err: (err as Error).message }, 'agent runtime failed to restart');
      if (!stopping) void restart();
    }
  }

  return {
    /** Starts the runtime and resolves once it answers its health check. */
    async start(): Promise<RuntimeEndpoint> {
      stopping = false;
      return endpoint ?? launch();
    },
    /** The current endpoint, or null while (re)starting or stopped. */
    get endpoint(): RuntimeEndpoint | null {
      return endpoint;
    },
    /** Whether an endpoint is worth waiting for: the runtime is starting or restarting, not stopped. */
    get coming(): boolean {
      return !stopping && endpoint === null;
    },
    get pid(): number | undefined {
      return child?.pid;
    },
    /** Called with the new endpoint after every automatic restart (streams must reconnect). */
    onRestart(listener: (e: RuntimeEndpoint) => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    /** Stops the runtime: SIGTERM, then SIGKILL after 5 s. */
    async stop(): Promise<void> {
      stopping = true;
      const proc = child;
      child = null;
      endpoint = null;
      if (!proc || proc.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
        proc.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        proc.kill('SIGTERM');
      });
    },
  };
}

export type ManagedRuntime = ReturnType<typeof createManagedRuntime>;
