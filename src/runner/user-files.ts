import { randomBytes } from 'node:crypto';
import { chmodSync, createWriteStream, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { SANDBOX_PATHS, SYSTEM_DIRS } from '../core/runtime/host/sandbox.js';
import { WORKSPACES_DIR, workspacePath } from '../lib/data-paths.js';

/**
 * A user's files on a runner host: their workspace (`workspaces/<tenant id>/<user id>`) and their
 * runtime's home (`runtimes/<user id>/home`: its sessions database, so the transcript), and which copy
 * of them this is.
 *
 * A user's files are in one place at a time: where their placement is. Each copy carries the fence of
 * the placement it was made current under (the control plane's `filesFence`, in `runtimes/<user>/copy.json`,
 * outside anything a sandbox mounts). A runtime starts on a copy only if that is the copy the control
 * plane says is current; any other copy (left behind by a drain, or by a runner that was lost and came
 * back, or by one that froze) is set aside under `recovered/`, which no runtime mounts, for an operator
 * to look at, never used silently.
 *
 * A drain's copy arrives as a tar stream from the runner it leaves, which may be hostile: the archive is
 * inspected entry by entry and extracted into an empty staging directory by this code (no `tar`
 * binary following links), and moved into place only when all of it was good.
 */

const ID = /^[A-Za-z0-9-]{1,64}$/;
/** The copy's marker beside (not in) the runtime's home. */
const MARKER = 'copy.json';
export const RECOVERED_DIR = 'recovered';

export interface UserRef {
  tenantId: string;
  userId: string;
}

/** The two places of a user's files, relative to the data dir ('/'-separated); null for ids that are not ids. */
export function userPaths(o: UserRef): { workspace: string; home: string } | null {
  if (!ID.test(o.tenantId) || !ID.test(o.userId)) return null;
  return { workspace: workspacePath(o).split('\\').join('/'), home: posix.join('runtimes', o.userId, 'home') };
}

const markerPath = (dataDir: string, userId: string) => join(dataDir, 'runtimes', userId, MARKER);

/** Which copy the files of `userId` here are: the fence they were made current under, and whose; null: unmarked. */
export function readCopy(dataDir: string, userId: string): { filesFence: number; tenantId: string | null } | null {
  try {
    const m = JSON.parse(readFileSync(markerPath(dataDir, userId), 'utf8')) as { filesFence?: unknown; tenantId?: unknown };
    return typeof m.filesFence === 'number' ? { filesFence: m.filesFence, tenantId: typeof m.tenantId === 'string' ? m.tenantId : null } : null;
  } catch {
    return null;
  }
}

export function markCopy(dataDir: string, o: UserRef, filesFence: number): void {
  mkdirSync(join(dataDir, 'runtimes', o.userId), { recursive: true, mode: 0o700 });
  writeFileSync(markerPath(dataDir, o.userId), JSON.stringify({ filesFence, tenantId: o.tenantId }), { mode: 0o600 });
}

/** Whether any file of the user is here (their workspace or their runtime's home). */
export function hasCopy(dataDir: string, o: UserRef): boolean {
  const p = userPaths(o);
  return !!p && (existsSync(join(dataDir, p.workspace)) || existsSync(join(dataDir, p.home)));
}

/**
 * Moves the user's files here out of every sandbox's reach, to `recovered/<time>-<user>/{workspace,home}`
 * with `about.json` saying whose they are and why. Returns that directory (relative), or null when there
 * was nothing to keep.
 */
export function setAside(dataDir: string, o: UserRef, why: string, now = new Date()): string | null {
  const p = userPaths(o);
  if (!p) return null;
  const present = ([['workspace', p.workspace], ['home', p.home]] as const).filter(([, rel]) => existsSync(join(dataDir, rel)));
  rmSync(markerPath(dataDir, o.userId), { force: true });
  if (!present.length) return null;
  const rel = posix.join(RECOVERED_DIR, `${now.toISOString().replace(/[:.]/g, '-')}-${o.userId}`);
  const to = join(dataDir, rel);
  mkdirSync(to, { recursive: true, mode: 0o700 });
  for (const [name, from] of present) renameSync(join(dataDir, from), join(to, name));
  writeFileSync(join(to, 'about.json'), `${JSON.stringify({ tenantId: o.tenantId, userId: o.userId, setAsideAt: now.toISOString(), why }, null, 2)}\n`, { mode: 0o600 });
  return rel;
}

/** Removes the user's files here (a drain confirmed their copy on another runner). */
export function discard(dataDir: string, o: UserRef): boolean {
  const p = userPaths(o);
  if (!p) return false;
  const had = hasCopy(dataDir, o);
  rmSync(join(dataDir, p.workspace), { recursive: true, force: true });
  rmSync(join(dataDir, p.home), { recursive: true, force: true });
  rmSync(markerPath(dataDir, o.userId), { force: true });
  return had;
}

/**
 * The users whose files are here, with the copy each is (its marker) where known: workspaces by tenant
 * and user, and runtime homes (whose tenant only the marker knows).
 */
export function listCopies(dataDir: string): Array<{ userId: string; tenantId: string | null; filesFence: number | null }> {
  const out = new Map<string, { userId: string; tenantId: string | null; filesFence: number | null }>();
  const dirs = (p: string) => {
    try {
      return readdirSync(p, { withFileTypes: true }).filter((e) => e.isDirectory() && ID.test(e.name)).map((e) => e.name);
    } catch {
      return [];
    }
  };
  for (const tenantId of dirs(join(dataDir, WORKSPACES_DIR))) for (const userId of dirs(join(dataDir, WORKSPACES_DIR, tenantId))) out.set(userId, { userId, tenantId, filesFence: null });
  for (const userId of dirs(join(dataDir, 'runtimes'))) {
    if (!existsSync(join(dataDir, 'runtimes', userId, 'home')) && !out.has(userId)) continue;
    const m = readCopy(dataDir, userId);
    const had = out.get(userId);
    out.set(userId, { userId, tenantId: had?.tenantId ?? m?.tenantId ?? null, filesFence: m?.filesFence ?? null });
  }
  return [...out.values()];
}

/** An archive refused: what was wrong, for the drain's log and the control plane's error. */
export class ArchiveRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveRefused';
  }
}

