import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * install.sh's compressed swap (--zram) and the units it renders, run for real: the script writes into a
 * temporary directory (--zram-dir, --unit-dir), where it installs, applies and starts nothing (no apt-get,
 * sysctl or systemctl), and the files it wrote are read back.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'agentws-install-zram-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function install(args: string[]): { status: number | null; stdout: string; stderr: string } {
  // The Node.js running the tests first on PATH: --systemd checks for Node.js >= 24 and would install one.
  const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
  const r = spawnSync('bash', ['install.sh', '--no-npm', ...args], { cwd: ROOT, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What the kernel offers zram, as install.sh reads it: a zram device's list, else /proc/crypto. */
function offeredAlgorithms(): string[] {
  const dev = existsSync('/sys/block') ? readdirSync('/sys/block').find((d) => d.startsWith('zram') && existsSync(`/sys/block/${d}/comp_algorithm`)) : undefined;
  if (dev) return readFileSync(`/sys/block/${dev}/comp_algorithm`, 'utf8').replace(/[[\]]/g, '').trim().split(/\s+/);
  return [...readFileSync('/proc/crypto', 'utf8').matchAll(/^name\s*:\s*(\S+)/gm)].map((m) => m[1]);
}
const offered = offeredAlgorithms();
const expectedAlgorithm = offered.includes('zstd') ? 'zstd' : offered.includes('lzo-rle') ? 'lzo-rle' : 'lz4';
const [major, minor] = release().split('.').map(Number);
const expectedSwappiness = major > 5 || (major === 5 && minor >= 8) ? 180 : 100;
const memTotalMiB = Math.floor(Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) / 1024);

/** KEY = value lines of an ini or sysctl file, comments left out. */
function settings(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([\w.-]+)\s*=\s*(.*?)\s*$/.exec(line);
    if (m && !line.trimStart().startsWith('#')) out[m[1]] = m[2];
  }
  return out;
}

