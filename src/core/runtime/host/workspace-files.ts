import { randomBytes } from 'node:crypto';
import { constants as C } from 'node:fs';
import { lstat, mkdir, open, opendir, readlink, rename, unlink, type FileHandle } from 'node:fs/promises';
import { PassThrough, Readable } from 'node:stream';
import { NotFoundError, PayloadTooLargeError, UnavailableError, UnprocessableError, ValidationError } from '../../../kernel/errors.js';

/**
 * A person's workspace files as the service reads and writes them on the host that holds them (serve's
 * data dir for a local runtime, a runner host for one placed there: both use this module), confined to
 * the workspace although the agent, which may be hostile, writes in it while this runs.
 *
 * Node has no openat2(RESOLVE_BENEATH), so a path is walked one name at a time holding each directory open:
 * the next name is opened as `/proc/self/fd/<dir fd>/<name>` with O_NOFOLLOW (the kernel resolves the fd
 * link to the directory already open, then that one name, never following a symlink there), so a directory
 * renamed or replaced by a link meanwhile cannot take the walk elsewhere. Refused: `..`, `.`, absolute
 * paths, NUL, empty names, a symlink anywhere on the path (listings show links, never follow them),
 * anything but directories and regular files, and a regular file with more than one hard link (the other
 * name may be outside the workspace: /etc/shadow, the data dir, another person's files). Writes never
 * write through an existing file: a new file is made (O_CREAT|O_EXCL under a temporary name in the pinned
 * directory) and renamed over the name, replacing the name itself (a link there is replaced, not followed).
 * Files and directories made here get the mode the sandbox's user gives (0644, 0755), and the service's
 * uid, which is the one the sandbox's user (uid 1000 inside) maps to on the host.
 */

/** The longest path taken, and the longest name in it (bytes). */
const MAX_PATH_BYTES = 4096;
const MAX_NAME_BYTES = 255;
/** Entries listed of one directory at most (the rest: `truncated`). */
const MAX_LIST_ENTRIES = 5000;
export const FILE_MODE = 0o644;
/** Bytes read at a time: small enough that what is in flight (and what the GC has yet to take back) stays small. */
const CHUNK = Number(process.env.AGENTWS_FILES_CHUNK ?? 64 * 1024);
export const DIR_MODE = 0o755;

type EntryType = 'file' | 'directory' | 'symlink' | 'other';
export interface FileEntry {
  name: string;
  type: EntryType;
  /** Bytes (a file), else 0. */
  size: number;
  mtime: string;
  /** A symlink's target as written (shown, never followed). */
  target?: string;
  /** A file with more than one hard link: refused when read (see why above). */
  links?: number;
}

/** Refused for confinement: the status and code a caller sees, and why, in words. */
function refused(why: string, code: string, path: string): UnprocessableError {
  return new UnprocessableError(why, { code, details: { field: 'path', path } });
}

/**
 * The names of a workspace-relative path, checked: '' (or '.') is the workspace itself. Pure.
 * Throws ValidationError naming the field for `..`, `.`, an absolute path, NUL, an empty name.
 */
export function splitPath(path: string, field = 'path'): string[] {
  if (path === '' || path === '.') return [];
  const bad = (why: string) => new ValidationError(`${field}: ${why}`, { details: { field } });
  if (path.includes('\0')) throw bad('contains a NUL byte');
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw bad(`longer than ${MAX_PATH_BYTES} bytes`);
  if (path.startsWith('/')) throw bad('an absolute path; paths are relative to your workspace');
  const parts = path.split('/');
  for (const p of parts) {
    if (p === '') throw bad('an empty name (a doubled or trailing "/")');
    if (p === '..') throw bad('".." is not allowed: paths stay inside your workspace');
    if (p === '.') throw bad('"." is not allowed as a name in a path');
    if (Buffer.byteLength(p) > MAX_NAME_BYTES) throw bad(`a name longer than ${MAX_NAME_BYTES} bytes`);
  }
  return parts;
}

