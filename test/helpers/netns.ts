import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Several "machines" on one: each host is a network namespace joined to a bridge in the root namespace
 * by a veth pair, on a /24 of its own (10.77.X.0/24, X free on this machine). The control plane stays in
 * the root namespace (PostgreSQL on its 127.0.0.1, servers on the bridge address, `controlAddress`); a
 * host reaches it over its link only, and never the root's loopback: its 127.0.0.1 is its own. (Through
 * its default route a host also reaches what listens on the root namespace's other addresses, as a LAN's
 * machines reach their router's: Linux takes packets for any of its addresses on any interface. What a
 * test wants out of the hosts' reach listens on 127.0.0.1.) Hosts reach each other over the bridge.
 * Processes started in a host (`exec`, `run`) share the filesystem and /proc with everything else: tests
 * give each host its own data dir. bubblewrap works inside a host (its --unshare-net as anywhere).
 *
 * Needs root and iproute2 (`ip`). Everything is named after a per-network id under PREFIX: namespaces
 * `awsnt-<id>-<host>`, links `awsnt<id>b` (the bridge), `awsnt<id>v<i>` (a host's veth end on the bridge)
 * and `awsnt<id>p<i>` (the end in the host). Each live network holds a claim, CLAIMS/<X>, naming its
 * subnet, id and owner process; whatever carries the prefix without a live owner's claim is what a killed
 * run left behind, and every createNetwork sweeps it, never touching a network of a test running beside
 * it. destroy() (also run on exit and on SIGINT/SIGTERM/SIGHUP) kills the processes started through the
 * network and removes all it made.
 */
const PREFIX = 'awsnt';
const CLAIMS = '/run/awsnt';
const NS_RE = new RegExp(`^${PREFIX}-([0-9a-f]{4})-`);
const LINK_RE = new RegExp(`^\\d+: (${PREFIX}([0-9a-f]{4})[bvp]\\d*)[:@]`);
// netnsAvailable's probe: awsnt-probe-<pid> and the veth awsntq<pid>.
const PROBE_NS_RE = new RegExp(`^${PREFIX}-probe-(\\d+)$`);
const PROBE_LINK_RE = new RegExp(`^\\d+: (${PREFIX}q(\\d+))[:@]`);

export interface NetHost {
  name: string;
  /** The namespace (`ip netns exec <ns> ...`). */
  ns: string;
  /** The host's address on the bridge. */
  address: string;
  /** Its veth's end in the root namespace, on the bridge (what cut() takes down). */
  veth: string;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Network {
  /** The bridge's address in the root namespace: where the hosts reach the control plane. */
  controlAddress: string;
  hosts: Map<string, NetHost>;
  /** Starts a (long-running) process inside the host's namespace; stdio piped and the environment passed through unless `options` say otherwise. */
  exec(host: string, argv: string[], options?: SpawnOptions): ChildProcess;
  /** Runs a command inside the host's namespace to completion (asynchronously: servers of this process keep answering); killed after timeoutMs (30 s). */
  run(host: string, argv: string[], options?: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string }): Promise<RunResult>;
  /** Takes the host's link down: a partition (its packets are dropped, its connections hang). */
  cut(host: string): void;
  /** Brings the host's link up again. */
  restore(host: string): void;
  /** Kills what exec/run started and still runs, removes the namespaces, links and claim. Idempotent. */
  destroy(): void;
}

let ipBin: string | null | undefined;
/** `ip`, also where /usr/sbin is not on PATH. */
function findIp(): string | null {
  if (ipBin !== undefined) return ipBin;
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  ipBin = dirs.map((d) => join(d, 'ip')).find((p) => existsSync(p)) ?? null;
  return ipBin;
}

function ipSync(args: string[]): { ok: boolean; out: string; err: string } {
  const r = spawnSync(findIp() ?? 'ip', args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
  return { ok: !r.error && r.status === 0, out: r.stdout?.toString() ?? '', err: r.error?.message ?? r.stderr?.toString().trim() ?? '' };
}

function ip(...args: string[]): string {
  const r = ipSync(args);
  if (!r.ok) throw new Error(`ip ${args.join(' ')}: ${r.err}`);
  return r.out;
}

let availability: { ok: true } | { ok: false; reason: string } | undefined;
/** Whether this machine can make the hosts (root, iproute2, namespaces and veth work); the reason when not. */
export function netnsAvailable(): { ok: true } | { ok: false; reason: string } {
  if (availability) return availability;
  const check = (): { ok: true } | { ok: false; reason: string } => {
    if (process.platform !== 'linux') return { ok: false, reason: 'network namespaces are Linux only' };
    if (process.getuid?.() !== 0) return { ok: false, reason: 'network namespaces need root' };
    if (!findIp()) return { ok: false, reason: '`ip` not found (Debian: apt-get install iproute2)' };
    const probe = `${PREFIX}-probe-${process.pid}`;
    const link = `${PREFIX}q${process.pid}`;
    try {
      const add = ipSync(['netns', 'add', probe]);
      if (!add.ok) return { ok: false, reason: `ip netns add does not work here: ${add.err}` };
      const veth = ipSync(['link', 'add', link, 'type', 'veth', 'peer', 'name', `${link}p`, 'netns', probe]);
      if (!veth.ok) return { ok: false, reason: `veth pairs do not work here: ${veth.err}` };
      return { ok: true };
    } finally {
      ipSync(['link', 'del', link]);
      ipSync(['netns', 'del', probe]);
    }
  };
  availability = check();
  return availability;
}

interface Claim {
  pid: number;
  start: string;
  id: string;
}

/**
 * The process's start time (a pid can be reused; the pair cannot). Read here rather than through
 * src/lib/process-state.ts: this file imports nothing of the application's, so that a bare `node` (its own
 * type stripping, no resolution of `.js` imports to `.ts` files) can load it as a killed run's stand-in
 * (netns-harness.test.ts).
 */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function readClaim(file: string): Claim | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Claim;
  } catch {
    return null;
  }
}

