import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { isProcessAlive } from '../../../lib/process-state.js';
import type { Logger } from '../../../kernel/logger.js';

/**
 * One cgroup per runtime: what holds an agent to its share of the host. Each runtime's processes are born
 * in it (the launcher writes its own pid into the group's `cgroup.procs` before it execs the sandbox, so
 * nothing the agent forks is ever outside: runtime-launcher.ts), and the group carries
 *
 *  - a memory limit (v2 `memory.max` with `memory.swap.max` 0, v1 `memory.limit_in_bytes` with the same
 *    `memory.memsw.limit_in_bytes`): past it the kernel's OOM killer ends the largest process of that
 *    group only;
 *  - a process limit (`pids.max`): a fork bomb stops there;
 *  - an equal CPU weight (v2 `cpu.weight`, v1 `cpu.shares`): under contention each runtime gets the same
 *    share whatever number of processes it runs, so 500 busy processes of one person weigh what one
 *    process of another does;
 *  - the freezer (v2 `cgroup.freeze`, v1 `freezer.state`): an idle runtime uses no CPU at all;
 *  - paging out (v2 `memory.reclaim`, v1 `memory.force_empty`): a runtime frozen a while has its memory
 *    pushed to swap (compressed, with zram) and holds a fraction of it until its next turn touches it.
 *    The service's own memory is kept out of swap (v2 `memory.swap.max` 0 on its leaf, v1 a leaf of its
 *    own with swappiness 0): the API and an embedded database answer at RAM speed whatever the agents do.
 *
 * All runtime groups sit under one parent group per hosting process (`agentws-runtimes-<pid>`, beside the
 * service in its own cgroup), which holds what the runtimes may take together: the host's memory less the
 * reserve kept for the service, PostgreSQL and the OS (runtime-capacity.ts), half the host's pids, and a
 * CPU weight half the service's, so the API and the database keep priority over every agent at once.
 *
 * Each controller comes from wherever the host mounts it: the unified (v2) hierarchy when it has the
 * controller, else the v1 hierarchy of that controller. A hybrid host (this VM: v1 memory, pids and cpu,
 * an unused v2 beside them) gets a group in each. cgroup v2's rule that a group with controllers enabled
 * for its children holds no process itself means the service first moves itself into a leaf of its own
 * cgroup (`agentws-service-<pid>`), as systemd's Delegate=yes expects of a delegated service. Where a
 * controller cannot be written (an unprivileged service user without a delegated cgroup, the container
 * image), that limit is absent and `mechanisms().unavailable` says why.
 *
 * The agent cannot reach any of it: the cgroup files are the host's, and the sandbox has its own cgroup
 * namespace and no capabilities.
 */
export type CgroupKind = 'cgroup2' | 'cgroup1';
type Controller = 'freezer' | 'memory' | 'pids' | 'cpu';
const CONTROLLERS: readonly Controller[] = ['freezer', 'memory', 'pids', 'cpu'];

/** Which mechanism holds each limit on this host, and why one is missing. */
export interface CgroupMechanisms {
  freezer: CgroupKind | null;
  memory: CgroupKind | null;
  pids: CgroupKind | null;
  cpu: CgroupKind | null;
  unavailable: Partial<Record<Controller, string>>;
}

/** What one runtime's group may use: null leaves that limit off. */
interface GroupLimits {
  memoryMaxBytes: number | null;
  pidsMax: number | null;
}

/** A runtime group's figures as the kernel keeps them. */
export interface CgroupUsage {
  /** Memory charged to the group less what the kernel can drop at once (inactive file pages); null: no memory controller. */
  memoryBytes: number | null;
  memoryMaxBytes: number | null;
  /** Processes the OOM killer ended in this group since it was made. */
  oomKills: number;
  pids: number | null;
  pidsMax: number | null;
  /** Forks refused at the limit since the group was made. */
  pidsRefused: number;
  /** Of the group's memory, what is in swap now (uncompressed bytes); null: not known here. */
  swapBytes: number | null;
}

/** What one page-out did: the group's memory before and after (bytes, as `usage().memoryBytes` counts it), and how long it took. */
interface PageOutResult {
  beforeBytes: number;
  afterBytes: number;
  ms: number;
}

