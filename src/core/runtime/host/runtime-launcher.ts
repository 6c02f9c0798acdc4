import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { waitForProcessExit } from '../../../lib/process-state.js';
import { randomSecret } from '../../../lib/secrets.js';
import { UnavailableError } from '../../../kernel/errors.js';
import type { Logger } from '../../../kernel/logger.js';
import { OPENCODE_VERSION, nicePrefix, opencodeBinary } from './opencode-process.js';
import { MANAGED_GITCONFIG_FILE, managedConfigDir } from './managed-config.js';
import { INNER_PROXY_PORT, OPENCODE_DIRS, SANDBOX_PATHS, innerCommand, sandboxEtcFiles, sandboxPath, spawnSandbox, which } from './sandbox.js';
import { requestRuntime, type RuntimeEndpoint } from './runtime-transport.js';

/**
 * Starts one user's runtime (`opencode serve`) and hands back where it answers. Sandboxed (the default):
 * inside bubblewrap (sandbox.ts), reached through the Unix socket `run/api.sock` of its run directory,
 * leaving only through the egress proxy listening on `run/proxy.sock`. Unsandboxed (AGENTWS_RUNTIME_SANDBOX
 * =off, single-user trials): a plain child on a loopback port whose HTTP(S)_PROXY is the proxy's TCP
 * listener (advice the agent can ignore: without the sandbox nothing holds it).
 *
 * Facts this relies on (opencode 1.18.33): it prints `opencode server listening on http://...` once it
 * listens; `GET /global/health` answers once it serves; OPENCODE_DISABLE_MODELS_FETCH keeps it from
 * fetching models.dev at start (there is no network for it: models come from our configuration);
 * a config dir holding package.json + node_modules/@opencode-ai/plugin keeps it from running
 * `npm install` there; it runs glob and grep through `rg` from PATH (Debian's ripgrep) instead of
 * downloading one; OPENCODE_MODELS_PATH names the models.dev catalog it reads instead of the one built
 * into the binary (see runtimeEnv); it runs no npm install in a config directory it cannot write; it
 * reads its managed configuration from /etc/opencode, or the directory OPENCODE_TEST_MANAGED_CONFIG_DIR
 * names (managed-config.ts).
 */
const START_TIMEOUT_MS = 30_000;
/** The RAM a runtime's JavaScript engine is told of: the host's, at most 8 GiB (see runtimeEnv). */
const JS_RAM_BYTES = Math.min(totalmem(), 8 * 1024 ** 3);
const LISTENING = /opencode server listening on (http:\/\/\S+)/;
/** The sandbox's /tmp when the launcher is not told (AGENTWS_RUNTIME_TMP_SIZE's default). */
const DEFAULT_TMP_BYTES = 1024 ** 3;

export interface RuntimeDirs {
  /** The user's workspace (read-write inside, at /workspace). */
  workspace: string;
  /** The runtime's own files: home/, run/, tmp/, etc/, managed/ (per user, under the data dir; runtimeRoot). */
  root: string;
  /** The tenant's shared directory (read-only inside, at /srv/tenant). */
  tenant: string;
}

/**
 * What holds one runtime besides its sandbox: the cgroups its processes are born in and the largest file
 * they may write (both from runtime-limits.ts).
 */
export interface LaunchLimits {
  /** `cgroup.procs` files the runtime's first process joins before anything runs (runtime-cgroups.ts). */
  procs: readonly string[];
  /** RLIMIT_FSIZE of every process of the runtime (bytes); null: none. */
  fileSizeBytes: number | null;
}

/**
 * How badly the kernel's OOM killer wants a runtime's processes when the whole host (or the service's
 * cgroup, in a container) runs out of memory: well before the service's and PostgreSQL's (0). Raising it
 * needs no privilege; every process the agent starts inherits it. A preference, not a bound: the agent
 * may lower its own processes' score again down to the minimum a privileged process set (0 here: checked,
 * an agent in its sandbox set its shell back to 0), never below; the memory cgroups are the bound.
 */
export const RUNTIME_OOM_SCORE_ADJ = 500;

