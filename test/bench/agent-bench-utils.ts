/**
 * Helpers of the agent benchmarks (sse-fanout, prompt-latency, sse-memory, runtime-pool): the processes
 * they start (always stopped, also when the bench fails or is interrupted), API calls with the service
 * API key, users' sandboxed runtimes found from serve's process tree, a bare opencode for baselines, and
 * a cheap raw-http SSE client for a thousand concurrent streams.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { opencodeBinary } from '../../src/core/runtime/host/opencode-process.js';
import { linkPlugin, preparePluginDir, runtimeEnv } from '../../src/core/runtime/host/runtime-launcher.js';
import { processStatFields } from '../../src/lib/process-state.js';
import { cpuMs, descendantsOf, processTree, treeMemoryKb } from '../helpers/process-tree.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { pinned } from './bench-utils.js';
import { spawnUntil, startServe, stopChild } from '../helpers/cli.js';
import { waitUntil } from '../helpers/poll.js';
import { sseFrameSplitter } from '../fixtures/sse-frames.js';

// The /proc readers live with the test helpers (tests catch regressions with the same measurements).
export { cpuMs, descendantsOf, processTree, treeMemoryKb };

// ---------------------------------------------------------------------------------------------------
// Processes: everything a bench starts is registered here and stopped by stopAll(), which the bench
// calls in `finally`; if the runner itself dies (exception, Ctrl-C, SIGTERM) the rest are SIGKILLed.

const live = new Set<{ child?: ChildProcess; pid?: number; name: string }>();

export function track(name: string, child: ChildProcess): ChildProcess {
  const entry = { child, name };
  live.add(entry);
  child.once('exit', () => live.delete(entry));
  return child;
}

const kill = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
};

function killNow() {
  for (const e of live) {
    if (e.child?.pid && e.child.exitCode === null && e.child.signalCode === null) {
      for (const d of descendantsOf(e.child.pid)) kill(d, 'SIGKILL');
      kill(e.child.pid, 'SIGKILL');
    } else if (e.pid) kill(e.pid, 'SIGKILL');
  }
  live.clear();
}
process.once('exit', killNow);
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    killNow();
    process.exit(130);
  });
}

/**
 * Stops tracked processes gracefully (all of them, or those given), last started first: SIGTERM (serve
 * stops its managed runtime itself), SIGKILL after 15 s; a descendant still alive after its parent
 * exited is killed.
 */
export async function stopAll(only?: ChildProcess[]): Promise<void> {
  // Spawned processes last-started first; bare pids (children of those, normally gone by then) at the end.
  const entries = [...live]
    .filter((e) => !only || (e.child && only.includes(e.child)))
    .reverse()
    .sort((a, b) => Number(!a.child) - Number(!b.child));
  for (const e of entries) {
    if (e.child?.pid) {
      const c = e.child;
      const family = descendantsOf(c.pid!);
      await stopChild(c, 'SIGTERM', 15_000);
      if (family.length) await new Promise((r) => setTimeout(r, 200));
      for (const d of family) kill(d, 'SIGKILL');
    } else if (e.pid) {
      await new Promise((r) => setTimeout(r, 200));
      kill(e.pid, 'SIGKILL');
    }
    live.delete(e);
  }
}

