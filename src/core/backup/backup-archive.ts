import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, lstatSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, normalize, sep } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { ValidationError } from '../../kernel/errors.js';
import { MANIFEST_PATH, type BackupManifest } from './backup-fns.js';

/**
 * The backup archive: a gzip'd tar (so `tar -tzf` lists it), each entry hashed (sha256) as it is written,
 * the manifest last (it holds every other entry's size and checksum). Written to `<file>.partial` and
 * renamed when whole, so a failed backup never leaves a file that looks like one. Read back into a staging
 * directory, every entry checked against the manifest before anything is restored from it.
 */

export interface ArchiveWriter<M extends object = Omit<BackupManifest, 'entries'>> {
  /** A regular file, read once (hashed as it is written); a file that shrinks while read is padded, and said so. */
  addFile(name: string, path: string): Promise<{ changed: boolean }>;
  addSymlink(name: string, target: string): Promise<void>;
  addDirectory(name: string, mode: number): Promise<void>;
  addBuffer(name: string, data: Buffer): Promise<void>;
  readonly entries: BackupManifest['entries'];
  /** Adds the manifest (with `entries` filled in) and closes the archive. */
  finish(manifest: M): Promise<void>;
  abort(): Promise<void>;
}

/** tar-stream, loaded by a backup or an export, not by every command that builds the core. */
const loadTar = async () => (await import('tar-stream')).default;

/** `M`: the manifest's shape (a backup's by default; a person's data export has its own, privacy-fns.ts). */
export async function createArchiveWriter<M extends object = Omit<BackupManifest, 'entries'>>(file: string): Promise<ArchiveWriter<M>> {
  const partial = `${file}.partial`;
  const pack = (await loadTar()).pack();
  const out = createWriteStream(partial, { mode: 0o600 });
  const done = pipeline(pack, createGzip({ level: 6 }), out);
  done.catch(() => {});
  const entries: BackupManifest['entries'] = {};

  /** Writes one entry of `size` bytes from `source`, hashing what goes in. */
  function entry(name: string, size: number, mode: number, mtime: Date, source: Readable): Promise<{ changed: boolean }> {
    return new Promise((resolve, reject) => {
      const hash = createHash('sha256');
      let seen = 0;
      const counted = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          const room = size - seen;
          const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
          seen += part.length;
          hash.update(part);
          cb(null, part);
        },
        flush(cb) {
          // Shorter than it was when stat'ed (being written): padded to the size the header announced.
          if (seen < size) {
            const pad = Buffer.alloc(size - seen);
            hash.update(pad);
            this.push(pad);
          }
          cb();
        },
      });
      const sink = pack.entry({ name, size, mode: mode & 0o777, mtime, type: 'file' }, (err) => {
        if (err) return reject(err);
        entries[name] = { size, sha256: hash.digest('hex') };
        resolve({ changed: seen < size });
      });
      pipeline(source, counted, sink).catch(reject);
    });
  }

  return {
    entries,
    async addFile(name, path) {
      const st = lstatSync(path);
      return entry(name, st.size, st.mode, st.mtime, st.size ? createReadStream(path, { start: 0, end: st.size - 1 }) : Readable.from([]));
    },
    async addSymlink(name, target) {
      await new Promise<void>((resolve, reject) => pack.entry({ name, type: 'symlink', linkname: target }, (err) => (err ? reject(err) : resolve())));
      entries[name] = { size: 0, sha256: createHash('sha256').update(`symlink:${target}`).digest('hex') };
    },
    async addDirectory(name, mode) {
      await new Promise<void>((resolve, reject) => pack.entry({ name, type: 'directory', mode: mode & 0o777 }, (err) => (err ? reject(err) : resolve())));
    },
    async addBuffer(name, data) {
      await entry(name, data.length, 0o600, new Date(), Readable.from([data]));
    },
    async finish(manifest) {
      const body = Buffer.from(`${JSON.stringify({ ...manifest, entries }, null, 1)}\n`);
      await new Promise<void>((resolve, reject) => pack.entry({ name: MANIFEST_PATH, size: body.length, mode: 0o600 }, body, (err) => (err ? reject(err) : resolve())));
      pack.finalize();
      await done;
      renameSync(partial, file);
    },
    async abort() {
      pack.destroy();
      await done.catch(() => {});
      rmSync(partial, { force: true });
    },
  };
}

/** An entry name as it may appear in an archive of ours: relative, normalised, no `..`. */
function safeName(name: string): string {
  const n = normalize(name).replace(/\/+$/, '');
  if (!n || n.startsWith('/') || n === '..' || n.startsWith(`..${sep}`) || n.includes(`${sep}..${sep}`) || n.endsWith(`${sep}..`)) {
    throw new ValidationError(`the archive has an entry outside its root: "${name}"`, { code: 'backup_invalid' });
  }
  return n;
}

