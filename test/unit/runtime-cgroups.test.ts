import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { cgroupMounts, openRuntimeCgroups } from '../../src/core/runtime/host/runtime-cgroups.js';
import { limitsPrefix, RUNTIME_OOM_SCORE_ADJ } from '../../src/core/runtime/host/runtime-launcher.js';

/**
 * The runtimes' cgroups over a directory tree laid out as the kernel's cgroup filesystems are (the files
 * a test reads are the ones the module wrote): which hierarchy each limit comes from, what is written
 * where, and why a limit is missing. The kernel's own behaviour (limits enforced, processes born in their
 * groups) is what test/security/limits-agent.test.ts checks with real runtimes.
 */
const dirs: string[] = [];
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), 'aws-cg-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const read = (...p: string[]) => readFileSync(join(...p), 'utf8').trim();
const PID = 4242;
const GiB = 1024 ** 3;
const total = { memoryBytes: 20 * GiB, pids: 16384 };
const mountLine = (n: number, point: string, fstype: string, superOpts: string, root = '/') => `${n} 20 0:${n} ${root} ${point} rw,relatime - ${fstype} ${fstype} ${superOpts}`;

describe('runtime cgroups on a hybrid host (v1 memory, pids and cpu; v2 beside them): this VM', () => {
  function hybrid() {
    const fs = scratch();
    const mountinfo = [
      mountLine(30, join(fs, 'unified'), 'cgroup2', 'rw'),
      mountLine(31, join(fs, 'memory'), 'cgroup', 'rw,memory'),
      mountLine(32, join(fs, 'pids'), 'cgroup', 'rw,pids'),
      mountLine(33, join(fs, 'cpu,cpuacct'), 'cgroup', 'rw,cpu,cpuacct'),
      '22 1 8:1 / / rw,relatime - ext4 /dev/vda rw',
    ].join('\n');
    const selfCgroup = ['4:memory:/process_api/abc', '3:pids:/', '2:cpu,cpuacct:/', '0::/'].join('\n');
    mkdirSync(join(fs, 'unified'), { recursive: true });
    writeFileSync(join(fs, 'unified', 'cgroup.controllers'), 'hugetlb\n');
    // What the kernel gives a new v2 group (the freezer is in every one).
    mkdirSync(join(fs, 'unified', `agentws-runtimes-${PID}`), { recursive: true });
    writeFileSync(join(fs, 'unified', `agentws-runtimes-${PID}`, 'cgroup.freeze'), '0');
    for (const d of ['memory/process_api/abc', 'pids', 'cpu,cpuacct']) mkdirSync(join(fs, d), { recursive: true });
    return { fs, host: { mountinfo, selfCgroup, pid: PID } };
  }

  it('reads the mounts: v1 controllers from the super options', () => {
    const { host } = hybrid();
    expect(cgroupMounts(host.mountinfo).map((m) => [m.v2, m.controllers.filter((c) => c !== 'rw')])).toEqual([
      [true, []],
      [false, ['memory']],
      [false, ['pids']],
      [false, ['cpu', 'cpuacct']],
    ]);
  });

  it('freezes in v2, limits in v1, each under the service\'s own group there, the runtimes\' parent holding what they may take together', () => {
    const { fs, host } = hybrid();
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true, pids: true, cpu: true }, total, host });
    expect(cg.mechanisms()).toEqual({ freezer: 'cgroup2', memory: 'cgroup1', pids: 'cgroup1', cpu: 'cgroup1', unavailable: {} });
    const memParent = join(fs, 'memory/process_api/abc', `agentws-runtimes-${PID}`);
    expect(read(memParent, 'memory.limit_in_bytes')).toBe(String(20 * GiB));
    expect(read(fs, 'pids', `agentws-runtimes-${PID}`, 'pids.max')).toBe('16384');
    // Half a default group's weight: the service's own processes keep priority over all runtimes.
    expect(read(fs, 'cpu,cpuacct', `agentws-runtimes-${PID}`, 'cpu.shares')).toBe('512');

    const g = cg.group('user/1', { memoryMaxBytes: 1.5 * GiB, pidsMax: 300 })!;
    expect(g.procs).toEqual([
      join(fs, 'unified', `agentws-runtimes-${PID}`, 'user_1', 'cgroup.procs'),
      join(memParent, 'user_1', 'cgroup.procs'),
      join(fs, 'pids', `agentws-runtimes-${PID}`, 'user_1', 'cgroup.procs'),
      join(fs, 'cpu,cpuacct', `agentws-runtimes-${PID}`, 'user_1', 'cgroup.procs'),
    ]);
    expect(read(memParent, 'user_1', 'memory.limit_in_bytes')).toBe(String(1.5 * GiB));
    expect(read(fs, 'pids', `agentws-runtimes-${PID}`, 'user_1', 'pids.max')).toBe('300');
    // Every runtime the same weight: one person's 500 processes weigh what another's one does.
    expect(read(fs, 'cpu,cpuacct', `agentws-runtimes-${PID}`, 'user_1', 'cpu.shares')).toBe('1024');
    expect(read(fs, 'unified', `agentws-runtimes-${PID}`, 'user_1', 'cgroup.freeze')).toBe('0');
    expect(g.canFreeze).toBe(true);

    // What the kernel counts, as the group reads it back.
    writeFileSync(join(memParent, 'user_1', 'memory.usage_in_bytes'), String(900 * 1024 ** 2));
    writeFileSync(join(memParent, 'user_1', 'memory.stat'), `cache 1\ntotal_inactive_file ${100 * 1024 ** 2}\n`);
    writeFileSync(join(memParent, 'user_1', 'memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n');
    writeFileSync(join(fs, 'pids', `agentws-runtimes-${PID}`, 'user_1', 'pids.current'), '37\n');
    writeFileSync(join(fs, 'pids', `agentws-runtimes-${PID}`, 'user_1', 'pids.events'), 'max 7\n');
    expect(g.usage()).toEqual({ memoryBytes: 800 * 1024 ** 2, memoryMaxBytes: 1.5 * GiB, oomKills: 2, pids: 37, pidsMax: 300, pidsRefused: 7, swapBytes: null });
    // With swap accounting, v1 counts memory and swap together: the difference is what is in swap.
    writeFileSync(join(memParent, 'user_1', 'memory.memsw.usage_in_bytes'), String(1050 * 1024 ** 2));
    expect(g.usage().swapBytes).toBe(150 * 1024 ** 2);
  });

  it('paging on: the service in a leaf of its own out of swap (not the group it shared), the runtimes\' groups in; a page-out empties the v1 group through force_empty', async () => {
    const { fs, host } = hybrid();
    const own = join(fs, 'memory/process_api/abc');
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true }, total, host, paging: true });
    const parent = join(own, `agentws-runtimes-${PID}`);
    const leaf = join(own, `agentws-service-${PID}`);
    expect(read(leaf, 'cgroup.procs')).toBe(String(PID));
    expect(read(leaf, 'memory.swappiness')).toBe('0');
    expect(read(leaf, 'memory.move_charge_at_immigrate')).toBe('1');
    expect(existsSync(join(own, 'memory.swappiness'))).toBe(false);
    // Opened again from inside the leaf: the runtimes' parent stays beside it.
    const again = openRuntimeCgroups(silentLogger, { want: { memory: true }, total, host: { ...host, selfCgroup: host.selfCgroup.replace('/process_api/abc', `/process_api/abc/agentws-service-${PID}`) }, paging: true });
    expect(again.group('x', { memoryMaxBytes: GiB, pidsMax: null })!.procs).toEqual([join(parent, 'x', 'cgroup.procs')]);
    mkdirSync(join(parent, 'u'), { recursive: true });
    writeFileSync(join(parent, 'u', 'memory.swappiness'), '0');
    const g = cg.group('u', { memoryMaxBytes: GiB, pidsMax: null })!;
    // Inherited from the service's group when the kernel made it: set again.
    expect(read(parent, 'u', 'memory.swappiness')).toBe('100');
    writeFileSync(join(parent, 'u', 'memory.usage_in_bytes'), String(300 * 1024 ** 2));
    const r = await g.pageOut();
    expect(read(parent, 'u', 'memory.force_empty')).toBe('0');
    expect(r).toMatchObject({ beforeBytes: 300 * 1024 ** 2 });
  });

  it('paging on, the service in the root memory group: it moves to a leaf; the host\'s swappiness (the root\'s) is left alone', () => {
    const { fs, host } = hybrid();
    const atRoot = { ...host, selfCgroup: host.selfCgroup.replace('4:memory:/process_api/abc', '4:memory:/') };
    openRuntimeCgroups(silentLogger, { want: { memory: true }, total, host: atRoot, paging: true });
    expect(existsSync(join(fs, 'memory', 'memory.swappiness'))).toBe(false);
    expect(read(fs, 'memory', `agentws-service-${PID}`, 'memory.swappiness')).toBe('0');
  });

  it('a limit turned off is not asked of the kernel, and says why', () => {
    const { fs, host } = hybrid();
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: false, pids: true, cpu: true }, offWhy: { memory: 'turned off (AGENTWS_RUNTIME_MEMORY_MAX=off)' }, total, host });
    expect(cg.mechanisms()).toMatchObject({ memory: null, unavailable: { memory: 'turned off (AGENTWS_RUNTIME_MEMORY_MAX=off)' } });
    expect(cg.group('u', { memoryMaxBytes: null, pidsMax: 300 })!.procs.some((p) => p.includes('/memory/'))).toBe(false);
    expect(() => read(fs, 'memory/process_api/abc', `agentws-runtimes-${PID}`, 'memory.limit_in_bytes')).toThrow();
  });
});