export interface RuntimeCgroup {
  /** The `cgroup.procs` files a process writes its pid into to join the group (one per hierarchy). */
  readonly procs: readonly string[];
  /** Whether every process of the group is frozen now. */
  readonly frozen: boolean;
  /** Whether this group can be frozen. */
  readonly canFreeze: boolean;
  /** The pids in the group. */
  pids(): number[];
  /** Stops the group's processes from being scheduled; resolves once they are all frozen (or after 1 s). */
  freeze(): Promise<void>;
  /** Lets them run again; resolves once the kernel reports the group thawed. */
  thaw(): Promise<void>;
  /** The group's memory, processes and their limits now. */
  usage(): CgroupUsage;
  /**
   * Pushes the group's memory out to swap, as much as the kernel can (a frozen group: all but a few MB);
   * null when there is no memory controller here. Runs in libuv's thread pool (the kernel's reclaim takes
   * ~0.5 s per 100 MB of system time): the event loop goes on meanwhile. Only for a frozen group: a running
   * one would fault its pages back as fast as v1's force_empty pushes them out, and that loop ends only
   * when the group is empty.
   */
  pageOut(): Promise<PageOutResult | null>;
  /** Kills every process in the group (SIGKILL through cgroup.kill on v2, else one by one). */
  kill(): void;
  /** Removes the group once its processes are gone (best effort). */
  remove(): void;
}

export interface RuntimeCgroups {
  mechanisms(): CgroupMechanisms;
  /** A new group for one runtime, named for its user, with its limits set; null when no hierarchy can hold one here. Throws when it cannot be made. */
  group(name: string, limits: GroupLimits): RuntimeCgroup | null;
  /** Removes the service's own parent groups (shutdown, once every runtime stopped). */
  close(): void;
}

const PARENT_PREFIX = 'agentws-runtimes-';
const SERVICE_LEAF_PREFIX = 'agentws-service-';
/** cgroup v2's default weight and v1's default shares: every runtime group gets exactly this. */
const V2_WEIGHT = 100;
const V1_SHARES = 1024;
/** v1 reclaim of a runtime's group: anonymous memory goes to swap as readily as files are dropped (zram has no seek). */
const RUNTIME_SWAPPINESS = 100;
/** The runtimes' parent weighs half what the service does under contention. */
const RUNTIMES_CPU_FRACTION = 0.5;

/** Where this process sits in the host's cgroup hierarchies (tests give their own). */
interface CgroupHost {
  /** /proc/self/mountinfo */
  mountinfo: string;
  /** /proc/self/cgroup */
  selfCgroup: string;
  pid: number;
}

function readHost(): CgroupHost | null {
  try {
    return { mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'), selfCgroup: readFileSync('/proc/self/cgroup', 'utf8'), pid: process.pid };
  } catch {
    return null;
  }
}

interface Mount {
  point: string;
  root: string;
  v2: boolean;
  /** v1: the controllers bound to it (from its super options). */
  controllers: string[];
}

/** cgroup mounts from mountinfo: "<id> <parent> <maj:min> <root> <point> <opts> ... - <fstype> <source> <super opts>". */
export function cgroupMounts(mountinfo: string): Mount[] {
  const out: Mount[] = [];
  for (const line of mountinfo.split('\n')) {
    const [head, tail] = line.split(' - ');
    if (!head || !tail) continue;
    const [fstype, , superOpts = ''] = tail.split(' ');
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') continue;
    const f = head.split(' ');
    out.push({ root: unescapeMount(f[3]), point: unescapeMount(f[4]), v2: fstype === 'cgroup2', controllers: fstype === 'cgroup' ? superOpts.split(',') : [] });
  }
  return out;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
const unescapeMount = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** This process's own group directory in a mount (its path seen from the mount's root). */
function ownDir(m: Mount, selfCgroup: string, v1Controller?: string): string | null {
  const line = selfCgroup.split('\n').find((l) => (m.v2 ? l.startsWith('0::') : l.split(':')[1]?.split(',').includes(v1Controller!)));
  if (!line) return null;
  const path = line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
  const rel = relative(m.root, path);
  // A path outside the mount's root (another cgroup namespace's view): not ours to write.
  if (rel.startsWith('..')) return null;
  return join(m.point, rel);
}

const read = (file: string): string => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};
const field = (text: string, name: string): number | null => {
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
};
const num = (text: string): number | null => {
  const t = text.trim();
  return /^\d+$/.test(t) ? Number(t) : null;
};
const errCode = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** rmdir of a cgroup and its empty children (a cgroup directory is removed with rmdir, not by unlinking its files). */
function removeTree(dir: string): void {
  for (const name of safeList(dir)) {
    const child = join(dir, name);
    if (existsSync(join(child, 'cgroup.procs'))) removeTree(child);
  }
  try {
    rmdirSync(dir);
  } catch {
    // still populated (a process not yet reaped): left for the next start to remove
  }
}

