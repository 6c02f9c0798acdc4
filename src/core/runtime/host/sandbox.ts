import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Writable } from 'node:stream';

/**
 * The OS sandbox around one user's runtime: a bubblewrap (bwrap) container with its own user, mount, pid,
 * network, IPC and UTS namespaces. opencode's permission rules are advice to a model an attacker may
 * steer; this is the boundary. What the agent inside can reach:
 *
 *   /workspace          the user's workspace (read-write): the only data of the appliance it sees
 *   /home/agent         the runtime's own home (read-write): its sessions database, caches; but not
 *                       opencode's configuration directories in it (~/.config/opencode, ~/.opencode),
 *                       which are read-only
 *   /etc/opencode       the service's configuration of the runtime (read-only; managed-config.ts)
 *   /srv/tenant         the tenant's shared files (read-only; promoted skills go there later)
 *   /run/agentws        two sockets: api.sock (the service reaches the runtime's API) and proxy.sock
 *                       (the runtime's only way out: the host-side egress proxy, see egress-proxy.ts)
 *   /usr, /bin, /lib... the system, read-only; a short list of /etc files (certificates, loader cache)
 *   /opt/agentws        the opencode binary and Node.js, read-only
 *   /tmp                scratch space (read-write): a tmpfs of a bounded size, its pages charged to the
 *                       runtime's memory cgroup; /var/tmp leads there, /dev/shm is a small one of its own
 *
 * and nothing else: not the data dir, the config file, the database, other users' workspaces, the
 * service's home, /proc of other processes, the host's network (only loopback inside its own namespace),
 * or user namespaces (--disable-userns: a nested one could remount what is hidden). Inside, the agent is
 * an unprivileged user (uid 1000) with no capabilities.
 *
 * Facts this relies on (bubblewrap 0.8, opencode 1.18.33): opencode serves inside such a sandbox and is
 * reached through a socat bridge from a Unix socket in a bound directory to 127.0.0.1:<port> inside; its
 * fetch honours HTTP(S)_PROXY, so model calls and web fetches leave through the proxy.
 */
export const SANDBOX_PATHS = {
  workspace: '/workspace',
  home: '/home/agent',
  tenant: '/srv/tenant',
  run: '/run/agentws',
  opt: '/opt/agentws',
  tmp: '/tmp',
} as const;

/** Inside the sandbox: the port opencode listens on, and the port the proxy bridge listens on. */
const INNER_API_PORT = 4096;
export const INNER_PROXY_PORT = 3128;
/** The unprivileged user the agent runs as inside. */
const SANDBOX_UID = 1000;
/** /dev/shm: POSIX shared memory and semaphores (Python's multiprocessing, Chromium) need little. */
const SHM_BYTES = 64 * 1024 * 1024;

/** System paths bound read-only when they exist: the usr-merged tree and what programs need of /etc. */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
const ETC_ENTRIES = [
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
  '/etc/crypto-policies',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/nsswitch.conf',
  '/etc/mime.types',
  '/etc/protocols',
  '/etc/services',
  '/etc/inputrc',
  '/etc/python3',
  '/etc/python3.11',
  '/etc/python3.12',
  '/etc/python3.13',
];

export interface SandboxSpec {
  /** Host directories bound at the fixed paths above. */
  workspace: string;
  home: string;
  tenant: string;
  run: string;
  /**
   * The size of /tmp (bytes): a tmpfs, so what the agent writes there is bounded by it and counted in the
   * runtime's memory (the kernel charges a tmpfs page to the cgroup of the process that wrote it), never
   * on the host's disk.
   */
  tmpBytes: number;
  /** Synthetic /etc/passwd, /etc/group and /etc/hosts for the sandbox user (host files, bound read-only). */
  etcDir: string;
  /** The opencode binary (host path), bound at /opt/agentws/bin/opencode. */
  opencode: string;
  /** Directory holding the node binary (host path), bound at /opt/agentws/node/bin; null: none. */
  nodeBinDir: string | null;
  /**
   * The prepared opencode config directory (an empty opencode.json, the plugin's node_modules, package.json,
   * package-lock.json), bound read-only as ~/.config/opencode and ~/.opencode.
   */
  pluginDir: string;
  /** The runtime's managed configuration (the host writes it), bound read-only at /etc/opencode. */
  managedConfig: string;
  /** The whole environment inside (bwrap starts from an empty one). */
  env: Record<string, string>;
  /** What runs inside (argv). */
  command: string[];
}

