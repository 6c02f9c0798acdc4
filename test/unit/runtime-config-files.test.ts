import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { managedConfigDir, runtimeRoot, writeManagedConfig } from '../../src/core/runtime/host/managed-config.js';
import { createRuntimeLauncher, preparePluginDir, runtimeEnv } from '../../src/core/runtime/host/runtime-launcher.js';
import { bwrapArgs, OPENCODE_DIRS, type SandboxSpec } from '../../src/core/runtime/host/sandbox.js';

/** Where opencode reads configuration from inside a sandbox, and what the host writes (managed-config.ts). */
const dirs: string[] = [];
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), 'aws-cfg-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const spec: SandboxSpec = {
  workspace: '/data/workspaces/t/u',
  home: '/data/runtimes/u/home',
  tenant: '/data/tenants/t/shared',
  run: '/data/runtimes/u/run',
  tmpBytes: 1024 ** 3,
  etcDir: '/data/runtimes/u/etc',
  opencode: '/srv/opencode',
  nodeBinDir: null,
  pluginDir: '/data/runtimes/plugin',
  managedConfig: '/data/runtimes/u/managed',
  env: {},
  command: ['true'],
};

/** Index of a mount in bwrap's arguments (-1: absent). */
function mountAt(args: string[], kind: string, from: string, to: string): number {
  for (let i = 0; i + 2 < args.length; i++) if (args[i] === kind && args[i + 1] === from && args[i + 2] === to) return i;
  return -1;
}

describe('sandbox: opencode configuration directories', () => {
  const args = bwrapArgs(spec, { exists: () => true, symlink: () => null });

  it('binds the global and the home config directory read-only, after the home, over a pinned ~/.config', () => {
    const home = mountAt(args, '--bind', spec.home, '/home/agent');
    const pin = mountAt(args, '--bind', `${spec.home}/.config`, '/home/agent/.config');
    const global = mountAt(args, '--ro-bind', spec.pluginDir, OPENCODE_DIRS.global);
    const dotOpencode = mountAt(args, '--ro-bind', spec.pluginDir, OPENCODE_DIRS.home);
    expect(OPENCODE_DIRS).toEqual({ global: '/home/agent/.config/opencode', home: '/home/agent/.opencode', managed: '/etc/opencode' });
    expect(home).toBeGreaterThan(-1);
    expect(pin).toBeGreaterThan(home);
    expect(global).toBeGreaterThan(pin);
    expect(dotOpencode).toBeGreaterThan(home);
    // Nothing is bound writable under them.
    expect(args.filter((a, i) => args[i - 2] === '--bind' && (a.startsWith(OPENCODE_DIRS.global) || a.startsWith(OPENCODE_DIRS.home)))).toEqual([]);
  });

  it('binds the managed configuration directory read-only at /etc/opencode, before the root turns read-only', () => {
    const managed = mountAt(args, '--ro-bind', spec.managedConfig, '/etc/opencode');
    expect(managed).toBeGreaterThan(-1);
    // The root's remount (the last one: /dev's and /var's come before the binds).
    const rootReadOnly = args.findIndex((a, i) => a === '--remount-ro' && args[i + 1] === '/');
    expect(rootReadOnly).toBeGreaterThan(-1);
    expect(managed).toBeLessThan(rootReadOnly);
  });
});

describe('sandbox: every place the agent can write is bounded', () => {
  const args = bwrapArgs({ ...spec, tmpBytes: 64 * 1024 ** 2 }, { exists: () => true, symlink: () => null });
  const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((x, j) => args[i + j] === x));

  it('/tmp is a tmpfs of the given size (in the runtime\'s memory, not on the host\'s disk), not a host directory', () => {
    expect(at('--size', String(64 * 1024 ** 2), '--perms', '1777', '--tmpfs', '/tmp')).toBeGreaterThan(-1);
    expect(args.filter((a, i) => args[i - 1]?.endsWith('bind') && a.endsWith('/tmp'))).toEqual([]);
  });
  it('/dev/shm is a small tmpfs of its own, /dev and /var are read-only, /var/tmp leads to /tmp', () => {
    const shm = at('--tmpfs', '/dev/shm');
    expect(args.slice(shm - 4, shm)).toEqual(['--size', String(64 * 1024 ** 2), '--perms', '1777']);
    expect(at('--remount-ro', '/dev')).toBeGreaterThan(shm);
    expect(at('--symlink', '../tmp', '/var/tmp')).toBeGreaterThan(at('--tmpfs', '/var'));
    expect(at('--remount-ro', '/var')).toBeGreaterThan(at('--symlink', '../tmp', '/var/tmp'));
  });
});