/** Prints the last lines of the logs of a failed bench's processes to stderr (the folder is deleted afterwards). */
export function dumpLogs(files: string[], lines = 15): void {
  for (const f of files) {
    try {
      const tail = readFileSync(f, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
      process.stderr.write(`--- last lines of ${f}\n${tail}\n`);
    } catch {
      // no such log
    }
  }
}

/** Removes a bench's folder, unless BENCH_KEEP_DIR is set (then says where it is, logs included). */
export function removeDir(dir: string): void {
  if (process.env.BENCH_KEEP_DIR) process.stderr.write(`  (kept ${dir})\n`);
  else rmSync(dir, { recursive: true, force: true });
}

/**
 * What one runtime holds of the host's memory (kB): its sandbox's processes' PSS, and their SwapPss times
 * `poolRatio`, the RAM a zram pool spends per byte it stores (mm_stat's mem_used_total / orig_data_size;
 * 0 for swap on a disk, which costs no RAM). A paged-out runtime's figure counts its share of the pool.
 */
export function heldKb(sandboxPid: number, tree: Map<number, number[]>, poolRatio: number): { pss: number; swapPss: number; poolKb: number; held: number } {
  const m = treeMemoryKb(sandboxPid, tree);
  const poolKb = m.swapPss * poolRatio;
  return { pss: m.pss, swapPss: m.swapPss, poolKb, held: m.pss + poolKb };
}

/** Resident set size of one process (VmRSS, kB), from /proc; its children are not included. */
export function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

/** Niceness of a process (field 19 of /proc/<pid>/stat). */
export function niceOf(pid: number): number {
  return Number(statOf(pid)[16]);
}

function statOf(pid: number): string[] {
  const fields = processStatFields(pid);
  if (!fields) throw new Error(`no process ${pid}`);
  return fields;
}

/**
 * Like bench-utils' pinned() (which also pins this process to CPU 1), but for helpers that belong on the
 * measuring side: runs cmd on CPU 1. No-op where pinning is not possible.
 */
export function onCpu1(cmd: string, args: string[]): [string, string[]] {
  const [c, a] = pinned(cmd, args);
  return c === 'taskset' ? ['taskset', ['-c', '1', cmd, ...args]] : [c, a];
}

/** The 1, 5 and 15 minute load averages: the machine's other work, which these figures depend on. */
export function loadAvg(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

/**
 * Scheduler statistics of a process's main thread (the event loop), from /proc/<pid>/task/<pid>/schedstat:
 * time on a CPU and time spent runnable but waiting for one (ms). Waiting time shows CPU starvation.
 */
export function schedMs(pid: number): { run: number; wait: number } {
  const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
  return { run: run / 1e6, wait: wait / 1e6 };
}

export function configValue(config: string, key: string): string {
  const m = new RegExp(`^${key}=(.*)$`, 'm').exec(config);
  if (!m) throw new Error(`${key} is not in the config`);
  return m[1].trim().replace(/^["']|["']$/g, '');
}

// ---------------------------------------------------------------------------------------------------
// The API, as an API client with the service key (acts as the operator user, an owner).

export interface Api {
  base: string;
  key: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any; text: string }>;
}

export function apiOf(base: string, key: string): Api {
  return {
    base,
    key,
    async call(method, path, body) {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: res.status, json, text };
    },
  };
}

/** Waits until serve says agents can run on its host (`/readyz` agents.available). */
export async function waitAgentsAvailable(api: Api, timeoutMs = 60_000): Promise<void> {
  let last: unknown;
  await waitUntil(
    () => `agents to be available on the bench serve: ${JSON.stringify(last)}`,
    async () => {
      const r = await fetch(`${api.base}/readyz`).then(async (res) => ({ status: res.status, json: (await res.json()) as any }), () => null);
      last = r?.json;
      return r?.status === 200 && r.json.agents?.available === true;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** Registers the scripted model (OpenAI-compatible server at llmUrl) and applies it as the default model. */
export async function applyScriptedModel(api: Api, llmUrl: string): Promise<void> {
  const add = await api.call('POST', '/v1/admin/providers', {
    name: 'scripted',
    kind: 'openai-compatible',
    baseUrl: `${llmUrl}/v1`,
    apiKey: 'sk-scripted',
    models: [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096, inputCostPerMTok: 2, outputCostPerMTok: 8 }],
  });
  if (add.status !== 201) throw new Error(`provider: ${add.status} ${add.text}`);
  const apply = await api.call('POST', '/v1/admin/runtime/apply', { defaultModel: 'scripted/fake-model' });
  if (apply.status !== 200 || !apply.json.pushed) throw new Error(`apply: ${apply.status} ${apply.text}`);
}

/** Creates n sessions, `parallel` requests at a time. */
export async function createSessions(api: Api, n: number, prefix: string, parallel = 10): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += parallel) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(parallel, n - i) }, async (_, j) => {
        const r = await api.call('POST', '/v1/sessions', { title: `${prefix} ${i + j}` });
        if (r.status !== 201) throw new Error(`create session: ${r.status} ${r.text}`);
        return r.json.sessionId as string;
      }),
    );
    ids.push(...batch);
  }
  return ids;
}

