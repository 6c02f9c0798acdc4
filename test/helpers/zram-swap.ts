import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Compressed swap for a test or a benchmark that pages idle runtimes out, set up by it and
 * removed after, the way an operator's zram-tools would: a zram device with lzo-rle (as install.sh --zram chooses without zstd), made swap with a high
 * priority. A host that already has swap keeps it and the caller uses it (nothing is changed or removed).
 *
 * Several test processes (vitest's workers, a bench beside them, another engineer's run) may want it at
 * once, and a run may die half-way. So the swap this helper makes carries its own label in its swap
 * header (`agentws-test`), which is how a later run recognises it (and reuses it, or removes it when it
 * was left half made); and every caller registers its pid under /run/agentws-test-zram/users: the last
 * live user removes the swap, and a dead user's entry counts for nothing. /run and zram both end with a
 * reboot, so nothing stale outlives the device it describes.
 *
 * Skips (`swap: null` with the reason) where it cannot work: not root, no zram module.
 */
export interface ZramSwap {
  /** The zram device (`zram1`), or null when the host's own swap is used. */
  device: string | null;
  /** Whether this helper made the swap (it is then removed by the last user's teardown). */
  made: boolean;
  /** The swap's size (bytes), all swap areas together. */
  totalBytes: number;
  /** The device's figures (mm_stat): data stored (uncompressed), its compressed size, and the memory the pool takes; null without a zram device. */
  stats(): ZramStats | null;
  /** Unregisters this process; the last live user turns the swap off and resets (and removes) the device. */
  teardown(): Promise<void>;
}

interface ZramStats {
  origBytes: number;
  comprBytes: number;
  memUsedBytes: number;
}

export type ZramSwapSetup = { swap: ZramSwap; reason: null } | { swap: null; reason: string };

/** The swap header's volume label of the swap this helper makes (16 bytes at most). */
const ZRAM_LABEL = 'agentws-test';
const STATE_DIR = '/run/agentws-test-zram';
const USERS_DIR = join(STATE_DIR, 'users');
const LOCK_DIR = join(STATE_DIR, 'lock');
/**
 * Per device this helper configures, written before it touches it: `<device>.helper` holding `added` when
 * hot_add made the device (the teardown then hot_removes it), else `existing`. A device marked so but not
 * swapped on was left half made by a run that died.
 */
const marker = (device: string) => join(STATE_DIR, `${device}.helper`);
const GiB = 1024 ** 3;

const read = (file: string): string | null => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The system directories root's tools live in (mkswap, swapon, modprobe): a CI job's PATH may lack them. */
const SYSTEM_PATH = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

function run(cmd: string, args: string[]): { ok: boolean; out: string } {
  const path = [...(process.env.PATH ?? '').split(':').filter(Boolean), ...SYSTEM_PATH].join(':');
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120_000, env: { ...process.env, PATH: path } });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`.trim() };
}

/** The active swap areas (/proc/swaps): device path and size in bytes. */
function activeSwaps(): Array<{ path: string; bytes: number }> {
  return (read('/proc/swaps') ?? '')
    .split('\n')
    .slice(1)
    .filter(Boolean)
    .map((l) => l.trim().split(/\s+/))
    .map(([path, , size]) => ({ path, bytes: Number(size) * 1024 }));
}

/** A zram device's mm_stat: orig_data_size, compr_data_size, mem_used_total (the first three fields). */
function zramStats(device: string): ZramStats | null {
  const f = read(`/sys/block/${device}/mm_stat`)?.trim().split(/\s+/).map(Number);
  return f && f.length >= 3 ? { origBytes: f[0], comprBytes: f[1], memUsedBytes: f[2] } : null;
}

/** The label in a swap header (offset 1052: after bootbits, version, last_page, nr_badpages and the uuid), or null. */
function swapLabel(device: string): string | null {
  let fd: number | null = null;
  try {
    fd = openSync(`/dev/${device}`, 'r');
    const buf = Buffer.alloc(16);
    readSync(fd, buf, 0, 16, 1052);
    return buf.toString('latin1').replace(/\0.*$/s, '');
  } catch {
    return null;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

const zramDevices = () => (existsSync('/sys/block') ? readdirSync('/sys/block').filter((d) => /^zram\d+$/.test(d)) : []);
const diskSize = (device: string) => Number(read(`/sys/block/${device}/disksize`)?.trim() ?? NaN);
const mounted = (device: string) => (read('/proc/mounts') ?? '').split('\n').some((l) => l.startsWith(`/dev/${device} `));

/** Runs `fn` holding the helper's lock (a directory holding the holder's pid; a dead holder's lock is broken). */
async function locked<T>(fn: () => T): Promise<T> {
  mkdirSync(STATE_DIR, { recursive: true, mode: 0o700 });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(read(join(LOCK_DIR, 'pid')) ?? NaN);
      let age = 0;
      try {
        age = Date.now() - statSync(LOCK_DIR).mtimeMs;
      } catch {
        continue; // released meanwhile
      }
      // A holder that died (or one that made the directory and died before writing its pid).
      if (Number.isInteger(holder) ? !alive(holder) : age > 5000) rmSync(LOCK_DIR, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`${LOCK_DIR} is held by ${holder}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK_DIR, { recursive: true, force: true });
  }
}