/**
 * The argv that runs before the sandbox (or the unsandboxed runtime): a shell that writes its own pid into
 * the runtime's cgroups, raises its OOM score, and execs the rest (prlimit for the file size, nice, bwrap),
 * so the runtime's first process is in its groups before it runs anything and every process after it is
 * born there; a fork bomb has nothing to escape through. It keeps its pid through every exec. Fails (exit
 * 125, the reason on stderr) when a group cannot be joined: a runtime never runs outside its limits.
 */
export function limitsPrefix(limits: LaunchLimits | null, prlimit = which('prlimit')): string[] {
  if (!limits) return [];
  const script = [
    'while [ "$1" != -- ]; do',
    '  echo $$ > "$1" || { echo "agentws: cannot join the runtime\'s cgroup $1" >&2; exit 125; }',
    '  shift',
    'done',
    'shift',
    `echo ${RUNTIME_OOM_SCORE_ADJ} > /proc/$$/oom_score_adj 2>/dev/null`,
    'exec "$@"',
  ].join('\n');
  const fsize = limits.fileSizeBytes && prlimit ? [prlimit, `--fsize=${Math.floor(limits.fileSizeBytes)}`, '--'] : [];
  return ['/bin/sh', '-c', script, 'agentws-limits', ...limits.procs, '--', ...fsize];
}

export interface LaunchedRuntime {
  endpoint: RuntimeEndpoint;
  /** The directory the runtime knows the workspace as (what `?directory=` must say). */
  directory: string;
  pid: number;
  /** Resolves when the runtime's process exits (with the tail of its stderr). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
  stop(): Promise<void>;
}

/**
 * The models.dev catalog a runtime reads (OPENCODE_MODELS_PATH), relative to its opencode config dir:
 * an empty one, in the plugin directory's node_modules, which the sandbox binds read-only (the agent
 * cannot put providers or models in it). See runtimeEnv for why.
 */
const MODELS_FILE = join('node_modules', '.agentws', 'models.json');

/**
 * What opencode writes into a config directory that lacks them (its global one at start, every one at
 * each load): in a read-only one, the write would fail (and the load with it, for the .gitignore).
 */
const CONFIG_DIR_FILES: Record<string, string> = {
  'opencode.json': `${JSON.stringify({ $schema: 'https://opencode.ai/config.json' }, null, 2)}\n`,
  '.gitignore': ['node_modules', 'package.json', 'package-lock.json', 'bun.lock', '.gitignore'].join('\n'),
};

/**
 * The opencode config directory, prepared once: what opencode would npm-install on first start, and an
 * empty configuration. Sandboxed runtimes get it read-only as their global and home config directories
 * (sandbox.ts); the service's configuration is their managed one.
 */
export function preparePluginDir(dataDir: string): string {
  const dir = join(dataDir, 'runtimes', 'plugin');
  const pkgDir = join(dir, 'node_modules', '@opencode-ai', 'plugin');
  // Apart from the manifest: a plugin directory prepared before the catalog (or these files) existed gets them too.
  if (!existsSync(join(dir, MODELS_FILE))) {
    mkdirSync(dirname(join(dir, MODELS_FILE)), { recursive: true });
    writeFileSync(join(dir, MODELS_FILE), '{}\n');
  }
  for (const [name, text] of Object.entries(CONFIG_DIR_FILES)) if (!existsSync(join(dir, name))) writeFileSync(join(dir, name), text);
  if (!existsSync(join(pkgDir, 'package.json'))) {
    mkdirSync(pkgDir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ dependencies: { '@opencode-ai/plugin': OPENCODE_VERSION } }, null, 2));
    writeFileSync(
      join(dir, 'package-lock.json'),
      JSON.stringify({ name: 'opencode-config', lockfileVersion: 3, requires: true, packages: { '': { dependencies: { '@opencode-ai/plugin': OPENCODE_VERSION } }, 'node_modules/@opencode-ai/plugin': { version: OPENCODE_VERSION } } }, null, 2),
    );
    // Only the manifest: opencode checks the dependency is installed; it loads no plugin of ours.
    writeFileSync(join(pkgDir, 'package.json'), JSON.stringify({ name: '@opencode-ai/plugin', version: OPENCODE_VERSION, type: 'module' }, null, 2));
  }
  return dir;
}