describe('runtime cgroups on a unified (v2) host: systemd with Delegate=yes, a container with its own cgroup', () => {
  function unified(controllers: string) {
    const fs = scratch();
    const own = join(fs, 'v2', 'system.slice', 'agentws.service');
    mkdirSync(join(own, `agentws-runtimes-${PID}`), { recursive: true });
    writeFileSync(join(own, 'cgroup.controllers'), `${controllers}\n`);
    writeFileSync(join(own, `agentws-runtimes-${PID}`, 'cgroup.freeze'), '0');
    const host = { mountinfo: mountLine(30, join(fs, 'v2'), 'cgroup2', 'rw,nsdelegate'), selfCgroup: '0::/system.slice/agentws.service\n', pid: PID };
    return { own, host };
  }

  it('enables the controllers for the runtimes\' parent and its children, and writes v2\'s files', () => {
    const { own, host } = unified('cpuset cpu io memory pids');
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true, pids: true, cpu: true }, total, host });
    expect(cg.mechanisms()).toEqual({ freezer: 'cgroup2', memory: 'cgroup2', pids: 'cgroup2', cpu: 'cgroup2', unavailable: {} });
    const parent = join(own, `agentws-runtimes-${PID}`);
    expect(read(own, 'cgroup.subtree_control')).toBe('+memory +pids +cpu');
    expect(read(parent, 'cgroup.subtree_control')).toBe('+memory +pids +cpu');
    expect(read(parent, 'memory.max')).toBe(String(20 * GiB));
    expect(read(parent, 'pids.max')).toBe('16384');
    expect(read(parent, 'cpu.weight')).toBe('50');
    // One directory per runtime holds every limit and the freezer.
    mkdirSync(join(parent, 'u'), { recursive: true });
    writeFileSync(join(parent, 'u', 'memory.swap.max'), 'max');
    const g = cg.group('u', { memoryMaxBytes: GiB, pidsMax: 300 })!;
    expect(g.procs).toEqual([join(parent, 'u', 'cgroup.procs')]);
    expect(read(parent, 'u', 'memory.max')).toBe(String(GiB));
    expect(read(parent, 'u', 'memory.swap.max')).toBe('0');
    expect(read(parent, 'u', 'pids.max')).toBe('300');
    expect(read(parent, 'u', 'cpu.weight')).toBe('100');
    writeFileSync(join(parent, 'u', 'memory.current'), String(700 * 1024 ** 2));
    writeFileSync(join(parent, 'u', 'memory.stat'), `anon 1\ninactive_file ${200 * 1024 ** 2}\n`);
    writeFileSync(join(parent, 'u', 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n');
    expect(g.usage()).toMatchObject({ memoryBytes: 500 * 1024 ** 2, memoryMaxBytes: GiB, oomKills: 1 });
  });

  it('a page-out asks memory.reclaim for all the group holds, swap opened for it and closed again; the service\'s leaf kept out of swap', async () => {
    const { own, host } = unified('memory pids');
    const moved = { ...host, selfCgroup: `0::/system.slice/agentws.service/agentws-service-${PID}\n` };
    const leaf = join(own, `agentws-service-${PID}`);
    mkdirSync(leaf, { recursive: true });
    writeFileSync(join(leaf, 'memory.swap.max'), 'max');
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true }, total, host: moved, paging: true });
    expect(read(leaf, 'memory.swap.max')).toBe('0');
    const parent = join(own, `agentws-runtimes-${PID}`);
    mkdirSync(join(parent, 'u'), { recursive: true });
    writeFileSync(join(parent, 'u', 'memory.swap.max'), 'max');
    const g = cg.group('u', { memoryMaxBytes: GiB, pidsMax: null })!;
    expect(read(parent, 'u', 'memory.swap.max')).toBe('0');
    writeFileSync(join(parent, 'u', 'memory.current'), String(400 * 1024 ** 2));
    writeFileSync(join(parent, 'u', 'memory.swap.current'), String(0));
    await g.pageOut();
    expect(read(parent, 'u', 'memory.reclaim')).toBe(String(400 * 1024 ** 2));
    // Back to no swap past the limit while it runs: what was swapped stays swapped.
    expect(read(parent, 'u', 'memory.swap.max')).toBe('0');
    expect(g.usage().swapBytes).toBe(0);
  });

  it('opened again by a process that moved itself into its leaf: the runtimes\' parent stays beside the leaf', () => {
    const { own, host } = unified('memory pids');
    const moved = { ...host, selfCgroup: `0::/system.slice/agentws.service/agentws-service-${PID}\n` };
    const cg = openRuntimeCgroups(silentLogger, { want: { memory: true, pids: true }, total, host: moved });
    expect(cg.mechanisms()).toMatchObject({ memory: 'cgroup2', pids: 'cgroup2' });
    expect(cg.group('u', { memoryMaxBytes: GiB, pidsMax: 300 })!.procs).toEqual([join(own, `agentws-runtimes-${PID}`, 'u', 'cgroup.procs')]);
  });

  it('a controller the service\'s cgroup was not given is missing, and says so; the freezer still works', () => {
    const { host } = unified('cpu');
    const cg = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true, pids: true, cpu: true }, total, host });
    expect(cg.mechanisms()).toMatchObject({ freezer: 'cgroup2', cpu: 'cgroup2', memory: null, pids: null });
    expect(cg.mechanisms().unavailable.memory).toMatch(/no cgroup memory controller is mounted/);
  });
});