/**
 * Where an absolute symlink may point: what every sandbox shows (the user's own workspace and home, its
 * tmp, the read-only system and the runtime's own binaries). An absolute target is read inside the
 * sandbox, so these name nothing of the host beyond what the agent already sees (a Python venv's
 * `bin/python -> /usr/bin/python3` is one); any other absolute path would name something only the
 * host has.
 */
const SYMLINK_ROOTS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.home, SANDBOX_PATHS.tmp, SANDBOX_PATHS.opt, ...SYSTEM_DIRS];
/** Mount points inside the home that the sandbox binds by their host path: never a link (sandbox.ts). */
const HOME_MOUNT_POINTS = ['.config', '.config/opencode', '.opencode'];

/**
 * Inspects the archive of the user's files (what `GET /export` of the runner they leave sends) and, if
 * every entry is good, puts it in place of whatever copy of them is here, marked as the copy made current
 * under `filesFence`. Refused (ArchiveRefused), with nothing here changed, when an entry:
 *  - has an absolute name, an empty, `.` or `..` segment, or lies outside the user's two paths;
 *  - is of a kind other than a directory, a regular file, a symlink or a hard link (devices, fifos...);
 *  - makes either of the user's two paths, or a mount point of the home, anything but a directory;
 *  - lies at or under a symlink of the archive (it would be written through it);
 *  - is a hard link to anything but a regular file earlier in the same archive, under the user's paths
 *    (a link to another user's or tenant's file here would give the sandbox that file);
 *  - is a symlink whose target leaves the user's own path (relative, climbing out of it) or, absolute,
 *    points anywhere but what a sandbox shows (SYMLINK_ROOTS).
 * Owners and set-id bits are never taken from the archive.
 */