/** This process's setups so far: each registers as its own user (`<pid>.<n>`), so a process may set up twice. */
let setups = 0;

/** The users of the helper's swap whose process still lives (`<pid>.<n>` entries; dead ones' are removed). */
function liveUsers(): string[] {
  mkdirSync(USERS_DIR, { recursive: true, mode: 0o700 });
  const out: string[] = [];
  for (const name of readdirSync(USERS_DIR)) {
    const pid = Number(name.split('.')[0]);
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) out.push(name);
    else rmSync(join(USERS_DIR, name), { force: true });
  }
  return out;
}

/** Turns off and resets a device this helper made (and hot_removes it if it added it). Errors are returned, not thrown. */
function unmake(device: string): string | null {
  const problems: string[] = [];
  if (activeSwaps().some((s) => s.path === `/dev/${device}`)) {
    const off = run('swapoff', [`/dev/${device}`]);
    if (!off.ok) problems.push(`swapoff /dev/${device}: ${off.out}`);
  }
  try {
    writeFileSync(`/sys/block/${device}/reset`, '1');
  } catch (err) {
    problems.push(`reset ${device}: ${(err as Error).message}`);
  }
  if (read(marker(device))?.trim() === 'added') {
    try {
      writeFileSync('/sys/class/zram-control/hot_remove', device.slice('zram'.length));
    } catch (err) {
      problems.push(`hot_remove ${device}: ${(err as Error).message}`);
    }
  }
  rmSync(marker(device), { force: true });
  return problems.length ? problems.join('; ') : null;
}

/**
 * Devices a previous run of this helper left behind, by their label: in use as swap (reused, when one is
 * on), or half made (disksize set but not swapped on, or with no live user at all: removed).
 */
function leftovers(): { on: string | null } {
  const swaps = activeSwaps();
  let on: string | null = null;
  for (const device of zramDevices()) {
    if (mounted(device)) continue;
    const isSwap = swaps.some((s) => s.path === `/dev/${device}`);
    const labelled = diskSize(device) > 0 && swapLabel(device) === ZRAM_LABEL;
    // Swapped on: this helper's by its label (a marker alone could be stale, the device someone else's since).
    if (isSwap) {
      if (!labelled) continue;
      if (on === null) on = device;
      else unmake(device);
    } else if (labelled || existsSync(marker(device))) unmake(device);
  }
  return { on };
}

/**
 * Compressed swap for the calling process: the host's swap when it has some, else a zram device set up
 * here (lzo-rle, `sizeBytes`, default 8 GiB; swap priority 100). Call `teardown()` after (afterAll, finally).
 */