describe('install.sh --zram, rendered into a directory', () => {
  const dir = join(work, 'generator');
  const generatorConf = join(dir, 'etc/systemd/zram-generator.conf.d/90-agentws.conf');
  const sysctlConf = join(dir, 'etc/sysctl.d/90-agentws-zram.conf');

  it('writes a zram-generator drop-in sized from RAM, with the compressor the kernel offers, and the sysctls', () => {
    const hostSysctlBefore = existsSync('/etc/sysctl.d/90-agentws-zram.conf');
    const r = install(['--zram', '--zram-dir', dir, '--zram-backend', 'generator']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('--zram-dir: nothing installed, applied or started');
    expect(r.stdout).toBe('');

    const conf = readFileSync(generatorConf, 'utf8');
    expect(conf).toMatch(/^\[zram0\]$/m);
    expect(settings(conf)).toEqual({
      // 2x RAM before compression (what the runtimes RAM holds paged out put in swap), at most 150000 MiB.
      'zram-size': 'min(ram * 200 / 100, 150000)',
      'compression-algorithm': expectedAlgorithm,
      'swap-priority': '100',
    });
    expect(settings(readFileSync(sysctlConf, 'utf8'))).toEqual({ 'vm.swappiness': String(expectedSwappiness), 'vm.page-cluster': '0' });
    // The database on this host is the control plane's: out of swap too.
    expect(readFileSync(join(dir, 'etc/systemd/system/postgresql@.service.d/90-agentws-noswap.conf'), 'utf8')).toMatch(/^\[Service\]\nMemorySwapMax=0$/m);
    // The package's own /etc/systemd/zram-generator.conf (a conffile) is left alone: the drop-in overrides it.
    expect(existsSync(join(dir, 'etc/systemd/zram-generator.conf'))).toBe(false);
    // Nothing was written on the host itself.
    expect(existsSync('/etc/sysctl.d/90-agentws-zram.conf')).toBe(hostSysctlBefore);
  });

  it('run again, changes nothing', () => {
    const before = [generatorConf, sysctlConf].map((f) => [readFileSync(f, 'utf8'), statSync(f).mtimeMs]);
    const r = install(['--zram', '--zram-dir', dir, '--zram-backend', 'generator']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`unchanged: ${generatorConf}`);
    expect(r.stderr).toContain(`unchanged: ${sysctlConf}`);
    expect([generatorConf, sysctlConf].map((f) => [readFileSync(f, 'utf8'), statSync(f).mtimeMs])).toEqual(before);
  });

  const generator = ['/lib/systemd/system-generators/zram-generator', '/usr/lib/systemd/system-generators/zram-generator'].find((f) => existsSync(f));
  it.runIf(generator)("is read by this host's zram-generator: it makes the swap unit at priority 100", () => {
    // ZRAM_GENERATOR_ROOT (zram-generator.conf(5)): the generator reads the configuration and /proc/meminfo there.
    mkdirSync(join(dir, 'proc'), { recursive: true });
    writeFileSync(join(dir, 'proc/meminfo'), readFileSync('/proc/meminfo')); // (copyFile sees procfs's size 0)
    const out = join(work, 'generated');
    mkdirSync(out);
    const r = spawnSync(generator!, [out], { env: { ...process.env, ZRAM_GENERATOR_ROOT: dir }, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(out, 'dev-zram0.swap'), 'utf8')).toMatch(/^Priority=100$/m);
  });

  it('falls back to zram-tools: its block goes after the operator\'s settings, once, with a size computed from RAM', () => {
    const tools = join(work, 'zram-tools');
    const file = join(tools, 'etc/default/zramswap');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, '# the operator\'s own\n#ALGO=lz4\nPERCENT=50\nPRIORITY=5\n');
    for (let i = 0; i < 2; i++) {
      const r = install(['--zram', '--zram-dir', tools, '--zram-backend', 'zram-tools']);
      expect(r.status, r.stderr).toBe(0);
    }
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith("# the operator's own\n#ALGO=lz4\nPERCENT=50\nPRIORITY=5\n")).toBe(true);
    expect(text.match(/agentws install.sh --zram: begin/g)).toHaveLength(1);
    // What zramswap gets: it sources the file, later lines winning, and an empty PERCENT leaves SIZE (MiB) in force.
    const sourced = spawnSync('bash', ['-c', `. '${file}'; printf '%s|%s|%s|%s' "$ALGO" "$PERCENT" "$SIZE" "$PRIORITY"`], { encoding: 'utf8' });
    expect(sourced.stdout).toBe(`${expectedAlgorithm}||${Math.min(Math.floor((memTotalMiB * 200) / 100), 150000)}|100`);
    expect(settings(readFileSync(join(tools, 'etc/sysctl.d/90-agentws-zram.conf'), 'utf8'))['vm.page-cluster']).toBe('0');
  });

  it('takes a compressor the kernel offers, and refuses one it does not', () => {
    const chosen = offered.find((a) => a !== expectedAlgorithm) ?? expectedAlgorithm;
    const ok = install(['--zram', '--zram-dir', join(work, 'chosen'), '--zram-backend', 'generator', '--zram-algorithm', chosen]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(settings(readFileSync(join(work, 'chosen/etc/systemd/zram-generator.conf.d/90-agentws.conf'), 'utf8'))['compression-algorithm']).toBe(chosen);
    const bad = install(['--zram', '--zram-dir', join(work, 'bad'), '--zram-backend', 'generator', '--zram-algorithm', 'no-such-compressor']);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain('--zram-algorithm no-such-compressor: this kernel offers zram only:');
    expect(existsSync(join(work, 'bad/etc/systemd/zram-generator.conf.d/90-agentws.conf'))).toBe(false);
  });

  it('refuses --zram-dir with --no-zram, and an unknown backend', () => {
    expect(install(['--no-zram', '--zram-dir', join(work, 'x')]).status).toBe(2);
    const r = install(['--zram', '--zram-dir', join(work, 'x'), '--zram-backend', 'zswap']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--zram-backend is generator or zram-tools');
  });
});

describe('install.sh --systemd: the units and compressed swap', () => {
  it('keeps the worker out of swap; not serve or the runner, whose limit would hold for their runtimes too', () => {
    const units = join(work, 'units');
    const r = install(['--systemd', '--unit-dir', units, '--no-zram']);
    expect(r.status, r.stderr).toBe(0);
    const directive = (unit: string) => readFileSync(join(units, unit), 'utf8').split('\n').filter((l) => l.startsWith('MemorySwapMax='));
    expect(directive('agentws-worker@.service')).toEqual(['MemorySwapMax=0']);
    expect(directive('agentws-serve.service')).toEqual([]);
    expect(directive('agentws-runner.service')).toEqual([]);
    expect(readFileSync(join(units, 'agentws-serve.service'), 'utf8')).toMatch(/^Delegate=yes$/m);
    // --no-zram: not asked, nothing said about it.
    expect(r.stderr).not.toMatch(/compressed swap/);
  });

  it('without a terminal and without --zram or --no-zram, sets nothing up and says in one line how to', () => {
    const r = install(['--systemd', '--unit-dir', join(work, 'units-2')]);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stderr.split('\n').filter((l) => /compressed swap/.test(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('--zram');
  });
});