/**
 * The environment opencode runs with (inside the sandbox, or as a plain child). `managed`: the host
 * directory of its managed configuration, for an unsandboxed runtime (a sandboxed one has it at
 * /etc/opencode, where opencode looks by default).
 */
export function runtimeEnv(o: { home: string; password: string; proxy: string; path: string; tmp: string; managed?: string }): Record<string, string> {
  return {
    ...(o.managed ? { OPENCODE_TEST_MANAGED_CONFIG_DIR: o.managed } : {}),
    PATH: o.path,
    HOME: o.home,
    XDG_CONFIG_HOME: join(o.home, '.config'),
    XDG_DATA_HOME: join(o.home, '.local', 'share'),
    XDG_CACHE_HOME: join(o.home, '.cache'),
    XDG_STATE_HOME: join(o.home, '.local', 'state'),
    TMPDIR: o.tmp,
    LANG: 'C.UTF-8',
    OPENCODE_SERVER_PASSWORD: o.password,
    // Everything leaves through the egress proxy; model calls to the gateway host too.
    HTTP_PROXY: o.proxy,
    HTTPS_PROXY: o.proxy,
    http_proxy: o.proxy,
    https_proxy: o.proxy,
    NO_PROXY: 'localhost,127.0.0.1,::1',
    no_proxy: 'localhost,127.0.0.1,::1',
    // opencode is a Bun binary; Bun's garbage collector judges memory pressure by the RAM it is told of:
    // a JavaScript heap over 70 % of it means pressure, and under pressure it collects without end. Told
    // 256 MiB (as runtimes once were, to save memory), a runtime whose heap grew past ~180 MiB in a turn
    // burned 20-85 % of a core for as long as it lived idle. Told the host's RAM but at most 8 GiB, an
    // idle runtime after a turn uses half the CPU it uses when told all of a larger host's (1.6 against
    // 3.2-4.0 % of a core after a tool-calling turn here, 24 GiB; 3 GiB measured the same as 8), and its
    // heap would need 5.6 GiB to reach pressure. runtime-pool benchmark and test/integration/runtime-idle.
    BUN_JSC_forceRAMSize: String(JS_RAM_BYTES),
    // No FTL, JavaScriptCore's top tier (its LLVM-like compiler, on the JIT worker threads): a runtime's
    // start compiled code in it that ran only while opencode loaded (its JIT workers used ~0.5 s of CPU
    // before the first answer, ~0.3 s without it), and its turns are too short to earn the compiles back.
    // Measured side by side in six runs (runtime-cold benchmark, a loaded 2-core VM): exec -> first text
    // -0.13 to -0.7 s (median -0.36), CPU to it -0.12 to -0.55 s; later turns of 200 and 2000 words
    // 3-91 ms faster; idle CPU within the spread (1.0-1.15 % of a core either way); RSS / PSS of an idle
    // runtime ~+7 / +9 MB (2-3 %). Without the DFG too (only the baseline JIT) the start was as fast but
    // turns of 2000 words took +57 %.
    BUN_JSC_useFTLJIT: '0',
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    // An empty models.dev catalog instead of the one built into the binary (every provider and model
    // models.dev knows, ~4.4 MB of source): the runtime decodes that catalog at its first prompt, ~1 s of
    // the ~1.6 s it took from the prompt to the model request (2.2 s of CPU; with the empty one 0.6 s
    // and 0.7 s), for nothing: our providers' ids (aws_<tenant>_<name>) are not in it, each is
    // described whole by our configuration, and enabled_providers leaves out every other. The model
    // request was byte for byte the same with either catalog.
    OPENCODE_MODELS_PATH: join(o.home, '.config', 'opencode', MODELS_FILE),
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    // No file watcher: it watches the workspace's .git directory for opencode's own interface (nothing of
    // the service reads its events; what a turn changed comes from the snapshots), with two inotify
    // instances per runtime, and inotify instances are counted per user on the host (128 by default:
    // fs.inotify.max_user_instances), whatever the sandbox's user namespace. The 65th runtime on a host
    // could not make its watcher, and its first turn hung before the model was asked (runtime-waves with
    // paged-out runtimes, 80 people). Without it, a runtime holds none, and inotify stays for the agent's
    // own tools.
    OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER: 'true',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    // Its built-in plugins sign in to and adapt particular providers (Codex, GitHub Copilot, GitLab,
    // Poe, Cloudflare, Azure, DigitalOcean, Snowflake, xAI, Cerebras), matched by their provider ids or
    // SDK packages, never ours; loading them (the Azure one looks for an `az` program) cost the first
    // prompt ~60 ms of CPU.
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    // Nor any other plugin: the service configures none, so a plugin named anywhere (a planted file or
    // configuration, see managed-config.ts) is code the agent put there, run inside opencode.
    OPENCODE_PURE: '1',
    // Only the service's configuration applies: no opencode.json, .opencode/ directory (skills, agents,
    // plugins) or AGENTS.md is read from the workspace, so a repository the agent clones cannot change
    // its rules or tools, or offer it a skill; nor are skills read from ~/.claude or ~/.agents.
    OPENCODE_DISABLE_PROJECT_CONFIG: '1',
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
    OPENCODE_DISABLE_SHARE: '1',
    // Credentials opencode would otherwise read from ~/.local/share/opencode/auth.json, which the agent
    // can write: an entry of type "wellknown" makes opencode fetch configuration from the URL it names at
    // each load. Our providers carry their credential in the configuration; none is needed from there.
    OPENCODE_AUTH_CONTENT: '{}',
    // git's system config is the service's (managed-config.ts): the tenant's git hosts through the git
    // gateway. Read-only inside; the agent could point git elsewhere, but only away from the gateway.
    GIT_CONFIG_SYSTEM: join(o.managed ?? OPENCODE_DIRS.managed, MANAGED_GITCONFIG_FILE),
    GIT_AUTHOR_NAME: 'agent',
    GIT_AUTHOR_EMAIL: 'agent@agentws.invalid',
    GIT_COMMITTER_NAME: 'agent',
    GIT_COMMITTER_EMAIL: 'agent@agentws.invalid',
  };
}