/** Fails when a directory on the way to `path` (below `root`) is a symlink: an entry must not be written through one. */
function assertNoSymlinkOnTheWay(root: string, rel: string): void {
  const parts = rel.split(sep).slice(0, -1);
  let at = root;
  for (const p of parts) {
    at = join(at, p);
    let st;
    try {
      st = lstatSync(at);
    } catch {
      return; // not there yet: created as a directory below
    }
    if (st.isSymbolicLink()) throw new ValidationError(`the archive writes through a symbolic link: "${rel}"`, { code: 'backup_invalid' });
  }
}

/**
 * Extracts the archive into `staging` (created), checking every entry's size and checksum against the
 * manifest, and that nothing is missing or extra. Returns the manifest. Throws (ValidationError,
 * code backup_invalid) on any mismatch; the caller removes the staging directory.
 */
export async function extractArchive(file: string, staging: string): Promise<BackupManifest> {
  mkdirSync(staging, { recursive: true, mode: 0o700 });
  const seen: BackupManifest['entries'] = {};
  let manifest: BackupManifest | null = null;
  const extract = (await loadTar()).extract();
  extract.on('entry', (header, stream, next) => {
    // A refused entry ends the whole extraction with its error (next(err)); the entry's own stream is
    // destroyed with it, and that second report is not news.
    stream.on('error', () => {});
    const fail = (err: unknown) => {
      stream.resume();
      next(err as Error);
    };
    try {
      const name = safeName(header.name);
      if (name === MANIFEST_PATH) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: unknown) => chunks.push(c as Buffer));
        stream.on('end', () => {
          try {
            manifest = JSON.parse(Buffer.concat(chunks).toString('utf8')) as BackupManifest;
            next();
          } catch {
            next(new ValidationError('the archive\'s manifest is not valid JSON', { code: 'backup_invalid' }));
          }
        });
        return;
      }
      const target = join(staging, name);
      assertNoSymlinkOnTheWay(staging, name);
      if (header.type === 'directory') {
        mkdirSync(target, { recursive: true, mode: (header.mode ?? 0o700) & 0o777 });
        stream.resume();
        stream.on('end', () => next());
        return;
      }
      mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
      if (header.type === 'symlink') {
        symlinkSync(header.linkname ?? '', target);
        seen[name] = { size: 0, sha256: createHash('sha256').update(`symlink:${header.linkname ?? ''}`).digest('hex') };
        stream.resume();
        stream.on('end', () => next());
        return;
      }
      if (header.type !== 'file') return fail(new ValidationError(`the archive has an entry of a kind it never writes (${header.type}): "${name}"`, { code: 'backup_invalid' }));
      const hash = createHash('sha256');
      let size = 0;
      const tap = new Transform({
        transform(chunk: Buffer, _e, cb) {
          hash.update(chunk);
          size += chunk.length;
          cb(null, chunk);
        },
      });
      pipeline(stream, tap, createWriteStream(target, { mode: (header.mode ?? 0o600) & 0o777, flags: 'wx' }))
        .then(() => {
          seen[name] = { size, sha256: hash.digest('hex') };
          next();
        })
        .catch(fail);
    } catch (err) {
      fail(err);
    }
  });
  try {
    await pipeline(createReadStream(file), createGunzip(), extract);
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    throw new ValidationError(`the archive cannot be read: ${(err as Error).message}`, { code: 'backup_invalid', hint: 'Is it a file `aws backup create` made, copied whole?' });
  }
  const m = manifest as BackupManifest | null;
  if (!m || typeof m !== 'object' || !m.entries) throw new ValidationError('the archive has no manifest (it is cut short, or not a backup of this appliance)', { code: 'backup_invalid' });
  for (const [name, want] of Object.entries(m.entries)) {
    const got = seen[name];
    if (!got) throw new ValidationError(`the archive is missing "${name}", which its manifest lists`, { code: 'backup_invalid' });
    if (got.size !== want.size || got.sha256 !== want.sha256) throw new ValidationError(`"${name}" does not match its checksum: the archive is damaged`, { code: 'backup_invalid' });
  }
  const extra = Object.keys(seen).filter((n) => !m.entries[n]);
  if (extra.length) throw new ValidationError(`the archive has entries its manifest does not list ("${extra[0]}")`, { code: 'backup_invalid' });
  return m;
}

/** Moves `from` to `to` (same filesystem), creating `to`'s parent. */
export function moveInto(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
  renameSync(from, to);
}

