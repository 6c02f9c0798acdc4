#!/usr/bin/env node
// Production entry: compiled commands under dist/, loaded lazily through oclif.manifest.json.
import module from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE_MAJOR = 24; // package.json engines
if (Number(process.versions.node.split('.')[0]) < NODE_MAJOR) {
  process.stderr.write(
    `aws needs Node.js >= ${NODE_MAJOR}; this is ${process.version} (${process.execPath}).\n` +
      `Put Node.js ${NODE_MAJOR} first on PATH, or run \`./install.sh --with-node\`, which installs it and says how.\n`,
  );
  process.exit(1);
}

// Node keeps V8's compiled code of the CLI and its dependencies between runs (the module compile cache),
// which takes about a third off `aws --help`. Per user (root and the service user each have their own
// ~/.cache); a directory that cannot be written only loses the speed-up. NODE_COMPILE_CACHE and
// NODE_DISABLE_COMPILE_CACHE still decide when set.
try {
  const cacheHome = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  module.enableCompileCache?.(process.env.NODE_COMPILE_CACHE || join(cacheHome, 'agentws', 'node-compile-cache'));
} catch {
  // no home directory: run without the cache
}
// oclif's own check compares Node with @oclif/core's engines, not ours (checked above), and loading semver
// for it costs about 10 ms of every command's start.
process.env.OCLIF_DISABLE_ENGINE_WARNING ??= '1';

// Help (`aws`, `aws --help`, `aws help user`, `aws user`, `aws user list --help`) is rendered from oclif's
// manifest by a port of oclif's help that needs Node's built-ins only: loading @oclif/core was most of the
// time `aws --help` took. It declines whatever it cannot answer exactly as oclif would (an unknown
// command, --version, every real command), and oclif runs as before. Without a build (no manifest) it
// declines too.
const { fastHelp } = await import('../dist/src/cli/fast-help.js').catch(() => ({ fastHelp: () => false }));
if (!fastHelp(process.argv.slice(2), fileURLToPath(new URL('..', import.meta.url)))) {
  // Imported only now, so that the cache serves what it loads; the `execute` entry alone, not the whole of
  // @oclif/core (a command loads the rest when it runs).
  const { execute } = await import('@oclif/core/execute');
  await execute({ dir: import.meta.url });
}