/** How the host's filesystem looks, for bwrapArgs (tests pass their own). */
export interface HostFs {
  exists(path: string): boolean;
  /** The symlink's target when path is a symlink, else null. */
  symlink(path: string): string | null;
}

const hostFs: HostFs = {
  exists: (p) => existsSync(p),
  symlink: (p) => {
    try {
      return lstatSync(p).isSymbolicLink() ? readlinkSync(p) : null;
    } catch {
      return null;
    }
  },
};

/** opencode's configuration directories inside: its global one (XDG), its home one, its managed one. */
export const OPENCODE_DIRS = {
  global: `${SANDBOX_PATHS.home}/.config/opencode`,
  home: `${SANDBOX_PATHS.home}/.opencode`,
  managed: '/etc/opencode',
} as const;

/**
 * The bwrap command line for a spec: pure, so what the sandbox contains can be read (and tested) here.
 * Order matters to bwrap: mounts are applied in order, later ones on top of earlier ones.
 */
export function bwrapArgs(spec: SandboxSpec, fs: HostFs = hostFs): string[] {
  const a: string[] = [
    '--unshare-all', // user (try), ipc, pid, net, uts, cgroup
    '--unshare-user', // required, not "try": without it there is no --disable-userns and no uid mapping
    '--disable-userns',
    '--die-with-parent', // the runtime never outlives the service that started it
    '--new-session', // no controlling terminal to inject keystrokes into (TIOCSTI)
    '--cap-drop',
    'ALL',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_UID),
    '--hostname',
    'agentws',
  ];
  for (const dir of SYSTEM_DIRS) {
    const target = fs.symlink(dir);
    if (target !== null) a.push('--symlink', target, dir);
    else if (fs.exists(dir)) a.push('--ro-bind', dir, dir);
  }
  for (const entry of ETC_ENTRIES) if (fs.exists(entry)) a.push('--ro-bind', entry, entry);
  for (const file of ['passwd', 'group', 'hosts']) a.push('--ro-bind', join(spec.etcDir, file), `/etc/${file}`);
  a.push('--proc', '/proc', '--dev', '/dev');
  // Every place the agent can write is either counted against its disk quota (workspace, home, run) or a
  // bounded tmpfs counted in its memory. bwrap's /dev and a bare --tmpfs are writable tmpfs of half the
  // host's RAM: /dev/shm gets a small one of its own and /dev turns read-only (its device nodes are
  // mounts of their own: /dev/null still takes writes); /var holds only a link to /tmp.
  a.push('--size', String(SHM_BYTES), '--perms', '1777', '--tmpfs', '/dev/shm', '--remount-ro', '/dev');
  a.push('--tmpfs', '/var', '--symlink', '../tmp', '/var/tmp', '--remount-ro', '/var');
  a.push('--size', String(spec.tmpBytes), '--perms', '1777', '--tmpfs', SANDBOX_PATHS.tmp);
  a.push('--bind', spec.home, SANDBOX_PATHS.home);
  // opencode reads configuration (keys, and agents, commands, plugins, skills from folders) from its
  // global directory and ~/.opencode, and writes there when asked to: the agent, which runs as the same
  // user, could plant keys the service never set, in effect from the next reload on. Both are the
  // prepared directory, read-only (nothing in it but an empty opencode.json and the plugin manifest that
  // keeps opencode from npm-installing there). The service's configuration is the managed one, below.
  // ~/.config is bound onto itself first: a mount point cannot be renamed, and a renamed ~/.config would
  // let the agent make a writable ~/.config/opencode (the launcher checks it is a directory, not a link).
  a.push('--bind', join(spec.home, '.config'), `${SANDBOX_PATHS.home}/.config`);
  a.push('--ro-bind', spec.pluginDir, OPENCODE_DIRS.global);
  a.push('--ro-bind', spec.pluginDir, OPENCODE_DIRS.home);
  a.push('--bind', spec.workspace, SANDBOX_PATHS.workspace);
  a.push('--ro-bind', spec.tenant, SANDBOX_PATHS.tenant);
  a.push('--bind', spec.run, SANDBOX_PATHS.run);
  a.push('--ro-bind', spec.opencode, `${SANDBOX_PATHS.opt}/bin/opencode`);
  if (spec.nodeBinDir) a.push('--ro-bind', spec.nodeBinDir, `${SANDBOX_PATHS.opt}/node/bin`);
  // A directory, not the file: the host replaces the file by rename, which a file bind would not follow.
  a.push('--ro-bind', spec.managedConfig, OPENCODE_DIRS.managed);
  // The root is a tmpfs bwrap made writable to create the mount points above: without this the agent
  // could add files to /etc (ld.so.preload) and /opt/agentws/bin (first on PATH, shadowing git or sh).
  // Last of the mounts (nothing can be created under / after it); the binds keep their own flags.
  a.push('--remount-ro', '/');
  a.push('--clearenv');
  for (const [k, v] of Object.entries(spec.env)) a.push('--setenv', k, v);
  a.push('--chdir', SANDBOX_PATHS.workspace, '--', ...spec.command);
  return a;
}

