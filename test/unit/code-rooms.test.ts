import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The rooms of the house and what may import what. The floor: `src/kernel` (errors, events, logger,
 * context, authz, the permissions document), under `src/lib`, under the configuration and the database;
 * none of them imports the core. The boundary between what runs next to the agents and what
 * decides: a runner host runs `src/runner/` over `src/core/runtime/host/` and nothing
 * else of the appliance, so neither may import the control plane (services, repos, the database, the
 * gateway, keys): a machine that runs agent code must not even load it. Of the kernel they use errors
 * and the logger type, and `src/lib`. And no circle anywhere in `src`. The areas of the core (each
 * folder of `src/core`, the runtime host counted in the runtime) import one way: no two areas import each
 * other, so they stand in floors, each above what it uses; what a lower area needs of a higher one is a
 * port its factory is given (create-core.ts wires both).
 */
const root = resolve(import.meta.dirname, '../..');
/** What the runtime host and the runner may use of the floor (besides src/lib). */
const HOST_KERNEL = ['src/kernel/errors.ts', 'src/kernel/logger.ts'];
/**
 * Packages the runner may load: a tar reader, so that a drain's archive from another runner (which may be
 * hostile) is inspected entry by entry before anything is written (src/runner/user-files.ts). Nothing of
 * the appliance's control plane is a package.
 */
const RUNNER_PACKAGES = ['tar-stream'];
/**
 * Packages the runtime host (and so the runner) may load: a WebSocket client, to reach a runtime's pty
 * (a terminal: runtime-transport.ts, and the runner's bridge of it). A protocol library, nothing of the
 * control plane.
 */
const HOST_PACKAGES = ['ws'];

function filesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Every module a file imports: relative ones as repo paths, packages as their names. */
/** The modules a file imports (`kind`: only those imported for types, `import type`, or only the others). */
function importsOf(file: string, kind: 'all' | 'type' | 'value' = 'all'): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const statements = [...text.matchAll(/^(?:import|export)\s([^;]*?)\bfrom\s*'([^']+)'/gm)].filter((m) => kind === 'all' || /^type\s/.test(m[1]) === (kind === 'type'));
  const specs = [...statements.map((m) => m[2]), ...(kind === 'type' ? [] : [...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)].map((m) => m[1]))];
  return specs.map((spec) => (spec.startsWith('.') ? relative(root, resolve(dirname(join(root, file)), spec)).replace(/\.js$/, '.ts') : spec));
}

function outside(room: string, allowed: (target: string) => boolean): string[] {
  return filesUnder(room).flatMap((f) => importsOf(f).filter((t) => !allowed(t)).map((t) => `${f} imports ${t}`));
}

/** The area of the core a file is in: its folder under src/core; null outside (create-core.ts wires them). */
function areaOf(file: string): string | null {
  return /^src\/core\/([^/]+)\//.exec(file)?.[1] ?? null;
}

/** Every pair of core areas that import each other, with the imports that tie them each way. */
function areasImportingEachOther(): string[] {
  const ties = new Map<string, string[]>();
  for (const f of filesUnder('src/core')) {
    const from = areaOf(f);
    for (const t of importsOf(f)) {
      const to = areaOf(t);
      if (from && to && from !== to) ties.set(`${from} -> ${to}`, [...(ties.get(`${from} -> ${to}`) ?? []), `${f} imports ${t}`]);
    }
  }
  return [...ties.keys()].flatMap((k) => {
    const [a, b] = k.split(' -> ');
    const back = ties.get(`${b} -> ${a}`);
    return a < b && back ? [`${a} <-> ${b}: ${[...ties.get(k)!, ...back].join('; ')}`] : [];
  });
}

const isNode = (t: string) => t.startsWith('node:');
const isKernel = (t: string) => HOST_KERNEL.includes(t) || t.startsWith('src/lib/');
const inRoom = (room: string) => (t: string) => t.startsWith(`${room}/`);