const alive = (c: Claim | null) => !!c && startTime(c.pid) === c.start;
const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Removes what earlier runs of this harness left behind (a killed test cannot clean up after itself):
 * every namespace and link under PREFIX whose network has no claim of a live process.
 */
export function sweepNetworks(): void {
  if (!findIp()) return;
  // What exists is listed before the claims are read: a network's claim is written before any of its
  // parts, so a part listed here whose claim is not found afterwards has no owner.
  const namespaces = ipSync(['netns', 'list']).out.split('\n').map((l) => l.split(' ')[0]);
  const links = ipSync(['-o', 'link', 'show']).out.split('\n');
  const owned = new Set<string>();
  mkdirSync(CLAIMS, { recursive: true });
  for (const f of readdirSync(CLAIMS)) {
    if (f.startsWith('.')) continue; // a claim being written (see claimSubnet)
    const c = readClaim(join(CLAIMS, f));
    if (alive(c)) owned.add(c!.id);
    else rmSync(join(CLAIMS, f), { force: true });
  }
  for (const ns of namespaces) {
    const m = NS_RE.exec(ns);
    const probe = PROBE_NS_RE.exec(ns);
    if ((m && !owned.has(m[1])) || (probe && !pidAlive(Number(probe[1])))) ipSync(['netns', 'del', ns]);
  }
  for (const l of links) {
    const m = LINK_RE.exec(l);
    const probe = PROBE_LINK_RE.exec(l);
    if ((m && !owned.has(m[2])) || (probe && !pidAlive(Number(probe[2])))) ipSync(['link', 'del', (m ?? probe)![1]]);
  }
}