describe('runtime environment', () => {
  const base = { home: '/home/agent', password: 'pw', proxy: 'http://127.0.0.1:3128', path: '/usr/bin', tmp: '/tmp' };

  it('takes no credentials (and no remote configuration) from the agent-writable auth.json, and loads no plugin', () => {
    expect(runtimeEnv(base).OPENCODE_AUTH_CONTENT).toBe('{}');
    expect(runtimeEnv(base).OPENCODE_PURE).toBe('1');
  });

  it('names the managed directory only for an unsandboxed runtime (inside, opencode looks at /etc/opencode)', () => {
    expect(runtimeEnv(base).OPENCODE_TEST_MANAGED_CONFIG_DIR).toBeUndefined();
    expect(runtimeEnv({ ...base, managed: '/data/runtimes/u/managed' }).OPENCODE_TEST_MANAGED_CONFIG_DIR).toBe('/data/runtimes/u/managed');
    for (const k of ['OPENCODE_CONFIG', 'OPENCODE_CONFIG_DIR', 'OPENCODE_CONFIG_CONTENT']) expect(runtimeEnv(base)[k]).toBeUndefined();
  });
});

describe('managed configuration file', () => {
  it('is written whole, private to the service user, and rewritten only when it changes', () => {
    const dir = managedConfigDir(runtimeRoot(scratch(), 'user-1'));
    expect(writeManagedConfig(dir, { share: 'disabled', mcp: { memory: { type: 'remote' } } })).toBe(true);
    const file = join(dir, 'opencode.json');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ $schema: 'https://opencode.ai/config.json', share: 'disabled', mcp: { memory: { type: 'remote' } } });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(writeManagedConfig(dir, { share: 'disabled', mcp: { memory: { type: 'remote' } } })).toBe(false);
    expect(writeManagedConfig(dir, { share: 'disabled' })).toBe(true);
    expect(JSON.parse(readFileSync(file, 'utf8')).mcp).toBeUndefined();
    expect(readdirSync(dir)).toEqual(['opencode.json']);
  });

  it('the prepared config directory holds an empty configuration and what opencode would otherwise write there', () => {
    const plugin = preparePluginDir(scratch());
    expect(JSON.parse(readFileSync(join(plugin, 'opencode.json'), 'utf8'))).toEqual({ $schema: 'https://opencode.ai/config.json' });
    expect(readFileSync(join(plugin, '.gitignore'), 'utf8')).toMatch(/node_modules/);
    expect(existsSync(join(plugin, 'node_modules', '@opencode-ai', 'plugin', 'package.json'))).toBe(true);
  });
});

describe('launcher: the config mount points in the home are directories before bwrap binds them', () => {
  it('replaces a symlink or a file the agent left there, and leaves what it points to alone', () => {
    const dataDir = scratch();
    const outside = join(scratch(), 'host-dir');
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep'), 'x');
    const root = runtimeRoot(dataDir, 'user-1');
    const home = join(root, 'home');
    mkdirSync(home, { recursive: true });
    symlinkSync(outside, join(home, '.config'));
    writeFileSync(join(home, '.opencode'), 'not a directory');
    const launcher = createRuntimeLauncher({ dataDir, sandbox: true, nice: 0, log: silentLogger });
    const d = launcher.prepare({ workspace: join(dataDir, 'ws'), root, tenant: join(dataDir, 'tenant') });
    for (const p of ['.config', '.config/opencode', '.opencode']) expect(lstatSync(join(home, p)).isDirectory(), p).toBe(true);
    expect(readdirSync(outside)).toEqual(['keep']);
    expect(d.managed).toBe(managedConfigDir(root));
    expect(statSync(d.managed).isDirectory()).toBe(true);
  });
});