describe('code rooms', () => {
  it('the runtime host (src/core/runtime/host) imports only itself, node, the kernel and a WebSocket client', () => {
    expect(outside('src/core/runtime/host', (t) => isNode(t) || isKernel(t) || HOST_PACKAGES.includes(t) || t.startsWith('src/core/runtime/host/'))).toEqual([]);
  });

  it('the runner (src/runner) imports only the runtime host, node, the kernel, a tar reader and a WebSocket client', () => {
    expect(outside('src/runner', (t) => isNode(t) || isKernel(t) || RUNNER_PACKAGES.includes(t) || HOST_PACKAGES.includes(t) || t.startsWith('src/runner/') || t.startsWith('src/core/runtime/host/'))).toEqual([]);
  });

  it('the kernel imports only itself; src/lib only the kernel and itself (pino is the logger\'s)', () => {
    expect(outside('src/kernel', (t) => isNode(t) || inRoom('src/kernel')(t))).toEqual([]);
    expect(outside('src/lib', (t) => isNode(t) || t === 'pino' || inRoom('src/kernel')(t) || inRoom('src/lib')(t))).toEqual([]);
  });

  it('the database and the configuration import nothing of the core', () => {
    for (const room of ['src/db', 'src/config', 'src/lib', 'src/kernel']) expect(outside(room, (t) => !inRoom('src/core')(t))).toEqual([]);
  });

  it('no file of src imports itself back through others (no circle)', () => {
    const files = filesUnder('src').filter((f) => !f.startsWith('src/web/'));
    const edges = new Map(files.map((f) => [f, importsOf(f).filter((t) => t.startsWith('src/'))]));
    // Depth-first search for a back edge; the path to it is the circle.
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const visit = (f: string, path: string[]) => {
      state.set(f, 'open');
      for (const t of edges.get(f) ?? []) {
        if (state.get(t) === 'open') circles.push([...path.slice(path.indexOf(t)), f, t].join(' -> '));
        else if (!state.has(t)) visit(t, [...path, f]);
      }
      state.set(f, 'done');
    };
    for (const f of files) if (!state.has(f)) visit(f, []);
    expect(circles).toEqual([]);
    expect(edges.get('src/http/build-app.ts')!.length).toBeGreaterThan(10);
  });

  it('the dashboard (src/web) shares of the rest of src only modules that import nothing (its bundle includes them); types only in wire.ts', () => {
    const webFiles = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? webFiles(join(dir, e.name)) : /\.tsx?$/.test(e.name) ? [join(dir, e.name)] : []));
    const outsideWeb = (f: string, typeOnly: boolean) => importsOf(f, typeOnly ? 'type' : 'value').filter((t) => t.startsWith('src/') && !t.startsWith('src/web/'));
    // The dashboard imports without extensions (the bundler's resolution): the shared module is a .ts file.
    const shared = [...new Set(webFiles('src/web').flatMap((f) => outsideWeb(f, false).map((t) => (t.endsWith('.ts') ? t : `${t}.ts`))))];
    expect(shared).toEqual(['src/lib/access-grammar.ts']);
    for (const f of shared) expect(importsOf(f)).toEqual([]);
    // The API's schemas, for the answers' types: type-only (esbuild drops them, the bundle takes nothing of
    // the server), in the one file that turns them into the dashboard's types.
    expect(webFiles('src/web').filter((f) => outsideWeb(f, true).length)).toEqual(['src/web/wire.ts']);
    expect(outsideWeb('src/web/wire.ts', true).every((t) => /\.(routes|schemas)\.ts$/.test(t))).toBe(true);
  });

  it('areas of the core import one way (no two areas import each other)', () => {
    expect(areasImportingEachOther()).toEqual([]);
  });

  it('sees the imports it checks (a room that imported nothing would pass by accident)', () => {
    expect(importsOf('src/runner/runner-agent.ts')).toContain('src/core/runtime/host/runtime-host.ts');
    expect(importsOf('src/core/runtime/runtime-pool.ts')).toContain('src/core/runtime/host/runtime-host.ts');
    // Areas: memories read embeddings (the one way); the runtime host is of the runtime.
    expect(importsOf('src/core/memories/memory-search.ts')).toContain('src/core/embeddings/model-key.ts');
    expect(areaOf('src/core/runtime/host/sandbox.ts')).toBe('runtime');
    expect(areaOf('src/core/runtime/runtime.service.ts')).toBe('runtime');
    expect(areaOf('src/core/create-core.ts')).toBeNull();
  });
});