/** Removes what hosting processes that died left behind under `dir` (their parents and service leaves). */
function sweepDead(dir: string, self: number): void {
  for (const name of safeList(dir)) {
    const prefix = name.startsWith(PARENT_PREFIX) ? PARENT_PREFIX : name.startsWith(SERVICE_LEAF_PREFIX) ? SERVICE_LEAF_PREFIX : null;
    if (!prefix) continue;
    const pid = Number(name.slice(prefix.length));
    if (pid !== self && !isProcessAlive(pid)) removeTree(join(dir, name));
  }
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}

/** One hierarchy the runtimes' groups live in, with the controllers this host gets from it. */
interface Hierarchy {
  kind: CgroupKind;
  /** The runtimes' parent group (agentws-runtimes-<pid>) in it. */
  parent: string;
  controllers: Controller[];
}

export interface OpenOptions {
  /** Which controllers are wanted: the freezer only when runtimes are frozen while idle, memory and pids when their limit is set. */
  want: Partial<Record<Controller, boolean>>;
  /** Why a controller is not wanted (for status): "turned off (AGENTWS_...)". */
  offWhy?: Partial<Record<Controller, string>>;
  /** What all runtimes together may take: memory (bytes) and pids. */
  total: { memoryBytes: number | null; pids: number | null };
  /** The host's view (tests give a fake one over a directory tree). */
  host?: CgroupHost;
  /** Idle runtimes will be paged out to swap: keep the service's own memory out of it. */
  paging?: boolean;
}

/**
 * The cgroups of this host for this process's runtimes: opens what it can, says why not for the rest.
 * Also removes the empty groups left by hosting processes that died.
 */
