import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UnavailableError } from '../../../kernel/errors.js';

/**
 * The agent runtime's binary: `opencode` (opencode-ai 1.18.33) from the npm package for this platform,
 * started per user by runtime-launcher.ts.
 *
 * Facts relied on (measured on opencode 1.18.33): `opencode serve` prints exactly one stdout line,
 * `opencode server listening on http://127.0.0.1:<port>` (with `--port 0` it tries 4096 first, so the
 * port is read from that line); `GET /global/health` answers `{"healthy":true,"version":"1.18.33"}`;
 * every route wants HTTP Basic auth as user `opencode` with OPENCODE_SERVER_PASSWORD.
 */
export const OPENCODE_VERSION = '1.18.33';

/** Path of the opencode binary that ships inside the npm package for this platform. */
export function opencodeBinary(): string {
  const require = createRequire(import.meta.url);
  const candidates = [`opencode-${process.platform}-${process.arch}`, `opencode-${process.platform}-${process.arch}-baseline`];
  for (const pkg of candidates) {
    try {
      const bin = join(dirname(require.resolve(`${pkg}/package.json`)), 'bin', 'opencode');
      if (existsSync(bin)) return bin;
    } catch {
      // not installed for this platform; try the next
    }
  }
  throw new UnavailableError(`no opencode ${OPENCODE_VERSION} binary for ${process.platform}-${process.arch}`, {
    code: 'runtime_unavailable',
    hint: 'Reinstall dependencies (`npm ci`) on this machine.',
  });
}

/**
 * What runs the runtime at the given niceness: coreutils' `nice`, which execs what follows, so every
 * thread and every process the runtime later starts (the agent's bash, builds, tests) inherits it and
 * the pid is still the started program's own. Empty at niceness 0, or where `nice` is missing.
 */
export function nicePrefix(nice: number): string[] {
  if (nice <= 0) return [];
  const niceBin = ['/usr/bin/nice', '/bin/nice'].find((p) => existsSync(p));
  return niceBin ? [niceBin, '-n', String(nice)] : [];
}