export function createRuntimeLauncher(options: {
  dataDir: string;
  sandbox: boolean;
  nice: number;
  log: Logger;
  binary?: string;
  /** Size of the sandbox's /tmp (a tmpfs), bytes (AGENTWS_RUNTIME_TMP_SIZE). */
  tmpBytes?: number;
  /** Added to (or overriding) runtimeEnv: a variant of the runtime's environment under measurement (the runtime-cold benchmark). */
  extraEnv?: Record<string, string>;
}) {
  const { log } = options;

  /** Directories of a runtime, created private to the service user. */
  function prepare(dirs: RuntimeDirs) {
    const d = { home: join(dirs.root, 'home'), run: join(dirs.root, 'run'), tmp: join(dirs.root, 'tmp'), etc: join(dirs.root, 'etc'), managed: managedConfigDir(dirs.root) };
    for (const p of [dirs.root, d.home, d.run, d.tmp, d.etc, d.managed, dirs.workspace, dirs.tenant]) mkdirSync(p, { recursive: true, mode: 0o700 });
    if (options.sandbox) resetConfigMountPoints(d.home);
    for (const [name, text] of Object.entries(sandboxEtcFiles())) writeFileSync(join(d.etc, name), text, { mode: 0o644 });
    // Stale sockets of a previous run: socat recreates api.sock; the proxy must be able to bind proxy.sock.
    for (const s of ['api.sock', 'proxy.sock']) rmSync(join(d.run, s), { force: true });
    chmodSync(dirs.tenant, 0o755);
    return d;
  }

  /**
   * Starts the runtime. `proxy` is called with where the egress proxy must listen before the runtime
   * starts (it is the runtime's only way out, so it must be there first).
   */
  async function launch(dirs: RuntimeDirs, proxy: (at: { path: string } | { port: number }) => Promise<{ port?: number }>, limits: LaunchLimits | null = null): Promise<LaunchedRuntime> {
    const d = prepare(dirs);
    const password = randomSecret(24);
    const binary = options.binary ?? opencodeBinary();
    let endpoint: RuntimeEndpoint;
    let directory: string;
    let proc: ChildProcess;
    if (options.sandbox) {
      await proxy({ path: join(d.run, 'proxy.sock') });
      const nodeBinDir = dirname(process.execPath);
      const spec = {
        workspace: dirs.workspace,
        home: d.home,
        tenant: dirs.tenant,
        run: d.run,
        tmpBytes: options.tmpBytes ?? DEFAULT_TMP_BYTES,
        etcDir: d.etc,
        opencode: binary,
        nodeBinDir,
        pluginDir: preparePluginDir(options.dataDir),
        managedConfig: d.managed,
        env: { ...runtimeEnv({ home: SANDBOX_PATHS.home, password, proxy: `http://127.0.0.1:${INNER_PROXY_PORT}`, path: sandboxPath(true), tmp: SANDBOX_PATHS.tmp }), ...options.extraEnv },
        command: innerCommand(),
      };
      const bwrap = which('bwrap');
      if (!bwrap) throw new UnavailableError('bubblewrap (bwrap) is not installed: agents cannot run contained', { code: 'sandbox_unavailable', hint: 'Install it (`sudo apt-get install bubblewrap socat ripgrep`; `./install.sh` does it).' });
      // Options reach bwrap on a pipe and its environment is empty: the sandbox's pid 1 (a bwrap) shows
      // the agent neither the host's paths nor the service's environment in /proc/1.
      proc = spawnSandbox(bwrap, spec, ['ignore', 'pipe', 'pipe'], undefined, [...limitsPrefix(limits), ...nicePrefix(options.nice)]);
      // Filled in once the sandbox exists (see innerPid).
      endpoint = { socketPath: '', authorization: basic(password) };
      directory = SANDBOX_PATHS.workspace;
    } else {
      const { port } = await proxy({ port: 0 });
      const argv = [...limitsPrefix(limits), ...nicePrefix(options.nice), binary, 'serve', '--port', '0', '--hostname', '127.0.0.1'];
      const env = { ...runtimeEnv({ home: d.home, password, proxy: `http://127.0.0.1:${port}`, path: process.env.PATH ?? '/usr/bin:/bin', tmp: d.tmp, managed: d.managed }), ...options.extraEnv };
      // Filled in from the line it prints.
      endpoint = { url: '', authorization: basic(password) };
      directory = dirs.workspace;
      mkdirSync(join(d.home, '.config'), { recursive: true });
      linkPlugin(preparePluginDir(options.dataDir), join(d.home, '.config', 'opencode'));
      // Nothing holds the agent here, but the service's configuration is the managed file only: what the
      // runtime wrote into its global one (the service's, before it had a managed file) goes.
      resetGlobalConfig(join(d.home, '.config', 'opencode'));
      proc = spawn(argv[0], argv.slice(1), { cwd: dirs.workspace, env, stdio: ['ignore', 'pipe', 'pipe'] });
    }

    /** The sandbox's own first process (bwrap's child): the runtime's API is reached through its root. */
    let inner: number | null = null;
    let stderr = '';
    proc.stderr!.on('data', (c) => (stderr = (stderr + c).slice(-4000)));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal, stderr })));
    try {
      const url = await listening(proc, () => stderr);
      if (!options.sandbox) endpoint = { url, authorization: endpoint.authorization };
      else {
        inner = innerPid(proc.pid!);
        endpoint = { socketPath: `/proc/${inner}/root${SANDBOX_PATHS.run}/api.sock`, authorization: endpoint.authorization };
      }
      await healthy(endpoint, proc);
    } catch (err) {
      proc.kill('SIGKILL');
      throw err;
    }
    log.info({ runtimePid: proc.pid, sandboxed: options.sandbox }, 'agent runtime ready');
    return {
      endpoint,
      directory,
      pid: proc.pid!,
      exited,
      async stop() {
        if (proc.exitCode !== null || proc.signalCode !== null) return;
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
        proc.kill('SIGTERM');
        await exited;
        clearTimeout(timer);
        // bwrap is gone; the processes inside are killed as it dies (--die-with-parent), a moment later:
        // until then the runtime could still answer. Stopped means nothing answers any more.
        if (inner !== null) await waitForProcessExit(inner, 3000, 10);
      },
    };
  }

  return { launch, prepare };
}