export function openRuntimeCgroups(log: Logger, o: OpenOptions): RuntimeCgroups {
  const host = o.host ?? readHost();
  const unavailable: Partial<Record<Controller, string>> = {};
  const chosen = new Map<Controller, Hierarchy>();
  const wanted = CONTROLLERS.filter((c) => o.want[c]);
  for (const c of CONTROLLERS) if (!o.want[c]) unavailable[c] = o.offWhy?.[c] ?? 'turned off';
  if (!host) {
    for (const c of wanted) unavailable[c] = 'cannot read /proc/self/mountinfo';
    return build();
  }
  const mounts = cgroupMounts(host.mountinfo);
  const problems = new Map<Controller, string>();

  // The unified hierarchy first: the freezer is a core feature of every v2 group (kernel >= 5.2), the
  // other controllers only when this group has them.
  const v2 = mounts.find((m) => m.v2);
  const own = v2 ? ownDir(v2, host.selfCgroup) : null;
  // Moved into its leaf by an earlier opening in this process: the runtimes' parent goes beside the leaf.
  const v2Own = own && basename(own) === `${SERVICE_LEAF_PREFIX}${host.pid}` ? dirname(own) : own;
  if (v2 && v2Own) {
    const available = read(join(v2Own, 'cgroup.controllers')).trim().split(/\s+/);
    const mine = wanted.filter((c) => (c === 'freezer' ? true : available.includes(c)));
    if (mine.length) {
      const opened = openV2(v2Own, mine.filter((c) => c !== 'freezer') as Array<Exclude<Controller, 'freezer'>>, mine.includes('freezer'), host.pid, o.total, log);
      for (const c of mine) {
        if (opened.ok.includes(c)) chosen.set(c, { kind: 'cgroup2', parent: opened.parent, controllers: [] });
        else if (opened.why) problems.set(c, opened.why);
      }
    }
  }
  // The rest from v1 hierarchies (a controller is bound to at most one hierarchy).
  for (const c of wanted) {
    if (chosen.has(c)) continue;
    const m = mounts.find((x) => !x.v2 && x.controllers.includes(c));
    if (!m) {
      problems.set(c, problems.get(c) ?? `no cgroup ${c} controller is mounted (cgroup v2 or v1)`);
      continue;
    }
    const seen = ownDir(m, host.selfCgroup, c);
    if (!seen) {
      problems.set(c, `this process's ${c} cgroup is not visible under ${m.point}`);
      continue;
    }
    // Moved into its leaf by an earlier opening in this process (keepServiceOutOfSwap): beside the leaf.
    const own = basename(seen) === `${SERVICE_LEAF_PREFIX}${host.pid}` ? dirname(seen) : seen;
    const parent = join(own, `${PARENT_PREFIX}${host.pid}`);
    try {
      mkdirSync(parent, { recursive: true });
      sweepDead(own, host.pid);
      setV1Parent(parent, c, o.total);
      chosen.set(c, { kind: 'cgroup1', parent, controllers: [] });
      problems.delete(c);
    } catch (err) {
      problems.set(c, `cannot create a cgroup under ${own} (${errCode(err)})`);
    }
  }
  for (const [c, why] of problems) if (!chosen.has(c)) unavailable[c] = why;
  if (o.paging && chosen.has('memory')) keepServiceOutOfSwap(chosen.get('memory')!, host, log);
  return build();

  function build(): RuntimeCgroups {
    const mechanisms: CgroupMechanisms = {
      freezer: chosen.get('freezer')?.kind ?? null,
      memory: chosen.get('memory')?.kind ?? null,
      pids: chosen.get('pids')?.kind ?? null,
      cpu: chosen.get('cpu')?.kind ?? null,
      unavailable,
    };
    if (Object.keys(unavailable).some((c) => o.want[c as Controller])) log.warn({ unavailable }, 'some runtime limits are not available on this host');
    else if (wanted.length) log.debug({ mechanisms }, 'runtime cgroups');
    return createGroups(mechanisms, chosen);
  }
}

/**
 * The service's own memory is never what the host swaps: the runtimes are paged out on purpose, and the
 * kernel's own reclaim under pressure must not pick the API's or an embedded database's pages instead.
 * v2: `memory.swap.max` 0 on the service's leaf (absolute; the leaf exists once the runtimes' controllers
 * are enabled). v1: this process moves into a leaf of its own memory group (`agentws-service-<pid>`) with
 * swappiness 0, so that its anonymous memory is left alone by the host's reclaim;
 * the group it came from, which it may share with other processes (a shell's, a container's), keeps its
 * own setting, and so does a root group (whose swappiness is the host's vm.swappiness).
 */
function keepServiceOutOfSwap(h: Hierarchy, host: CgroupHost, log: Logger): void {
  const own = dirname(h.parent);
  const leaf = join(own, `${SERVICE_LEAF_PREFIX}${host.pid}`);
  try {
    if (h.kind === 'cgroup2') {
      if (existsSync(join(leaf, 'memory.swap.max'))) writeFileSync(join(leaf, 'memory.swap.max'), '0');
      else return void log.warn({ group: own }, 'the service\'s memory may be swapped: its cgroup has no memory.swap.max of its own');
    } else {
      mkdirSync(leaf, { recursive: true });
      // What this process already holds moves with it where the kernel still does that (deprecated in v1;
      // 6.x refuses it: EINVAL). Else what it allocates from now on: the runtimes are opened at start.
      try {
        writeFileSync(join(leaf, 'memory.move_charge_at_immigrate'), '1');
      } catch {
        // new allocations only
      }
      writeFileSync(join(leaf, 'memory.swappiness'), '0');
      writeFileSync(join(leaf, 'cgroup.procs'), String(host.pid));
    }
    log.debug({ group: leaf }, 'the service\'s memory is kept out of swap');
  } catch (err) {
    log.warn({ group: leaf, err: errCode(err) }, 'could not keep the service\'s memory out of swap');
  }
}

