import { execFile } from 'node:child_process';
import { existsSync, statfsSync } from 'node:fs';
import { nicePrefix } from './opencode-process.js';

/**
 * What a person's files take on the host's disk, and what the disk has left: the workspace quota is a
 * measured one (runtime-host.ts watches it; docs/admin/limits.md, "Workspace quota", says why and what it does not
 * cover). du runs in a child process at low priority, off the service's event loop: ~0.3 s for 100,000
 * files here, where a walk in Node took ~0.55 s of the event loop.
 */

/** The filesystem holding `dir`: its size and what is left, in bytes and inodes (what an unprivileged writer can still use). */
export interface DiskSpace {
  totalBytes: number;
  freeBytes: number;
  totalInodes: number;
  freeInodes: number;
}

export function diskSpace(dir: string): DiskSpace | null {
  try {
    const s = statfsSync(dir);
    return { totalBytes: s.blocks * s.bsize, freeBytes: s.bavail * s.bsize, totalInodes: s.files, freeInodes: s.ffree };
  } catch {
    return null;
  }
}

/**
 * The bytes the files under `paths` take on disk (blocks, as du counts them: a sparse file counts what it
 * holds, a file linked twice once), on their filesystem only (-x: nothing mounted below counts). Null
 * when none of them exists or du fails.
 */
export function measureDisk(paths: readonly string[], o: { nice?: number; timeoutMs?: number } = {}): Promise<number | null> {
  const present = paths.filter((p) => existsSync(p));
  if (!present.length) return Promise.resolve(0);
  const argv = [...nicePrefix(o.nice ?? 10), 'du', '-sxcB1', '--', ...present];
  return new Promise((resolve) => {
    execFile(argv[0], argv.slice(1), { timeout: o.timeoutMs ?? 120_000, maxBuffer: 1024 * 1024 }, (err, stdout) => {
      // du exits 1 when a file vanished while it walked (the agent deleting as it works): its total stands.
      const total = /^(\d+)\s+total$/m.exec(stdout ?? '');
      if (total) return resolve(Number(total[1]));
      resolve(err ? null : 0);
    });
  });
}