export type RuntimeLauncher = ReturnType<typeof createRuntimeLauncher>;

const basic = (password: string) => `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}`;

/** Unsandboxed: the plugin dir's files, copied into the runtime's own config dir (no npm install). */
export function linkPlugin(pluginDir: string, configDir: string): void {
  mkdirSync(join(configDir, 'node_modules', '@opencode-ai', 'plugin'), { recursive: true });
  mkdirSync(dirname(join(configDir, MODELS_FILE)), { recursive: true });
  for (const f of ['package.json', 'package-lock.json', join('node_modules', '@opencode-ai', 'plugin', 'package.json'), MODELS_FILE]) {
    const to = join(configDir, f);
    if (!existsSync(to)) writeFileSync(to, readFileSync(join(pluginDir, f)));
  }
}

/**
 * The mount points of opencode's config directories in a sandboxed runtime's home (sandbox.ts), made
 * directories again before it starts: the agent owned the home while its last sandbox ran. bwrap resolves
 * the host side of a bind on the host, so a symlink planted at ~/.config would bind whatever it points
 * to into the sandbox, writable. Their contents stay: the read-only binds hide them.
 */
function resetConfigMountPoints(home: string): void {
  for (const p of [join(home, '.config'), join(home, '.config', 'opencode'), join(home, '.opencode')]) {
    if (lstatSync(p, { throwIfNoEntry: false })?.isDirectory()) continue;
    rmSync(p, { recursive: true, force: true });
    mkdirSync(p, { mode: 0o700 });
  }
}