export async function importArchive(dataDir: string, o: UserRef & { filesFence: number }, input: Readable): Promise<{ files: number; bytes: number }> {
  const paths = userPaths(o);
  if (!paths) throw new ArchiveRefused('tenantId and userId are not ids');
  const tops = [paths.workspace, paths.home];
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const staging = join(dataDir, `.import-${o.userId}-${randomBytes(6).toString('hex')}`);
  mkdirSync(staging, { mode: 0o700 });
  const files = new Set<string>();
  const links = new Set<string>();
  let count = 0;
  let bytes = 0;
  try {
    const extract = tar.extract();
    extract.on('entry', (header, stream, next) => {
      stream.on('error', () => {});
      const refuse = (why: string) => {
        stream.resume();
        next(new ArchiveRefused(`${why}: "${String(header.name).slice(0, 200)}"`));
      };
      const name = String(header.name ?? '').replace(/\/+$/, '');
      const segments = name.split('/');
      if (!name || name.startsWith('/') || name.includes('\0') || segments.some((s) => s === '' || s === '.' || s === '..')) return refuse('an entry with an absolute, empty or climbing name');
      const top = tops.find((t) => name === t || name.startsWith(`${t}/`));
      if (!top) return refuse('an entry outside the user\'s workspace and runtime home');
      for (const l of links) if (name === l || name.startsWith(`${l}/`)) return refuse('an entry at or under a symlink of the archive');
      const inHome = top === paths.home ? name.slice(top.length + 1) : null;
      const mountPoint = name === top || (inHome !== null && HOME_MOUNT_POINTS.includes(inHome));
      if (mountPoint && header.type !== 'directory') return refuse('the user\'s directory, or a mount point in it, as something other than a directory');
      const target = join(staging, name);
      try {
        if (header.type === 'directory') {
          mkdirSync(target, { recursive: true, mode: 0o700 });
          chmodSync(target, ((header.mode ?? 0o755) & 0o777) | 0o700);
          stream.resume();
          stream.on('end', () => next());
          return;
        }
        mkdirSync(join(target, '..'), { recursive: true, mode: 0o700 });
        if (header.type === 'symlink') {
          const to = String(header.linkname ?? '');
          if (!to || to.includes('\0')) return refuse('a symlink without a target');
          if (to.startsWith('/')) {
            const n = posix.normalize(to);
            if (!SYMLINK_ROOTS.some((r) => n === r || n.startsWith(`${r}/`))) return refuse(`a symlink to ${to.slice(0, 100)}, outside what the user's sandbox shows`);
          } else {
            const resolved = posix.normalize(posix.join(posix.dirname(name), to));
            if (resolved !== top && !resolved.startsWith(`${top}/`)) return refuse(`a symlink to ${to.slice(0, 100)}, out of the user's own files`);
          }
          symlinkSync(to, target);
          links.add(name);
          stream.resume();
          stream.on('end', () => next());
          return;
        }
        if (header.type === 'link') {
          const from = String(header.linkname ?? '').replace(/\/+$/, '');
          if (!files.has(from)) return refuse('a hard link to anything but a file earlier in the archive, under the user\'s paths');
          linkSync(join(staging, from), target);
          stream.resume();
          stream.on('end', () => next());
          return;
        }
        if (header.type !== 'file') return refuse(`an entry of kind ${String(header.type)} (only directories, files and links move)`);
        count++;
        pipeline(
          stream as unknown as Readable,
          async function* (source: AsyncIterable<Buffer>) {
            for await (const chunk of source) {
              bytes += chunk.length;
              yield chunk;
            }
          },
          createWriteStream(target, { flags: 'wx', mode: (header.mode ?? 0o644) & 0o777 }),
        ).then(
          () => {
            files.add(name);
            next();
          },
          (err: Error) => next(err),
        );
      } catch (err) {
        stream.resume();
        next(err as Error);
      }
    });
    await pipeline(input, extract);
    // All good: the copy here (if any) is replaced by this one, path by path.
    for (const top of tops) {
      rmSync(join(dataDir, top), { recursive: true, force: true });
      if (!existsSync(join(staging, top))) continue;
      mkdirSync(join(dataDir, top, '..'), { recursive: true, mode: 0o700 });
      renameSync(join(staging, top), join(dataDir, top));
    }
    markCopy(dataDir, o, o.filesFence);
    return { files: count, bytes };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