/**
 * Starts bwrap for a spec. Inside, pid 1 is a fork of bwrap itself, readable by the agent: its
 * /proc/1/environ is the environment bwrap was started with (Node's spawn passes the service's own by
 * default: DATABASE_URL, AGENTWS_*) and its /proc/1/cmdline the argv (every host path and --setenv value).
 * So bwrap gets an empty environment and its options over a pipe (`--args 3`); only the command stays
 * in argv. stdio: stdin, stdout, stderr as for spawn.
 */
export function spawnSandbox(bwrap: string, spec: SandboxSpec, stdio: Array<'ignore' | 'pipe' | 'inherit'> = ['ignore', 'pipe', 'pipe'], fs: HostFs = hostFs, prefix: string[] = []): ChildProcess {
  const args = bwrapArgs(spec, fs);
  const sep = args.indexOf('--chdir') + 2; // bwrapArgs ends: --chdir <dir> -- <command...>
  if (args[sep] !== '--') throw new Error('bwrapArgs: unexpected shape');
  const options = args.slice(0, sep);
  const command = args.slice(sep + 1);
  // `prefix` (e.g. `nice -n 10`) execs bwrap: the pid stays bwrap's, the fds pass through.
  const argv = [...prefix, bwrap, '--args', '3', '--', ...command];
  const child = spawn(argv[0], argv.slice(1), { env: {}, stdio: [...stdio.slice(0, 3), 'pipe'] });
  const pipe = child.stdio[3] as Writable;
  pipe.on('error', () => {}); // bwrap failed before reading its options: the exit says why
  pipe.end(options.map((o) => `${o}\0`).join(''));
  return child;
}

/** PATH inside the sandbox: Node.js of the service first, then the system. */
export function sandboxPath(withNode: boolean): string {
  return [...(withNode ? [`${SANDBOX_PATHS.opt}/node/bin`] : []), `${SANDBOX_PATHS.opt}/bin`, '/usr/local/bin', '/usr/bin', '/bin'].join(delimiter);
}

/**
 * What runs inside: two socat bridges (the API socket to opencode's port; the proxy port to the proxy
 * socket), then opencode itself. Every process in the sandbox dies with it (own pid namespace).
 */