describe('runtime cgroups where none can be written', () => {
  it('says why for each limit: nothing mounted, or no writable cgroup (an unprivileged service, the container image)', () => {
    const none = openRuntimeCgroups(silentLogger, { want: { freezer: true, memory: true, pids: true, cpu: true }, total, host: { mountinfo: '22 1 8:1 / / rw - ext4 /dev/vda rw', selfCgroup: '0::/\n', pid: PID } });
    expect(none.mechanisms()).toMatchObject({ freezer: null, memory: null, pids: null, cpu: null });
    expect(none.mechanisms().unavailable.memory).toMatch(/no cgroup memory controller is mounted/);
    // No group to be born in: the runtime runs with none (status says why), never with a broken one.
    expect(none.group('u', { memoryMaxBytes: GiB, pidsMax: 300 })).toBeNull();
    // A cgroup filesystem that cannot take a new group (its mount point is a file here; EACCES or EROFS on a real host).
    const fs = scratch();
    writeFileSync(join(fs, 'memory'), '');
    const ro = openRuntimeCgroups(silentLogger, { want: { memory: true }, total, host: { mountinfo: mountLine(31, join(fs, 'memory'), 'cgroup', 'rw,memory'), selfCgroup: '4:memory:/\n', pid: PID } });
    expect(ro.mechanisms().unavailable.memory).toMatch(/cannot create a cgroup under .*memory \(ENOTDIR\)/);
  });
});

