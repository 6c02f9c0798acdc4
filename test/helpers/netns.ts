import { execFileSync, spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * Several "machines" on one: each host is a network namespace joined to a bridge in the root namespace
 * by a veth pair, on a /24 of its own. The control plane stays in the root namespace (PostgreSQL on its
 * 127.0.0.1, servers on the bridge address); a host reaches it only over its link, at the bridge
 * address, and never the root's loopback. Hosts share the filesystem and /proc (tests give each its own
 * data dir). Everything is named with a per-run suffix under PREFIX and swept at the next setup.
 */
const PREFIX = 'awsnt';

export interface NetHost {
  name: string;
  ns: string;
  address: string;
  veth: string;
}

export interface Network {
  controlAddress: string;
  hosts: Map<string, NetHost>;
  /** Starts a long-running process inside the host's namespace. */
  exec(host: string, argv: string[], options?: SpawnOptions): ChildProcess;
  /** Runs a command inside the host's namespace to completion (without blocking this process's servers). */
  run(host: string, argv: string[], options?: { env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Takes the host's link down (a partition) / up again. */
  cut(host: string): void;
  restore(host: string): void;
  destroy(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();

/** Whether this machine can make namespaces (root, iproute2); the reason when not. */
export function netnsAvailable(): { ok: true } | { ok: false; reason: string } {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'network namespaces need root' };
  const r = spawnSync('ip', ['netns', 'list']);
  if (r.error || r.status !== 0) return { ok: false, reason: `ip netns does not work here: ${r.error?.message ?? r.stderr.toString().trim()}` };
  return { ok: true };
}

/** Removes what earlier runs of this harness left behind (a killed test cannot clean up after itself). */
export function sweepNetworks(): void {
  for (const line of spawnSync('ip', ['netns', 'list']).stdout.toString().split('\n')) {
    const ns = line.split(' ')[0];
    if (ns.startsWith(`${PREFIX}-`)) spawnSync('ip', ['netns', 'del', ns]);
  }
  for (const line of spawnSync('ip', ['-o', 'link', 'show']).stdout.toString().split('\n')) {
    const m = new RegExp(`^\\d+: (${PREFIX}[^:@]*)`).exec(line);
    if (m) spawnSync('ip', ['link', 'del', m[1]]);
  }
}

export function createNetwork(options: { hosts: string[] }): Network {
  sweepNetworks();
  const id = randomBytes(2).toString('hex');
  const subnet = 100 + (parseInt(id, 16) % 150);
  const bridge = `${PREFIX}b${id}`;
  const controlAddress = `10.77.${subnet}.1`;
  const hosts = new Map<string, NetHost>();
  const destroy = () => {
    for (const h of hosts.values()) {
      spawnSync('ip', ['netns', 'del', h.ns]);
      spawnSync('ip', ['link', 'del', h.veth]);
    }
    spawnSync('ip', ['link', 'del', bridge]);
  };
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${controlAddress}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    options.hosts.forEach((name, i) => {
      const h: NetHost = { name, ns: `${PREFIX}-${id}-${name}`, address: `10.77.${subnet}.${10 + i}`, veth: `${PREFIX}${id}v${i}` };
      hosts.set(name, h);
      const peer = `${PREFIX}${id}p${i}`;
      ip('netns', 'add', h.ns);
      ip('link', 'add', h.veth, 'type', 'veth', 'peer', 'name', peer);
      ip('link', 'set', h.veth, 'master', bridge);
      ip('link', 'set', h.veth, 'up');
      ip('link', 'set', peer, 'netns', h.ns);
      ip('-n', h.ns, 'link', 'set', 'lo', 'up');
      ip('-n', h.ns, 'addr', 'add', `${h.address}/24`, 'dev', peer);
      ip('-n', h.ns, 'link', 'set', peer, 'up');
      ip('-n', h.ns, 'route', 'add', 'default', 'via', controlAddress);
    });
  } catch (err) {
    destroy();
    throw err;
  }
  const hostOf = (name: string) => {
    const h = hosts.get(name);
    if (!h) throw new Error(`no host ${name}`);
    return h;
  };
  return {
    controlAddress,
    hosts,
    exec: (host, argv, opts = {}) => spawn('ip', ['netns', 'exec', hostOf(host).ns, ...argv], { stdio: ['ignore', 'pipe', 'pipe'], ...opts }),
    run: (host, argv, opts = {}) =>
      new Promise((resolve) => {
        const p = spawn('ip', ['netns', 'exec', hostOf(host).ns, ...argv], { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        p.stdout!.on('data', (c) => (stdout += c));
        p.stderr!.on('data', (c) => (stderr += c));
        const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
        p.once('close', (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
      }),
    cut: (host) => void ip('link', 'set', hostOf(host).veth, 'down'),
    restore: (host) => void ip('link', 'set', hostOf(host).veth, 'up'),
    destroy,
  };
}