/**
 * The v2 parent for the runtimes under this process's group, with `controllers` enabled for it and its
 * children. cgroup v2 enables a controller for a group's children only when the group itself holds no
 * process (the root excepted): the service then moves itself into a leaf of its own first.
 */
function openV2(
  own: string,
  controllers: Array<Exclude<Controller, 'freezer'>>,
  freezer: boolean,
  pid: number,
  total: OpenOptions['total'],
  log: Logger,
): { ok: Controller[]; parent: string; why?: string } {
  const parent = join(own, `${PARENT_PREFIX}${pid}`);
  try {
    mkdirSync(parent, { recursive: true });
  } catch (err) {
    return { ok: [], parent, why: `cannot create a cgroup under ${own} (${errCode(err)})` };
  }
  // A v2 group without cgroup.freeze (kernel < 5.2) cannot freeze.
  const canFreeze = freezer && existsSync(join(parent, 'cgroup.freeze'));
  sweepDead(own, pid);
  if (!controllers.length) return { ok: canFreeze ? ['freezer'] : [], parent, ...(freezer && !canFreeze ? { why: 'cgroup v2 without cgroup.freeze (kernel older than 5.2)' } : {}) };
  const enable = (dir: string) => writeFileSync(join(dir, 'cgroup.subtree_control'), controllers.map((c) => `+${c}`).join(' '));
  let why: string | undefined;
  try {
    try {
      enable(own);
    } catch (err) {
      if (errCode(err) !== 'EBUSY') throw err;
      // Processes in the service's own group: move this one into a leaf beside the runtimes' parent.
      const leaf = join(own, `${SERVICE_LEAF_PREFIX}${pid}`);
      mkdirSync(leaf, { recursive: true });
      writeFileSync(join(leaf, 'cgroup.procs'), String(pid));
      log.info({ leaf }, 'moved the service into a leaf of its cgroup, so that runtimes get limits beside it');
      try {
        enable(own);
      } catch (again) {
        if (errCode(again) !== 'EBUSY') throw again;
        const others = read(join(own, 'cgroup.procs')).split('\n').filter(Boolean).length;
        throw Object.assign(new Error(`the service's cgroup ${own} holds ${others} other process${others === 1 ? '' : 'es'}: run the service in a cgroup of its own (systemd: Delegate=yes)`), { code: 'shared cgroup' });
      }
    }
    enable(parent);
    setV2Parent(parent, controllers, total);
    return { ok: [...controllers, ...(canFreeze ? (['freezer'] as const) : [])], parent };
  } catch (err) {
    why = (err as { code?: string }).code === 'shared cgroup' ? (err as Error).message : `cannot enable ${controllers.join(', ')} for cgroups under ${own} (${errCode(err)})`;
    return { ok: canFreeze ? ['freezer'] : [], parent, why };
  }
}

function setV2Parent(parent: string, controllers: string[], total: OpenOptions['total']): void {
  if (controllers.includes('memory') && total.memoryBytes) writeFileSync(join(parent, 'memory.max'), String(total.memoryBytes));
  if (controllers.includes('pids') && total.pids) writeFileSync(join(parent, 'pids.max'), String(total.pids));
  if (controllers.includes('cpu')) writeFileSync(join(parent, 'cpu.weight'), String(Math.round(V2_WEIGHT * RUNTIMES_CPU_FRACTION)));
}

function setV1Parent(parent: string, c: Controller, total: OpenOptions['total']): void {
  if (c === 'memory' && total.memoryBytes) writeFileSync(join(parent, 'memory.limit_in_bytes'), String(total.memoryBytes));
  if (c === 'pids' && total.pids) writeFileSync(join(parent, 'pids.max'), String(total.pids));
  if (c === 'cpu') writeFileSync(join(parent, 'cpu.shares'), String(Math.round(V1_SHARES * RUNTIMES_CPU_FRACTION)));
}