/**
 * One user's sandboxed runtime as the host sees it: the sandbox's outermost process (a child of serve),
 * the opencode process inside, and its API (the Unix socket inside the sandbox, reached through the
 * opencode process's root, with the password from its environment). The bench is the machine's
 * administrator here; the service itself keeps these in `agent_runtimes`.
 */
export interface UserRuntime {
  sandboxPid: number;
  pid: number;
  socketPath: string;
  authorization: string;
}

const commOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

/** The sandboxed runtimes serve (servePid) runs now. */
export function runtimesOf(servePid: number): UserRuntime[] {
  const out: UserRuntime[] = [];
  const tree = processTree();
  for (const pid of tree.get(servePid) ?? []) {
    if (commOf(pid) !== 'bwrap') continue;
    const oc = descendantsOf(pid, tree).find((d) => commOf(d) === 'opencode');
    if (!oc) continue;
    let env: string[];
    try {
      env = readFileSync(`/proc/${oc}/environ`, 'latin1').split('\0');
    } catch {
      continue; // exited meanwhile
    }
    const password = env.find((e) => e.startsWith('OPENCODE_SERVER_PASSWORD='))?.slice('OPENCODE_SERVER_PASSWORD='.length);
    if (!password) continue;
    const socketPath = `/proc/${oc}/root/run/agentws/api.sock`;
    if (!existsSync(socketPath)) continue; // not listening yet
    out.push({ sandboxPid: pid, pid: oc, socketPath, authorization: `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}` });
  }
  return out;
}

/**
 * Waits until serve runs at least n runtimes; returns them. Connect to one only once it has answered
 * serve (its first turn ended): connections from this process to a runtime still starting were seen to
 * leave later ones from this process unanswered (not understood; other processes were answered).
 */
