import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The boundary between what runs next to the agents and what decides (issue 26, item 7): a runner host
 * runs `src/runner/` over `src/core/runtime/host/` and nothing else of the appliance, so neither may
 * import the control plane (services, repos, the database, the gateway, keys): a machine that runs agent
 * code must not even load it. The kernel they may use: errors, the logger type, and `src/lib`.
 */
const root = resolve(import.meta.dirname, '../..');
const KERNEL = ['src/core/errors.ts', 'src/core/logger.ts'];

function filesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Every module a file imports: relative ones as repo paths, packages as their names. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const specs = [...text.matchAll(/^(?:import|export)\s[^;]*?\bfrom\s*'([^']+)'/gm), ...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)].map((m) => m[1]);
  return specs.map((spec) => (spec.startsWith('.') ? relative(root, resolve(dirname(join(root, file)), spec)).replace(/\.js$/, '.ts') : spec));
}

function outside(room: string, allowed: (target: string) => boolean): string[] {
  return filesUnder(room).flatMap((f) => importsOf(f).filter((t) => !allowed(t)).map((t) => `${f} imports ${t}`));
}

const isNode = (t: string) => t.startsWith('node:');
const isKernel = (t: string) => KERNEL.includes(t) || t.startsWith('src/lib/');

describe('code rooms', () => {
  it('the runtime host (src/core/runtime/host) imports only itself, node and the kernel', () => {
    expect(outside('src/core/runtime/host', (t) => isNode(t) || isKernel(t) || t.startsWith('src/core/runtime/host/'))).toEqual([]);
  });

  it('the runner (src/runner) imports only the runtime host, node and the kernel', () => {
    expect(outside('src/runner', (t) => isNode(t) || isKernel(t) || t.startsWith('src/runner/') || t.startsWith('src/core/runtime/host/'))).toEqual([]);
  });

  it('the kernel imports nothing of the rooms above it', () => {
    // url-guard's errors are the kernel's own; pino is the logger's.
    const kernelFiles = [...KERNEL, ...filesUnder('src/lib')];
    const above = kernelFiles.flatMap((f) => importsOf(f).filter((t) => !isNode(t) && !isKernel(t) && t !== 'pino').map((t) => `${f} imports ${t}`));
    expect(above).toEqual([]);
  });

  it('sees the imports it checks (a room that imported nothing would pass by accident)', () => {
    expect(importsOf('src/runner/runner-agent.ts')).toContain('src/core/runtime/host/runtime-host.ts');
    expect(importsOf('src/core/runtime/runtime-pool.ts')).toContain('src/core/runtime/host/runtime-host.ts');
  });
});