export function innerCommand(): string[] {
  const run = SANDBOX_PATHS.run;
  const script = [
    `socat UNIX-LISTEN:${run}/api.sock,fork,mode=600,unlink-early TCP:127.0.0.1:${INNER_API_PORT} 2>/dev/null &`,
    `socat TCP-LISTEN:${INNER_PROXY_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${run}/proxy.sock 2>/dev/null &`,
    `exec ${SANDBOX_PATHS.opt}/bin/opencode serve --port ${INNER_API_PORT} --hostname 127.0.0.1`,
  ].join('\n');
  return ['/bin/sh', '-c', script];
}

/** Synthetic /etc files: the sandbox user exists (git, ssh, python want a name), the host's users do not. */
export function sandboxEtcFiles(): Record<'passwd' | 'group' | 'hosts', string> {
  return {
    passwd: `root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nagent:x:${SANDBOX_UID}:${SANDBOX_UID}:agent:${SANDBOX_PATHS.home}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\nagent:x:${SANDBOX_UID}:\nnogroup:x:65534:\n`,
    hosts: '127.0.0.1 localhost agentws\n::1 localhost\n',
  };
}

export interface SandboxProbe {
  ok: boolean;
  /** Why not, and what the operator can do. */
  problem?: string;
  hint?: string;
  bwrap?: string;
  socat?: string;
}

/** Finds an executable on PATH (bwrap and socat are system packages). */
export function which(name: string, path = process.env.PATH ?? '/usr/bin:/bin'): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  for (const dir of ['/usr/bin', '/bin', '/usr/local/bin']) if (existsSync(join(dir, name))) return join(dir, name);
  return null;
}

/**
 * Checks, by starting one, that a sandbox can run here: bwrap and socat installed, user namespaces
 * allowed. Where it cannot, serve refuses to run agents (fail closed) and says how to fix it.
 */
export function probeSandbox(): SandboxProbe {
  const bwrap = which('bwrap');
  if (!bwrap) return { ok: false, problem: 'bubblewrap (bwrap) is not installed', hint: 'Install it: `sudo apt-get install bubblewrap` (the Debian/Ubuntu package; `./install.sh` does it).' };
  const socat = which('socat');
  if (!socat) return { ok: false, problem: 'socat is not installed', hint: 'Install it: `sudo apt-get install socat` (`./install.sh` does it).', bwrap };
  // --hostname as a runtime's sandbox has it: a container whose seccomp profile refuses sethostname
  // (podman's default without CAP_SYS_ADMIN) runs this bare sandbox but no runtime's.
  const r = spawnSync(bwrap, ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--hostname', 'agentws', '--ro-bind', '/usr', '/usr', ...['/bin', '/lib', '/lib64'].flatMap((d) => {
    const t = hostFs.symlink(d);
    return t !== null ? ['--symlink', t, d] : existsSync(d) ? ['--ro-bind', d, d] : [];
  }), '--proc', '/proc', '--dev', '/dev', '--', '/bin/sh', '-c', 'exit 0'], { encoding: 'utf8', timeout: 10_000 });
  if (r.status === 0) return { ok: true, bwrap, socat };
  const why = (r.stderr || r.error?.message || `exit ${r.status}`).trim();
  return {
    ok: false,
    bwrap,
    socat,
    problem: `bubblewrap cannot create a sandbox here: ${why}`,
    hint:
      'User namespaces must be allowed: `sudo sysctl -w kernel.unprivileged_userns_clone=1` (Debian), or on Ubuntu 24.04+ ' +
      '`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for bwrap); in a container, ' +
      'run it with the security options of templates/container/compose.yaml (docs/operating/containers.md: user namespaces, a fresh /proc, sethostname). AGENTWS_RUNTIME_SANDBOX=off runs agents without a sandbox (single-user trials only).',
  };
}