export async function waitRuntimes(servePid: number, n: number, timeoutMs = 60_000): Promise<UserRuntime[]> {
  let found: UserRuntime[] = [];
  return waitUntil(
    () => `${n} runtimes (serve runs ${found.length})`,
    () => {
      found = runtimesOf(servePid);
      return found.length >= n && found;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/**
 * A bare opencode runtime (the binary the service ships with), outside any sandbox and without the
 * service: the environment a user's runtime gets (runtimeEnv, with its plugin directory prepared, so
 * nothing is downloaded), loopback, port 0. The baseline of the runtime benchmarks. `extraEnv` is added
 * to (or overrides) that environment: a variant under test (runtime-memory).
 */
export async function startOpencode(
  dir: string,
  wrap: (cmd: string, args: string[]) => [string, string[]] = (c, a) => [c, a],
  extraEnv: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; password: string; authorization: string }> {
  const home = join(dir, 'home');
  const tmp = join(dir, 'tmp');
  for (const d of [home, tmp]) mkdirSync(d, { recursive: true, mode: 0o700 });
  linkPlugin(preparePluginDir(dir), join(home, '.config', 'opencode'));
  const password = randomSecret(24);
  // No proxy listens there: the bare runtime has nowhere to go, which is all a baseline needs.
  const env = { ...runtimeEnv({ home, password, proxy: 'http://127.0.0.1:9', path: process.env.PATH ?? '/usr/bin:/bin', tmp }), ...extraEnv };
  const { child, value: url } = await spawnUntil(...wrap(opencodeBinary(), ['serve', '--port', '0', '--hostname', '127.0.0.1']), { cwd: dir, env }, (line) => /opencode server listening on (http:\/\/\S+)/.exec(line)?.[1]);
  track('opencode', child);
  const authorization = `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}`;
  await waitUntil('opencode to answer its health check', async () => (await fetch(`${url}/global/health`, { headers: { authorization } }).catch(() => null))?.ok, { intervalMs: 100 });
  return { child, url, password, authorization };
}

// ---------------------------------------------------------------------------------------------------
// SSE clients: raw http.get (a Unix socket too) and the tests' frame splitter, so a thousand streams cost
// the measuring side little CPU (no fetch/WHATWG streams, no JSON parsing of our frames).

export interface SseStream {
  /** Frame ids in arrival order and their arrival times (performance.now(), ms; the time the chunk holding the frame's end was read). */
  ids: string[];
  times: number[];
  /** Bytes received. */
  bytes: number;
  status: number;
  ended: boolean;
  close(): void;
}

/**
 * Opens one SSE stream. `onData` (optional) gets each frame's `data:` text (for streams whose payload
 * must be read, like the runtime's own, whose frames have no `id:` line); otherwise only `id:` lines are
 * looked at. With `socketPath` the request goes over that Unix socket (a sandboxed runtime's API).
 */
export function openStream(url: string, headers: Record<string, string>, onData?: (data: string, t: number) => void, socketPath?: string): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const s: SseStream = { ids: [], times: [], bytes: 0, status: 0, ended: false, close: () => req.destroy() };
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false, ...(socketPath ? { socketPath } : {}) }, (res) => {
      s.status = res.statusCode ?? 0;
      if (s.status !== 200) {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => reject(new Error(`SSE ${url}: HTTP ${s.status} ${body.slice(0, 300)}`)));
        return;
      }
      res.socket.setNoDelay(true);
      // The chunk's arrival time is taken before it is split: its frames carry that time.
      let t = 0;
      const push = sseFrameSplitter((frame) => {
        if (onData) {
          // A frame without data (our stream's `retry:` and `: connected` preamble, comments) is skipped.
          if (frame.data !== null) onData(frame.data, t);
        } else if (frame.id !== undefined) {
          s.ids.push(frame.id);
          s.times.push(t);
        }
      });
      res.on('data', (chunk: Buffer) => {
        t = performance.now();
        s.bytes += chunk.length;
        push(chunk);
      });
      res.on('end', () => (s.ended = true));
      res.on('error', () => (s.ended = true));
      resolve(s);
    });
    req.on('error', (err) => {
      s.ended = true;
      if (!s.status) reject(err);
    });
  });
}

/** Opens many streams, `parallel` at a time. */
export async function openStreams(urls: string[], headers: Record<string, string>, parallel = 50): Promise<SseStream[]> {
  const out: SseStream[] = new Array(urls.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < urls.length) {
        const i = next++;
        out[i] = await openStream(urls[i], headers);
      }
    }),
  );
  return out;
}

/** `aws worker` on the config of a bench serve (same extra environment), pinned like serve; resolves once started. */
export async function startWorkerProcess(bin: string, serveDir: string, extraEnv: Record<string, string> = {}): Promise<ChildProcess> {
  const worker = await startServe({ dir: serveDir, configPath: join(serveDir, 'config.env') }, { bin, command: ['worker'], readyMsg: 'worker started', extraEnv, wrap: pinned, logFile: join(serveDir, 'worker.log') });
  return track('aws worker', worker.child);
}

/** Runtime variants named on the command line: "name:VAR=value,VAR=value;name2:..." (a bench's _EXTRA). */
export function envVariants(spec: string | undefined): Array<{ name: string; env: Record<string, string> }> {
  if (!spec) return [];
  return spec
    .split(';')
    .filter(Boolean)
    .map((v) => {
      const [name, vars = ''] = v.split(':');
      return { name, env: Object.fromEntries(vars.split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])) };
    });
}