/** An unsandboxed runtime's global config files, emptied (see the launch). */
function resetGlobalConfig(configDir: string): void {
  for (const f of ['opencode.jsonc', 'config.json']) rmSync(join(configDir, f), { force: true });
  writeFileSync(join(configDir, 'opencode.json'), CONFIG_DIR_FILES['opencode.json']);
}

function listening(proc: ChildProcess, stderr: () => string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new UnavailableError(`the agent runtime did not start within ${START_TIMEOUT_MS / 1000} s`, { code: 'runtime_unavailable' })), START_TIMEOUT_MS);
    proc.stdout!.on('data', (c) => {
      out += c;
      const m = LISTENING.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new UnavailableError(`the agent runtime exited (${code ?? signal}) while starting: ${stderr().trim().slice(-500)}`, { code: 'runtime_unavailable' }));
    });
  });
}

/**
 * The sandbox's first process (bwrap's child). The API socket is reached as seen from inside the
 * sandbox, through /proc/<that pid>/root, so the path resolves in the sandbox's own filesystem. The run
 * directory is writable inside (socat creates the socket there); the agent could replace api.sock with a
 * symlink to a socket of the host (PostgreSQL's, Docker's) and have the service connect to it. Resolved
 * in here, such a link leads nowhere: the host's paths do not exist inside.
 */
function innerPid(bwrapPid: number): number {
  const children = readFileSync(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  if (!children.length) throw new UnavailableError('the sandbox has no process inside', { code: 'runtime_unavailable' });
  return Number(children[0]);
}

/** Listening is not yet serving (and the socket bridge may be up before opencode): wait for its health route. */
async function healthy(endpoint: RuntimeEndpoint, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const r = await requestRuntime(endpoint, 'GET', '/global/health', { timeoutMs: 2000 }).catch(() => null);
    if (r?.status === 200) return;
    if (proc.exitCode !== null || proc.signalCode !== null) throw new UnavailableError('the agent runtime stopped while starting', { code: 'runtime_unavailable' });
    if (Date.now() > deadline) throw new UnavailableError('the agent runtime does not answer its health check', { code: 'runtime_unavailable' });
    await new Promise((r) => setTimeout(r, 50));
  }
}