/** Claims a free 10.77.X.0/24 for this process: the claim file is created exclusively. */
function claimSubnet(id: string): number {
  const me: Claim = { pid: process.pid, start: startTime(process.pid) ?? '', id };
  const used = ip('-4', '-o', 'addr', 'show') + ip('-4', 'route', 'show', 'table', 'all');
  const free = [];
  for (let x = 100; x < 250; x++) if (!used.includes(`10.77.${x}.`)) free.push(x);
  // Written whole, then linked to its name: a sweep never reads a claim half written, and link() fails
  // where the name is taken (another live network's subnet).
  const tmp = join(CLAIMS, `.${id}-${process.pid}`);
  writeFileSync(tmp, JSON.stringify(me));
  try {
    while (free.length > 0) {
      const x = free.splice(Math.floor(Math.random() * free.length), 1)[0];
      try {
        linkSync(tmp, join(CLAIMS, String(x)));
        return x;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
  } finally {
    rmSync(tmp, { force: true });
  }
  throw new Error('no free 10.77.X.0/24 subnet for a test network');
}

const liveNetworks = new Set<() => void>();
let hooked = false;
function destroyAllOnExit() {
  if (hooked) return;
  hooked = true;
  const destroyAll = () => {
    for (const d of [...liveNetworks]) d();
  };
  process.once('exit', destroyAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      destroyAll();
      process.removeListener(sig, onSignal);
      // Alone, this handler would keep the process alive: die of the signal as without it.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

export function createNetwork(options: { hosts: string[] }): Network {
  const can = netnsAvailable();
  if (!can.ok) throw new Error(`cannot make test hosts: ${can.reason}`);
  if (options.hosts.length > 99) throw new Error('at most 99 hosts');
  sweepNetworks();
  const id = randomBytes(2).toString('hex');
  const subnet = claimSubnet(id);
  const claim = join(CLAIMS, String(subnet));
  const bridge = `${PREFIX}${id}b`;
  const controlAddress = `10.77.${subnet}.1`;
  const hosts = new Map<string, NetHost>();
  const children = new Set<{ child: ChildProcess; group: boolean }>();
  let destroyed = false;

  const destroy = () => {
    if (destroyed) return;
    destroyed = true;
    liveNetworks.delete(destroy);
    for (const { child, group } of children) {
      if (child.exitCode !== null || child.signalCode !== null || !child.pid) continue;
      try {
        process.kill(group ? -child.pid : child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const h of hosts.values()) {
      ipSync(['link', 'del', h.veth]);
      ipSync(['netns', 'del', h.ns]);
    }
    ipSync(['link', 'del', bridge]);
    rmSync(claim, { force: true });
  };
  liveNetworks.add(destroy);
  destroyAllOnExit();

  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${controlAddress}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
    options.hosts.forEach((name, i) => {
      if (!/^[a-z0-9][a-z0-9_-]{0,30}$/i.test(name) || hosts.has(name)) throw new Error(`bad or repeated host name: ${name}`);
      const h: NetHost = { name, ns: `${PREFIX}-${id}-${name}`, address: `10.77.${subnet}.${10 + i}`, veth: `${PREFIX}${id}v${i}` };
      hosts.set(name, h);
      const peer = `${PREFIX}${id}p${i}`;
      ip('netns', 'add', h.ns);
      ip('link', 'add', h.veth, 'type', 'veth', 'peer', 'name', peer, 'netns', h.ns);
      ip('link', 'set', h.veth, 'master', bridge);
      ip('link', 'set', h.veth, 'up');
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
    if (!h) throw new Error(`no host ${name} (hosts: ${[...hosts.keys()].join(', ')})`);
    if (destroyed) throw new Error('the network is destroyed');
    return h;
  };
  const exec = (host: string, argv: string[], opts: SpawnOptions = {}) => {
    const child = spawn(findIp()!, ['netns', 'exec', hostOf(host).ns, ...argv], { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    const entry = { child, group: !!opts.detached };
    children.add(entry);
    child.once('exit', () => children.delete(entry));
    return child;
  };
  return {
    controlAddress,
    hosts,
    exec,
    run: (host, argv, opts = {}) =>
      new Promise((resolve, reject) => {
        const p = exec(host, argv, { env: opts.env ?? process.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        p.stdout!.on('data', (c) => (stdout += c));
        p.stderr!.on('data', (c) => (stderr += c));
        if (opts.input !== undefined) p.stdin!.end(opts.input);
        const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
        p.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        p.once('close', (code, signal) => {
          clearTimeout(timer);
          resolve({ code, signal, stdout, stderr });
        });
      }),
    cut: (host) => void ip('link', 'set', hostOf(host).veth, 'down'),
    restore: (host) => void ip('link', 'set', hostOf(host).veth, 'up'),
    destroy,
  };
}