function createGroups(mechanisms: CgroupMechanisms, chosen: Map<Controller, Hierarchy>): RuntimeCgroups {
  const parents = [...new Set([...chosen.values()].map((h) => h.parent))];
  return {
    mechanisms: () => mechanisms,
    group(name: string, limits: GroupLimits): RuntimeCgroup | null {
      if (!parents.length) return null;
      const safe = name.replace(/[^A-Za-z0-9_.-]/g, '_');
      const dirOf = (c: Controller) => {
        const h = chosen.get(c);
        return h ? { kind: h.kind, dir: join(h.parent, safe) } : null;
      };
      const dirs = [...new Set(parents.map((p) => join(p, safe)))];
      // A group left by an earlier runtime of this user in this process is reused (it is empty).
      for (const d of dirs) mkdirSync(d, { recursive: true });
      const memory = dirOf('memory');
      const pidsCtl = dirOf('pids');
      const cpu = dirOf('cpu');
      const freezer = dirOf('freezer');
      const write = (file: string, value: string) => writeFileSync(file, value);
      const writeIf = (file: string, value: string) => existsSync(file) && write(file, value);
      try {
        if (memory?.kind === 'cgroup2') {
          write(join(memory.dir, 'memory.max'), limits.memoryMaxBytes ? String(limits.memoryMaxBytes) : 'max');
          // Past its limit a runtime is not pushed to swap (where it would slow the whole host down).
          writeIf(join(memory.dir, 'memory.swap.max'), limits.memoryMaxBytes ? '0' : 'max');
        } else if (memory) {
          // v1: memsw (memory + swap) may not be under the memory limit: the memory limit first.
          const v = limits.memoryMaxBytes ? String(limits.memoryMaxBytes) : '-1';
          if (limits.memoryMaxBytes) write(join(memory.dir, 'memory.limit_in_bytes'), v);
          writeIf(join(memory.dir, 'memory.memsw.limit_in_bytes'), v);
          if (!limits.memoryMaxBytes) write(join(memory.dir, 'memory.limit_in_bytes'), v);
        }
        if (pidsCtl) write(join(pidsCtl.dir, 'pids.max'), limits.pidsMax ? String(limits.pidsMax) : 'max');
        if (cpu) write(join(cpu.dir, cpu.kind === 'cgroup2' ? 'cpu.weight' : 'cpu.shares'), String(cpu.kind === 'cgroup2' ? V2_WEIGHT : V1_SHARES));
        if (freezer) write(join(freezer.dir, freezer.kind === 'cgroup2' ? 'cgroup.freeze' : 'freezer.state'), freezer.kind === 'cgroup2' ? '0' : 'THAWED');
        // v1: a group's reclaim swaps nothing at swappiness 0, which a new group inherits from its parent
        // (an operator's setting on the service's group): a runtime's memory goes to swap when paged out.
        if (memory?.kind === 'cgroup1') writeIf(join(memory.dir, 'memory.swappiness'), String(RUNTIME_SWAPPINESS));
      } catch (err) {
        for (const d of dirs) removeTree(d);
        throw new Error(`cannot set the runtime's cgroup limits (${errCode(err)})`);
      }
      let frozen = false;
      const isFrozen = () =>
        !freezer ? false : freezer.kind === 'cgroup2' ? /^frozen 1$/m.test(read(join(freezer.dir, 'cgroup.events'))) : read(join(freezer.dir, 'freezer.state')).trim() === 'FROZEN';
      const first = dirs[0];
      const pids = () =>
        read(join(first, 'cgroup.procs'))
          .split('\n')
          .filter(Boolean)
          .map(Number);
      const group: RuntimeCgroup = {
        procs: dirs.map((d) => join(d, 'cgroup.procs')),
        canFreeze: !!freezer,
        get frozen() {
          return frozen;
        },
        pids,
        async freeze() {
          if (!freezer) return;
          frozen = true;
          write(join(freezer.dir, freezer.kind === 'cgroup2' ? 'cgroup.freeze' : 'freezer.state'), freezer.kind === 'cgroup2' ? '1' : 'FROZEN');
          await until(isFrozen, 1000);
        },
        async thaw() {
          if (!freezer || !frozen) return;
          frozen = false;
          write(join(freezer.dir, freezer.kind === 'cgroup2' ? 'cgroup.freeze' : 'freezer.state'), freezer.kind === 'cgroup2' ? '0' : 'THAWED');
          await until(() => !isFrozen(), 1000);
        },
        usage(): CgroupUsage {
          let memoryBytes: number | null = null;
          let memoryMaxBytes: number | null = null;
          let oomKills = 0;
          if (memory?.kind === 'cgroup2') {
            const current = num(read(join(memory.dir, 'memory.current')));
            if (current !== null) memoryBytes = Math.max(0, current - (field(read(join(memory.dir, 'memory.stat')), 'inactive_file') ?? 0));
            memoryMaxBytes = num(read(join(memory.dir, 'memory.max')));
            oomKills = field(read(join(memory.dir, 'memory.events')), 'oom_kill') ?? 0;
          } else if (memory) {
            const usage = num(read(join(memory.dir, 'memory.usage_in_bytes')));
            if (usage !== null) memoryBytes = Math.max(0, usage - (field(read(join(memory.dir, 'memory.stat')), 'total_inactive_file') ?? 0));
            memoryMaxBytes = limits.memoryMaxBytes;
            oomKills = field(read(join(memory.dir, 'memory.oom_control')), 'oom_kill') ?? 0;
          }
          let swapBytes: number | null = null;
          if (memory?.kind === 'cgroup2') swapBytes = num(read(join(memory.dir, 'memory.swap.current')));
          else if (memory) {
            // v1 counts memory and swap together in memsw (when swap accounting is on): the difference is swap.
            const memsw = num(read(join(memory.dir, 'memory.memsw.usage_in_bytes')));
            const usage = num(read(join(memory.dir, 'memory.usage_in_bytes')));
            swapBytes = memsw !== null && usage !== null ? Math.max(0, memsw - usage) : null;
          }
          let pidsNow: number | null = null;
          let pidsRefused = 0;
          if (pidsCtl) {
            pidsNow = num(read(join(pidsCtl.dir, 'pids.current')));
            pidsRefused = field(read(join(pidsCtl.dir, 'pids.events')), 'max') ?? 0;
          }
          return { memoryBytes, memoryMaxBytes, oomKills, pids: pidsNow, pidsMax: pidsCtl ? limits.pidsMax : null, pidsRefused, swapBytes };
        },
        async pageOut(): Promise<PageOutResult | null> {
          if (!memory) return null;
          const t0 = performance.now();
          const beforeBytes = group.usage().memoryBytes ?? 0;
          if (memory.kind === 'cgroup2') {
            // memory.swap.max is 0 while the runtime runs (past its limit it is not pushed to swap, where it
            // would slow the host): opened for this reclaim only. What it swaps stays in swap after.
            const swapMax = join(memory.dir, 'memory.swap.max');
            const swapAllowed = read(swapMax).trim();
            if (swapAllowed === '0') await writeFile(swapMax, limits.memoryMaxBytes ? String(limits.memoryMaxBytes) : 'max');
            try {
              const current = num(read(join(memory.dir, 'memory.current'))) ?? 0;
              // The kernel answers EAGAIN when it reclaimed less than asked: what it could is done.
              await writeFile(join(memory.dir, 'memory.reclaim'), String(current)).catch((err) => {
                if (errCode(err) !== 'EAGAIN') throw err;
              });
            } finally {
              if (swapAllowed === '0') await writeFile(swapMax, '0').catch(() => {});
            }
          } else {
            // v1: reclaims until the group is empty or the kernel stops finding pages it can take.
            await writeFile(join(memory.dir, 'memory.force_empty'), '0');
          }
          return { beforeBytes, afterBytes: group.usage().memoryBytes ?? 0, ms: performance.now() - t0 };
        },
        kill() {
          const v2 = dirs.find((d) => existsSync(join(d, 'cgroup.kill')));
          if (v2) {
            try {
              write(join(v2, 'cgroup.kill'), '1');
              return;
            } catch {
              // fall back to signals
            }
          }
          for (const p of pids()) {
            try {
              process.kill(p, 'SIGKILL');
            } catch {
              // gone meanwhile
            }
          }
        },
        remove() {
          for (const d of dirs) removeTree(d);
        },
      };
      return group;
    },
    close() {
      for (const p of parents) removeTree(p);
    },
  };
}