describe('limitsPrefix: the runtime\'s first process joins its groups before it runs anything', () => {
  it('writes its own pid into every group, raises its OOM score, caps file sizes, and keeps its pid through exec', () => {
    const d = scratch();
    const procs = [join(d, 'a.procs'), join(d, 'b.procs')];
    const argv = [...limitsPrefix({ procs, fileSizeBytes: 150 * 1024 ** 2 }), '/bin/sh', '-c', 'echo pid=$$; cat /proc/$$/oom_score_adj; ulimit -f'];
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: {} });
    expect(r.status, r.stderr).toBe(0);
    const pid = /pid=(\d+)/.exec(r.stdout)![1];
    for (const p of procs) expect(read(p)).toBe(pid);
    expect(r.stdout).toContain(`\n${RUNTIME_OOM_SCORE_ADJ}\n`);
    // dash counts ulimit -f in 512-byte blocks.
    expect(r.stdout.trim().split('\n').at(-1)).toBe(String((150 * 1024 ** 2) / 512));
  });
  it('with no group to join (no writable cgroup: the container image), still raises the OOM score and caps file sizes', () => {
    const argv = [...limitsPrefix({ procs: [], fileSizeBytes: 1024 * 1024 }), '/bin/sh', '-c', 'cat /proc/$$/oom_score_adj; ulimit -f'];
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: {} });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([String(RUNTIME_OOM_SCORE_ADJ), String(2048)]);
  });
  it('refuses to run what follows when a group cannot be joined (exit 125, the reason on stderr)', () => {
    const argv = [...limitsPrefix({ procs: ['/nonexistent/cgroup.procs'], fileSizeBytes: null }), '/bin/echo', 'ran'];
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', env: {} });
    expect(r.status).toBe(125);
    expect(r.stdout).not.toContain('ran');
    expect(r.stderr).toMatch(/cannot join the runtime's cgroup \/nonexistent\/cgroup\.procs/);
  });
});