export async function setUpZramSwap(o: { sizeBytes?: number; algorithm?: string } = {}): Promise<ZramSwapSetup> {
  if (process.getuid?.() !== 0) return { swap: null, reason: 'not root: swap cannot be set up' };
  if (!existsSync('/sys/class/zram-control') && zramDevices().length === 0) {
    run('modprobe', ['zram', 'num_devices=1']);
    if (!existsSync('/sys/class/zram-control') && zramDevices().length === 0) return { swap: null, reason: 'no zram module on this host (modprobe zram failed)' };
  }
  const sizeBytes = o.sizeBytes ?? 8 * GiB;
  return locked((): ZramSwapSetup => {
    const users = liveUsers();
    const { on } = leftovers();
    const user = `${process.pid}.${++setups}`;
    const register = () => writeFileSync(join(USERS_DIR, user), '');
    if (on) {
      // Made by this helper, for another live user now or by a run that died: shared either way.
      register();
      return { swap: made(on, user), reason: null };
    }
    // Users of a swap that is gone (turned off by hand, a reboot of the device): their entries mean nothing now.
    for (const u of users) rmSync(join(USERS_DIR, u), { force: true });
    const existing = activeSwaps();
    if (existing.length) return { swap: hostSwap(existing.reduce((a, s) => a + s.bytes, 0)), reason: null };

    let device = zramDevices().find((d) => diskSize(d) === 0 && !mounted(d));
    if (device) writeFileSync(marker(device), 'existing');
    else {
      const id = read('/sys/class/zram-control/hot_add')?.trim();
      if (!id || !/^\d+$/.test(id)) return { swap: null, reason: 'no free zram device, and /sys/class/zram-control/hot_add gave none' };
      device = `zram${id}`;
      writeFileSync(marker(device), 'added');
    }
    const fail = (what: string): ZramSwapSetup => {
      const also = unmake(device);
      return { swap: null, reason: `${what}${also ? ` (and cleaning up: ${also})` : ''}` };
    };
    const algorithms = read(`/sys/block/${device}/comp_algorithm`) ?? '';
    try {
      // The algorithm can only be chosen before the size is set: lzo-rle by default, as install.sh --zram
      // chooses on a kernel without zstd (this one).
      const algorithm = o.algorithm ?? 'lzo-rle';
      if (new RegExp(`(^|[\\s\\[])${algorithm}([\\s\\]]|$)`).test(algorithms)) writeFileSync(`/sys/block/${device}/comp_algorithm`, algorithm);
      writeFileSync(`/sys/block/${device}/disksize`, String(sizeBytes));
    } catch (err) {
      return fail(`cannot configure ${device}: ${(err as Error).message}`);
    }
    const mk = run('mkswap', ['-L', ZRAM_LABEL, `/dev/${device}`]);
    if (!mk.ok) return fail(`mkswap /dev/${device}: ${mk.out}`);
    const sw = run('swapon', ['-p', '100', `/dev/${device}`]);
    if (!sw.ok) return fail(`swapon /dev/${device}: ${sw.out}`);
    register();
    return { swap: made(device, user), reason: null };
  });
}

function made(device: string, user: string): ZramSwap {
  return {
    device,
    made: true,
    totalBytes: activeSwaps().find((s) => s.path === `/dev/${device}`)?.bytes ?? diskSize(device),
    stats: () => zramStats(device),
    teardown: () =>
      locked(() => {
        rmSync(join(USERS_DIR, user), { force: true });
        if (liveUsers().length > 0) return;
        const problem = existsSync(marker(device)) || swapLabel(device) === ZRAM_LABEL ? unmake(device) : null;
        if (problem) throw new Error(`removing the test swap: ${problem}`);
      }),
  };
}

function hostSwap(totalBytes: number): ZramSwap {
  const device = activeSwaps().map((s) => /^\/dev\/(zram\d+)$/.exec(s.path)?.[1]).find(Boolean) ?? null;
  return { device, made: false, totalBytes, stats: () => (device ? zramStats(device) : null), teardown: async () => {} };
}