/** The content type a file is served with, by its name (the caller decides inline or attachment). Pure. */
export function contentTypeOf(name: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase() ?? '';
  return TYPES[ext] ?? (TEXT_EXTS.has(ext) || TEXT_NAMES.has(name.toLowerCase()) ? 'text/plain; charset=utf-8' : 'application/octet-stream');
}
const TYPES: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp', ico: 'image/x-icon', avif: 'image/avif',
  svg: 'image/svg+xml', pdf: 'application/pdf', html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8', xhtml: 'application/xhtml+xml',
  zip: 'application/zip', gz: 'application/gzip', tar: 'application/x-tar', json: 'application/json',
};
const TEXT_EXTS = new Set(('txt md markdown csv tsv log ts tsx js jsx mjs cjs py rb go rs java kt c h cc cpp hpp cs php sh bash zsh fish sql yaml yml toml ini cfg conf ' +
  'xml css scss less vue svelte lua pl r swift scala clj ex exs erl hs ml dart diff patch env gitignore dockerfile makefile txt rst tex proto graphql').split(' '));
const TEXT_NAMES = new Set(['readme', 'license', 'makefile', 'dockerfile', '.gitignore', '.env', 'gemfile', 'procfile']);

/**
 * Whether a browser may show a file of this type in place: plain text, raster images and PDF. Anything
 * else (HTML, SVG, XML, unknown bytes) is an attachment: agent-written bytes never run in the dashboard's
 * origin. Pure.
 */
export function servedInline(contentType: string): boolean {
  const t = contentType.split(';')[0].trim().toLowerCase();
  if (t === 'image/svg+xml') return false;
  return t === 'text/plain' || t === 'application/pdf' || t === 'application/json' || (t.startsWith('image/') && t !== 'image/svg+xml');
}

export const pinned = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

/** Opens the workspace root itself (it must be a directory, not a link). */
export async function openRoot(root: string): Promise<FileHandle> {
  try {
    return await open(root, C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError('your workspace has no files yet', { code: 'workspace_empty' });
    throw err;
  }
}

/** Why a name could not be opened as a directory, in the caller's words. */
async function dirRefusal(parent: FileHandle, name: string, path: string, err: NodeJS.ErrnoException): Promise<Error> {
  if (err.code === 'ENOENT') return new NotFoundError(`no such directory: ${path}`, { details: { field: 'path' } });
  const st = await lstat(pinned(parent, name)).catch(() => null);
  if (st?.isSymbolicLink() || err.code === 'ELOOP') return refused(`${path} is a symbolic link: links in your workspace are shown, never followed`, 'symlink_refused', path);
  if (err.code === 'ENOTDIR') return new ValidationError(`${path} is not a directory`, { code: 'not_a_directory', details: { field: 'path' } });
  return err;
}

/**
 * Opens the directory at `parts` under `root`, one name at a time (see above). With `create`, missing
 * directories are made (mode 0755); a link or a file where a directory should be is refused.
 */
export async function openDirAt(root: string, parts: string[], o: { create?: boolean } = {}): Promise<FileHandle> {
  // A workspace not made yet (no turn so far) is made by a write, as its host makes it (runtime-host.ts).
  if (o.create) await mkdir(root, { recursive: true, mode: 0o700 });
  let dir = await openRoot(root);
  try {
    for (let i = 0; i < parts.length; i++) {
      const name = parts[i];
      const shown = parts.slice(0, i + 1).join('/');
      let next: FileHandle;
      try {
        next = await open(pinned(dir, name), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        if (!(o.create && e.code === 'ENOENT')) throw await dirRefusal(dir, name, shown, e);
        // mkdir makes the name itself; something made meanwhile (a link) makes it fail with EEXIST.
        await mkdir(pinned(dir, name), { mode: DIR_MODE }).catch((m: NodeJS.ErrnoException) => {
          if (m.code !== 'EEXIST') throw m;
        });
        try {
          next = await open(pinned(dir, name), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
        } catch (again) {
          throw await dirRefusal(dir, name, shown, again as NodeJS.ErrnoException);
        }
        await next.chmod(DIR_MODE).catch(() => {});
      }
      await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    await dir.close().catch(() => {});
    throw err;
  }
}

/** Opens a regular file singly linked in `dir` for reading; refuses links, special files, multi-linked files. */
async function openFileIn(dir: FileHandle, name: string, path: string): Promise<{ fh: FileHandle; size: number; mtime: Date; mode: number }> {
  let fh: FileHandle;
  try {
    // O_NONBLOCK: a FIFO the agent planted does not hang the open (it is refused below).
    fh = await open(pinned(dir, name), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK | C.O_NOCTTY);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') throw new NotFoundError(`no such file: ${path}`, { details: { field: 'path' } });
    if (e.code === 'ELOOP') throw refused(`${path} is a symbolic link: links in your workspace are shown, never followed`, 'symlink_refused', path);
    throw e;
  }
  const st = await fh.stat();
  const why = !st.isFile()
    ? st.isDirectory()
      ? new ValidationError(`${path} is a directory (download it as an archive)`, { code: 'is_a_directory', details: { field: 'path' } })
      : refused(`${path} is not a regular file (a device, socket or pipe): not read`, 'special_file_refused', path)
    : st.nlink > 1
      ? refused(`${path} has ${st.nlink} hard links: a file linked elsewhere is not read (its other name may be outside your workspace)`, 'hard_link_refused', path)
      : null;
  if (why) {
    await fh.close();
    throw why;
  }
  return { fh, size: st.size, mtime: st.mtime, mode: st.mode };
}

/** The entries of a directory of the workspace ('' : its top), links shown as links. */
export async function listDir(root: string, path: string): Promise<{ path: string; entries: FileEntry[]; truncated: boolean }> {
  const parts = splitPath(path);
  const dir = await openDirAt(root, parts);
  try {
    const entries: FileEntry[] = [];
    let truncated = false;
    const d = await opendir(`/proc/self/fd/${dir.fd}`);
    for await (const e of d) {
      if (entries.length >= MAX_LIST_ENTRIES) {
        truncated = true;
        break;
      }
      const st = await lstat(pinned(dir, e.name)).catch(() => null);
      if (!st) continue;
      const type: EntryType = st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
      const entry: FileEntry = { name: e.name, type, size: type === 'file' ? st.size : 0, mtime: st.mtime.toISOString() };
      if (type === 'symlink') entry.target = (await readlink(pinned(dir, e.name)).catch(() => '')).slice(0, 1024);
      if (type === 'file' && st.nlink > 1) entry.links = st.nlink;
      entries.push(entry);
    }
    entries.sort((a, b) => (a.type === 'directory') !== (b.type === 'directory') ? (a.type === 'directory' ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    return { path: parts.join('/'), entries, truncated };
  } finally {
    await dir.close().catch(() => {});
  }
}

/**
 * A file of the workspace, opened for reading: its bytes as a stream (at most the size it had when opened:
 * a file growing meanwhile is cut there), its size and when it changed.
 */
export async function openFile(root: string, path: string): Promise<{ name: string; size: number; mtime: Date; stream: Readable }> {
  const parts = splitPath(path);
  if (!parts.length) throw new ValidationError('path: name a file (the workspace itself is a directory)', { details: { field: 'path' } });
  const dir = await openDirAt(root, parts.slice(0, -1));
  try {
    const { fh, size, mtime } = await openFileIn(dir, parts[parts.length - 1], parts.join('/'));
    const stream = size ? fh.createReadStream({ start: 0, end: size - 1, highWaterMark: CHUNK }) : (await fh.close(), Readable.from([]));
    return { name: parts[parts.length - 1], size, mtime, stream };
  } finally {
    await dir.close().catch(() => {});
  }
}

/** What an archive left out, counted (links are stored as links; these are not stored at all). */
export interface ArchiveSkips {
  hardLinked: number;
  special: number;
  unreadable: number;
}

/** Where an archive is written: an HTTP response (its callback once the chunk is handed on, so its buffer can be used again). */
export interface ArchiveSink {
  write(chunk: Buffer, cb: (err?: Error | null) => void): boolean;
  readonly destroyed?: boolean;
}

/** Buffers an archive reads files into, reused once their write is done: what one download holds in flight. */
const ARCHIVE_BUFFERS = 4;
const ARCHIVE_CHUNK = 256 * 1024;
const ZEROS = Buffer.alloc(1024);
const ASCII = /^[\x20-\x7e]*$/;

/**
 * A tar header block for one entry (ustar), preceded by a pax header when the name or the link's target is
 * longer than ustar holds or not plain ASCII, or the size is past its 8 GiB. Pure.
 */
function tarHeader(e: { name: string; type: 'file' | 'directory' | 'symlink'; size?: number; mode: number; mtime: Date; linkname?: string }): Buffer {
  const size = e.type === 'file' ? (e.size ?? 0) : 0;
  const pax: string[] = [];
  const fits = (t: string, n: number) => ASCII.test(t) && t.length <= n;
  if (!fits(e.name, 100)) pax.push(paxRecord('path', e.name));
  if (e.linkname !== undefined && !fits(e.linkname, 100)) pax.push(paxRecord('linkpath', e.linkname));
  if (size > 0o77777777777) pax.push(paxRecord('size', String(size)));
  const block = (name: string, type: string, sz: number, link = '') => {
    const b = Buffer.alloc(512);
    b.write(name, 0, 100, 'latin1');
    b.write(octal(e.mode & 0o7777, 8), 100, 'latin1');
    b.write(octal(0, 8), 108, 'latin1');
    b.write(octal(0, 8), 116, 'latin1');
    b.write(octal(sz > 0o77777777777 ? 0 : sz, 12), 124, 'latin1');
    b.write(octal(Math.max(0, Math.floor(e.mtime.getTime() / 1000)), 12), 136, 'latin1');
    b.write('        ', 148, 'latin1');
    b.write(type, 156, 'latin1');
    b.write(link, 157, 100, 'latin1');
    b.write('ustar\0' + '00', 257, 'latin1');
    let sum = 0;
    for (const x of b) sum += x;
    b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    return b;
  };
  const plain = (t: string, n: number) => t.replace(/[^\x20-\x7e]/g, '_').slice(0, n);
  const type = e.type === 'directory' ? '5' : e.type === 'symlink' ? '2' : '0';
  const main = block(plain(e.name, 100), type, size, e.linkname !== undefined ? plain(e.linkname, 100) : '');
  if (!pax.length) return main;
  const data = Buffer.from(pax.join(''), 'utf8');
  const pad = (512 - (data.length % 512)) % 512;
  return Buffer.concat([block(plain(`PaxHeader/${e.name.split('/').pop() ?? ''}`, 100), 'x', data.length), data, Buffer.alloc(pad), main]);
}
/** What a directory entry (or an lstat) says it is; null: it does not say (DT_UNKNOWN). Pure. */
function kindOf(e: { isSymbolicLink(): boolean; isDirectory(): boolean; isFile(): boolean; isFIFO(): boolean; isSocket(): boolean; isBlockDevice(): boolean; isCharacterDevice(): boolean }): EntryType | null {
  if (e.isSymbolicLink()) return 'symlink';
  if (e.isDirectory()) return 'directory';
  if (e.isFile()) return 'file';
  return e.isFIFO() || e.isSocket() || e.isBlockDevice() || e.isCharacterDevice() ? 'other' : null;
}
const octal = (n: number, width: number) => `${n.toString(8).padStart(width - 1, '0')}\0`;
/** A pax record: "<length> <key>=<value>\n", its length counting itself. */
function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`;
  const bytes = Buffer.byteLength(rest);
  let len = bytes + 1;
  while (String(len).length + bytes !== len) len = String(len).length + bytes;
  return `${len}${rest}`;
}

/**
 * A directory of the workspace as a tar archive, written to `out` as it is read (never held whole):
 * directories and singly linked regular files with their bytes, symlinks stored as symlinks (never
 * followed); files with more than one hard link and special files are left out (counted in `skipped`).
 * Entries are named under the directory's own name (`workspace/` for the top). File bytes go through
 * ARCHIVE_BUFFERS buffers reused as `out` takes them: a download holds about a megabyte, and makes no
 * garbage per chunk (a buffer per chunk grew serve by the tens of MB the garbage collector had yet to
 * take back). Stops when `out` is destroyed (the client left).
 */
export async function openArchive(root: string, path: string): Promise<{ name: string; writeTo(out: ArchiveSink): Promise<{ files: number; bytes: number; skipped: ArchiveSkips }>; close(): Promise<void> }> {
  const parts = splitPath(path);
  const top = await openDirAt(root, parts);
  const base = parts.length ? parts[parts.length - 1] : 'workspace';
  return {
    name: `${base}.tar`,
    /** Lets go of the folder without writing it (writeTo does so itself). */
    close: () => top.close().catch(() => {}),
    async writeTo(out: ArchiveSink) {
      const skipped: ArchiveSkips = { hardLinked: 0, special: 0, unreadable: 0 };
      let files = 0;
      let bytes = 0;
      const pool = Array.from({ length: ARCHIVE_BUFFERS }, () => ({ buf: Buffer.allocUnsafe(ARCHIVE_CHUNK), free: Promise.resolve() as Promise<void> }));
      let turn = 0;
      let slot = pool[0];
      /** Bytes of the current buffer filled: headers, small files and padding share one write. */
      let fill = 0;
      let failed: Error | null = null;
      const send = (chunk: Buffer): Promise<void> =>
        new Promise((resolve) => {
          out.write(chunk, (err) => {
            if (err && !failed) failed = err;
            resolve();
          });
        });
      const check = () => {
        if (failed) throw failed;
        if (out.destroyed) throw new Error('the client closed the download');
      };
      /** Hands the current buffer to `out` and takes the next one once its last write is done. */
      async function flush(): Promise<void> {
        if (!fill) return;
        check();
        slot.free = send(slot.buf.subarray(0, fill));
        slot = pool[++turn % pool.length];
        await slot.free;
        fill = 0;
      }
      async function put(data: Buffer): Promise<void> {
        let off = 0;
        while (off < data.length) {
          const n = Math.min(data.length - off, ARCHIVE_CHUNK - fill);
          data.copy(slot.buf, fill, off, off + n);
          fill += n;
          off += n;
          if (fill === ARCHIVE_CHUNK) await flush();
        }
      }
      async function putFile(fh: FileHandle, size: number): Promise<void> {
        let pos = 0;
        while (pos < size) {
          const want = Math.min(ARCHIVE_CHUNK - fill, size - pos);
          const { bytesRead } = await fh.read(slot.buf, fill, want, pos);
          // A file cut short meanwhile (the agent truncating it): filled to the size its header says.
          const n = bytesRead || (slot.buf.fill(0, fill, fill + want), want);
          fill += n;
          pos += n;
          if (fill === ARCHIVE_CHUNK) await flush();
        }
        if (size % 512) await put(ZEROS.subarray(0, 512 - (size % 512)));
      }

      async function walk(dir: FileHandle, prefix: string): Promise<void> {
        const d = await opendir(`/proc/self/fd/${dir.fd}`, { bufferSize: 256 });
        for await (const e of d) {
          check();
          const name = `${prefix}/${e.name}`;
          // The entry's kind as the directory gives it (no lstat; a filesystem that does not say is asked):
          // each is opened with O_NOFOLLOW and checked again on the handle, so a name swapped meanwhile is
          // refused, not followed.
          let kind = kindOf(e);
          if (kind === null) {
            const st = await lstat(pinned(dir, e.name)).catch(() => null);
            if (!st) continue;
            kind = kindOf(st);
          }
          if (kind === 'symlink') {
            const st = await lstat(pinned(dir, e.name)).catch(() => null);
            const to = st?.isSymbolicLink() ? await readlink(pinned(dir, e.name)).catch(() => null) : null;
            if (to !== null) await put(tarHeader({ name, type: 'symlink', linkname: to, mode: 0o777, mtime: st!.mtime }));
            continue;
          }
          if (kind === 'directory') {
            let sub: FileHandle;
            try {
              sub = await open(pinned(dir, e.name), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
            } catch {
              skipped.unreadable++;
              continue;
            }
            try {
              const st = await sub.stat();
              await put(tarHeader({ name: `${name}/`, type: 'directory', mode: DIR_MODE, mtime: st.mtime }));
              await walk(sub, name);
            } finally {
              await sub.close().catch(() => {});
            }
            continue;
          }
          if (kind !== 'file') {
            skipped.special++;
            continue;
          }
          let f: Awaited<ReturnType<typeof openFileIn>>;
          try {
            f = await openFileIn(dir, e.name, name);
          } catch (err) {
            const code = (err as { code?: string }).code;
            if (code === 'hard_link_refused') skipped.hardLinked++;
            else if (code === 'special_file_refused') skipped.special++;
            else skipped.unreadable++;
            continue;
          }
          try {
            await put(tarHeader({ name, type: 'file', size: f.size, mode: f.mode & 0o755, mtime: f.mtime }));
            await putFile(f.fh, f.size);
            files++;
            bytes += f.size;
          } finally {
            await f.fh.close().catch(() => {});
          }
        }
      }

      try {
        await put(tarHeader({ name: `${base}/`, type: 'directory', mode: DIR_MODE, mtime: (await top.stat()).mtime }));
        await walk(top, base);
        await put(ZEROS);
        await flush();
        await Promise.all(pool.map((p) => p.free));
        check();
        return { files, bytes, skipped };
      } finally {
        await top.close().catch(() => {});
      }
    },
  };
}

/** The archive as a stream (tests, and callers that do not write to a response). */
export async function archiveDir(root: string, path: string, o: { onDone?: (r: { files: number; bytes: number; skipped: ArchiveSkips }) => void } = {}): Promise<{ name: string; stream: Readable }> {
  const a = await openArchive(root, path);
  const out = new PassThrough({ highWaterMark: ARCHIVE_CHUNK });
  // Each chunk copied: the archive reuses its buffers once a write is done, and a PassThrough holds them.
  const sink: ArchiveSink = { write: (chunk, cb) => out.write(Buffer.from(chunk), cb), get destroyed() { return out.destroyed; } };
  a.writeTo(sink).then(
    (r) => {
      out.end();
      o.onDone?.(r);
    },
    (err: Error) => out.destroy(err),
  );
  return { name: a.name, stream: out };
}

/**
 * Writes a file into the workspace at `path` (its directories made as needed) from `input`, at most
 * `maxBytes` (past it: PayloadTooLargeError naming `limitName`, nothing left behind). The bytes go to a
 * new file under a temporary name in the pinned directory, renamed over `path` when complete: an existing
 * file there is replaced, never written through; a directory there is refused.
 */
export async function writeFile(root: string, path: string, input: AsyncIterable<Buffer> | Readable, o: { maxBytes: number; limitName: string }): Promise<{ path: string; bytes: number }> {
  const parts = splitPath(path);
  if (!parts.length) throw new ValidationError('path: name the file to write', { details: { field: 'path' } });
  const name = parts[parts.length - 1];
  if (name.length > 200) throw new ValidationError('path: a file name longer than 200 characters', { details: { field: 'path' } });
  const dir = await openDirAt(root, parts.slice(0, -1), { create: true });
  const tmp = `.${name}.agentws-upload-${randomBytes(6).toString('hex')}`;
  let fh: FileHandle | null = null;
  let bytes = 0;
  try {
    fh = await open(pinned(dir, tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, FILE_MODE);
    for await (const chunk of input as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > o.maxBytes) throw new PayloadTooLargeError(`${parts.join('/')} is larger than ${o.limitName} (${o.maxBytes} bytes)`, { code: 'upload_too_large', details: { field: 'files', limit: o.limitName, maxBytes: o.maxBytes } });
      await fh.write(chunk);
    }
    await fh.chmod(FILE_MODE);
    await fh.close();
    fh = null;
    const existing = await lstat(pinned(dir, name)).catch(() => null);
    if (existing?.isDirectory()) throw new ValidationError(`${parts.join('/')} is a directory: not replaced by a file`, { code: 'is_a_directory', details: { field: 'path' } });
    await rename(pinned(dir, tmp), pinned(dir, name));
    return { path: parts.join('/'), bytes };
  } catch (err) {
    await fh?.close().catch(() => {});
    await unlink(pinned(dir, tmp)).catch(() => {});
    // Drain what is left of the input (a multipart stream must be read to its end).
    if (input instanceof Readable) input.resume();
    throw err;
  } finally {
    await dir.close().catch(() => {});
  }
}

/**
 * The route, under a runtime's path on the runner channel (`/rt/<user>`), by which the control plane
 * reaches a person's workspace files on a runner host: the runner answers it itself with this module (it
 * never reaches the runtime, which need not run). `<route>/<op>?tenantId=&path=`, op one of FILE_OPS.
 */
export const WORKSPACE_FILES_ROUTE = '/agentws/files';
const FILE_OPS = ['list', 'read', 'archive', 'write'] as const;
export type FileOp = (typeof FILE_OPS)[number];
/** Headers of a file read on a runner: its size and when it changed (the body is its bytes). */
export const FILE_HEADERS = { size: 'x-agentws-size', mtime: 'x-agentws-mtime', name: 'x-agentws-name' } as const;

/** One answer of the files route: JSON, or a stream with headers. */
export type FilesAnswer =
  | { status: number; json: unknown }
  | { status: number; headers: Record<string, string>; stream: Readable }
  | { status: number; headers: Record<string, string>; writeTo(out: ArchiveSink): Promise<unknown> };

/**
 * Answers one files request on the host holding the workspace `root` (a runner): the same calls as the
 * control plane makes locally, errors as `{ error, message, details }` with their status (filesError
 * reads them back).
 */
export async function answerFiles(root: string, op: string, q: URLSearchParams, body: Readable): Promise<FilesAnswer> {
  const path = q.get('path') ?? '';
  try {
    switch (op) {
      case 'list':
        return { status: 200, json: await listDir(root, path) };
      case 'read': {
        const f = await openFile(root, path);
        return { status: 200, headers: { [FILE_HEADERS.size]: String(f.size), [FILE_HEADERS.mtime]: f.mtime.toISOString(), [FILE_HEADERS.name]: encodeURIComponent(f.name), 'content-length': String(f.size) }, stream: f.stream };
      }
      case 'archive': {
        const a = await openArchive(root, path);
        return { status: 200, headers: { [FILE_HEADERS.name]: encodeURIComponent(a.name), 'content-type': 'application/x-tar' }, writeTo: (out) => a.writeTo(out) };
      }
      case 'write': {
        const maxBytes = Number(q.get('maxBytes'));
        if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) return { status: 400, json: { error: 'validation_failed', message: 'maxBytes' } };
        return { status: 200, json: await writeFile(root, path, body, { maxBytes, limitName: q.get('limitName') ?? 'the upload limit' }) };
      }
      default:
        return { status: 404, json: { error: 'not_found', message: `no files operation ${op}` } };
    }
  } catch (err) {
    body.resume();
    const e = err as { status?: number; code?: string; message: string; details?: unknown };
    if (typeof e.status === 'number' && e.code) return { status: e.status, json: { error: e.code, message: e.message, details: e.details } };
    return { status: 500, json: { error: 'files_failed', message: e.message.slice(0, 300) } };
  }
}

/** The error a runner's files answer carried, as the one the control plane would have thrown locally. Pure. */
export function filesError(status: number, body: { error?: string; message?: string; details?: Record<string, unknown> } | null): Error {
  const message = body?.message ?? `the runner answered ${status}`;
  const o = { code: body?.error, details: body?.details };
  if (status === 400) return new ValidationError(message, o);
  if (status === 404) return new NotFoundError(message, o);
  if (status === 413) return new PayloadTooLargeError(message, o);
  if (status === 422) return new UnprocessableError(message, o);
  return new UnavailableError(`the runner host holding your files could not answer: ${message}`, { code: body?.error ?? 'files_failed' });
}
