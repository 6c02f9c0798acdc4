import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { constants as C, existsSync, lstatSync, mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { lstat, mkdir, open, readFile, readdir, readlink, rename, rmdir, symlink, unlink, writeFile as writeHostFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deflateSync, inflateSync } from 'node:zlib';
import { DIR_MODE, FILE_MODE, openDirAt, openRoot, pinned, splitPath } from './workspace-files.js';

/**
 * Snapshots of a person's workspace taken by the service (what each turn changed, undo and
 * redo), on the host that holds the files (serve for a local runtime, the runner host for one placed
 * there; both use this module). Once before a turn is handed to the runtime and once after it ends.
 *
 * The agent, which may be hostile, writes in the workspace while this runs, so git never touches the
 * workspace: this module reads it with the confined walk of workspace-files.ts (directories pinned as
 * open fds, each name opened as `/proc/self/fd/<fd>/<name>` with O_NOFOLLOW) and writes git's loose
 * objects itself into a bare object store of the service's own, outside the sandbox
 * (`<runtime root>/snapshots.git`: the sandbox binds only home/, run/, tmp/, etc/ and managed/ of that root).
 * git runs only to diff two trees of that store, with no system or global config, no hooks and no
 * attributes of the agent's (a bare store reads no .gitattributes from its trees): nothing of the agent's
 * is read as configuration, and a link the agent planted is stored as a link (its target's text), never
 * followed. What is kept: singly linked regular files up to MAX_KEPT_BYTES and symlinks; `.git`
 * directories are skipped (so a clone in a subfolder is kept file by file, without its history); special
 * files, files with more than one hard link (their other name may be outside) and larger files are not
 * kept (named as such). A restore writes each differing file as a new file renamed over its name in the
 * pinned directory, links as links, and unlinks what the target does not have: never through a link.
 */

/** A file larger than this is not kept (named in the change set as not kept). */
const MAX_KEPT_BYTES = Number(process.env.AGENTWS_SNAPSHOT_FILE_MAX ?? 10 * 1024 * 1024);
/** The longest diff of one file served; past it the diff is cut. */
const MAX_FILE_DIFF_CHARS = 256 * 1024;
/** A cached entry is trusted only if its file changed longer ago than this before the walk began (git's "racy" case). */
const RACY_MS = 2000;
const CACHE_FILE = 'agentws-cache.json';
const SKIPPED_DIR = 'agentws-skipped';

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'renamed';
export interface FileChange {
  path: string;
  status: ChangeStatus;
  /** A renamed file's old path. */
  from?: string;
  additions: number;
  deletions: number;
  /** Named only: its bytes are not diffed (nor sent). */
  binary: boolean;
  /** Unified diff (`--- a/…`, `+++ b/…`, hunks with 3 lines of context); '' for a binary or renamed-only file. */
  diff: string;
  /** The diff was cut at the size limit. */
  truncated: boolean;
}

// ---------------------------------------------------------------- objects (pure)

/** A git object's id and its loose encoding (zlib of `<type> <len>\0<body>`). Pure. */
export function encodeObject(type: 'blob' | 'tree', body: Buffer): { id: string; loose: Buffer } {
  const raw = Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body]);
  return { id: objectId(type, body), loose: deflateSync(raw, { level: 1 }) };
}
/** A git object's id alone (sha1 of `<type> <len>\0<body>`). Pure. */
function objectId(type: 'blob' | 'tree', body: Buffer): string {
  return createHash('sha1').update(`${type} ${body.length}\0`).update(body).digest('hex');
}

export interface TreeEntry {
  mode: '100644' | '100755' | '120000' | '40000';
  name: string;
  id: string;
}

/** A tree object's body: entries sorted the git way (a directory compared as `name/`). Pure. */
export function encodeTree(entries: TreeEntry[]): Buffer {
  const key = (e: TreeEntry) => Buffer.from(e.mode === '40000' ? `${e.name}/` : e.name);
  const sorted = [...entries].sort((a, b) => Buffer.compare(key(a), key(b)));
  return Buffer.concat(sorted.flatMap((e) => [Buffer.from(`${e.mode} ${e.name}\0`), Buffer.from(e.id, 'hex')]));
}

/** The entries of a tree object's body. Pure. */
export function decodeTree(body: Buffer): TreeEntry[] {
  const out: TreeEntry[] = [];
  let i = 0;
  while (i < body.length) {
    const sp = body.indexOf(0x20, i);
    const nul = body.indexOf(0, sp);
    out.push({ mode: body.toString('latin1', i, sp) as TreeEntry['mode'], name: body.toString('utf8', sp + 1, nul), id: body.toString('hex', nul + 1, nul + 21) });
    i = nul + 21;
  }
  return out;
}

// ---------------------------------------------------------------- the store

const isId = (s: string) => /^[0-9a-f]{40}$/.test(s);
/** Ref names the control plane may give: `sessions/<id>/<id>/before` and the like. */
const REF = /^[A-Za-z0-9_-]{1,80}(\/[A-Za-z0-9_-]{1,80}){0,4}$/;
export function checkRef(ref: string): string {
  if (!REF.test(ref)) throw Object.assign(new Error(`not a snapshot ref: ${ref.slice(0, 100)}`), { status: 400, code: 'validation_failed' });
  return ref;
}

/** Makes the bare store (HEAD, objects/, refs/) if it is not there: written here, no `git init` (no templates). */
async function ensureStore(store: string): Promise<void> {
  await mkdir(join(store, 'objects'), { recursive: true, mode: 0o700 });
  await mkdir(join(store, 'refs'), { recursive: true, mode: 0o700 });
  await writeHostFile(join(store, 'HEAD'), 'ref: refs/heads/main\n', { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
}

/** Object directories known to exist, by store (a mkdir per object cost more than the write). */
const madeDirs = new Map<string, Set<string>>();
/** Writes a loose object if the store has not got it (synchronously: a small write; a promise apiece cost more). */
async function writeObject(store: string, type: 'blob' | 'tree', body: Buffer): Promise<string> {
  const id = objectId(type, body);
  const dir = join(store, 'objects', id.slice(0, 2));
  const file = join(dir, id.slice(2));
  if (existsSync(file)) return id;
  const { loose } = encodeObject(type, body);
  let made = madeDirs.get(store);
  if (!made) madeDirs.set(store, (made = new Set()));
  if (!made.has(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    made.add(dir);
  }
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, loose, { mode: 0o400 });
  renameSync(tmp, file);
  return id;
}

async function readObject(store: string, id: string): Promise<{ type: string; body: Buffer }> {
  if (!isId(id)) throw new Error(`not an object id: ${id}`);
  const raw = inflateSync(await readFile(join(store, 'objects', id.slice(0, 2), id.slice(2))));
  const nul = raw.indexOf(0);
  return { type: raw.toString('latin1', 0, nul).split(' ')[0], body: raw.subarray(nul + 1) };
}

async function writeRef(store: string, ref: string, id: string): Promise<void> {
  const file = join(store, 'refs', checkRef(ref));
  await mkdir(join(file, '..'), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${randomBytes(4).toString('hex')}`;
  await writeHostFile(tmp, `${id}\n`);
  await rename(tmp, file);
}
async function deleteRef(store: string, ref: string): Promise<void> {
  await unlink(join(store, 'refs', checkRef(ref))).catch(() => {});
}
/** The refs under a prefix (`sessions/<id>`), by their name below it. */
export async function listRefs(store: string, prefix: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const base = join(store, 'refs', checkRef(prefix));
  async function walk(dir: string, rel: string) {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (e.name.includes('.tmp-')) continue;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(join(dir, e.name), r);
      else if (e.isFile()) {
        const t = (await readFile(join(dir, e.name), 'utf8').catch(() => '')).trim();
        if (isId(t)) out[r] = t;
      }
    }
  }
  await walk(base, '');
  return out;
}

/** One at a time per store: snapshots share its cache, and a restore must not interleave with a snapshot. */
const locks = new Map<string, Promise<unknown>>();
function serialized<T>(store: string, fn: () => Promise<T>): Promise<T> {
  const prev = locks.get(store) ?? Promise.resolve();
  const run = prev.then(fn, fn);
  const tail = run.catch(() => {});
  locks.set(store, tail);
  void tail.then(() => {
    if (locks.get(store) === tail) locks.delete(store);
  });
  return run;
}

// ---------------------------------------------------------------- snapshot (the confined walk)

type Cached = [size: number, mtimeMs: number, ctimeMs: number, ino: number, id: string];

export interface SnapshotResult {
  tree: string;
  files: number;
  /** Files read (the others came from the cache). */
  read: number;
  /** Not kept: larger than MAX_KEPT_BYTES (named), and how many hard-linked or special files were skipped. */
  notKept: string[];
  skipped: { hardLinked: number; special: number; unreadable: number };
  ms: number;
}

const EMPTY_TREE = encodeObject('tree', Buffer.alloc(0)).id;

/**
 * Takes a snapshot of the workspace at `root` into `store` and points `refs` at it. A workspace not made
 * yet is an empty tree. Serialized per store.
 */
export function snapshot(root: string, store: string, refs: string[] = []): Promise<SnapshotResult> {
  refs.forEach(checkRef);
  return serialized(store, () => snapshotNow(root, store, refs));
}

async function snapshotNow(root: string, store: string, refs: string[]): Promise<SnapshotResult> {
  const t0 = Date.now();
  await ensureStore(store);
  const old: Record<string, Cached> = await readFile(join(store, CACHE_FILE), 'utf8').then((t) => JSON.parse(t) as Record<string, Cached>, () => ({}));
  const cache: Record<string, Cached> = {};
  const r: Omit<SnapshotResult, 'tree' | 'ms'> = { files: 0, read: 0, notKept: [], skipped: { hardLinked: 0, special: 0, unreadable: 0 } };
  let top: FileHandle | null = null;
  try {
    top = await openRoot(root);
  } catch (err) {
    if ((err as { code?: string }).code !== 'workspace_empty') throw err;
  }
  let tree = EMPTY_TREE;
  try {
    if (top) tree = (await walk(top, '')) ?? EMPTY_TREE;
    else await writeObject(store, 'tree', Buffer.alloc(0));
  } finally {
    await top?.close().catch(() => {});
  }
  if (tree === EMPTY_TREE) await writeObject(store, 'tree', Buffer.alloc(0));
  const tmp = join(store, `${CACHE_FILE}.tmp-${randomBytes(4).toString('hex')}`);
  await writeHostFile(tmp, JSON.stringify(cache));
  await rename(tmp, join(store, CACHE_FILE));
  if (r.notKept.length) {
    await mkdir(join(store, SKIPPED_DIR), { recursive: true, mode: 0o700 });
    await writeHostFile(join(store, SKIPPED_DIR, tree), JSON.stringify(r.notKept.slice(0, 1000)));
  }
  for (const ref of refs) await writeRef(store, ref, tree);
  // Only once this snapshot has a ref: every blob the cache names is then reachable and survives a prune.
  if (refs.length) await pruneOldest(store).catch(() => {});
  return { tree, ...r, ms: Date.now() - t0 };

  /** The tree id of a directory (null: nothing kept in it). */
  async function walk(dir: FileHandle, prefix: string): Promise<string | null> {
    const entries: TreeEntry[] = [];
    // Names and lstat synchronously, a directory at a time (microseconds each: a promise apiece cost more
    // than the calls); the event loop gets its turn between directories and at every file read.
    const names = readdirSync(`/proc/self/fd/${dir.fd}`);
    for (const name of names) {
      const e = { name };
      if (e.name === '.git') continue;
      const path = prefix ? `${prefix}/${e.name}` : e.name;
      const st = lstatSync(pinned(dir, e.name), { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isSymbolicLink()) {
        const to = await readlink(pinned(dir, e.name), { encoding: 'buffer' }).catch(() => null);
        if (to) entries.push({ mode: '120000', name: e.name, id: await writeObject(store, 'blob', to) });
        continue;
      }
      if (st.isDirectory()) {
        let sub: FileHandle;
        try {
          sub = await open(pinned(dir, e.name), C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW);
        } catch {
          r.skipped.unreadable++;
          continue;
        }
        try {
          const id = await walk(sub, path);
          if (id) entries.push({ mode: '40000', name: e.name, id });
        } finally {
          await sub.close().catch(() => {});
        }
        continue;
      }
      if (!st.isFile()) {
        r.skipped.special++;
        continue;
      }
      if (st.nlink > 1) {
        r.skipped.hardLinked++;
        continue;
      }
      if (st.size > MAX_KEPT_BYTES) {
        r.notKept.push(path);
        continue;
      }
      const mode = st.mode & 0o100 ? '100755' : '100644';
      const c = old[path];
      if (c && c[0] === st.size && c[1] === st.mtimeMs && c[2] === st.ctimeMs && c[3] === st.ino && t0 - st.mtimeMs > RACY_MS) {
        cache[path] = c;
        entries.push({ mode, name: e.name, id: c[4] });
        r.files++;
        continue;
      }
      // Opened with no-follow, non-blocking (a FIFO swapped in does not hang), and checked again on the handle.
      let fh: FileHandle;
      try {
        fh = await open(pinned(dir, e.name), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK | C.O_NOCTTY);
      } catch {
        r.skipped.unreadable++;
        continue;
      }
      try {
        const fst = await fh.stat();
        if (!fst.isFile() || fst.nlink > 1 || fst.size > MAX_KEPT_BYTES) {
          if (fst.isFile() && fst.size > MAX_KEPT_BYTES) r.notKept.push(path);
          else if (fst.isFile()) r.skipped.hardLinked++;
          else r.skipped.special++;
          continue;
        }
        const buf = Buffer.allocUnsafe(fst.size);
        let got = 0;
        while (got < fst.size) {
          const { bytesRead } = await fh.read(buf, got, fst.size - got, got);
          if (!bytesRead) break;
          got += bytesRead;
        }
        const id = await writeObject(store, 'blob', buf.subarray(0, got));
        if (got === fst.size) cache[path] = [fst.size, fst.mtimeMs, fst.ctimeMs, fst.ino, id];
        entries.push({ mode: fst.mode & 0o100 ? '100755' : '100644', name: e.name, id });
        r.files++;
        r.read++;
      } finally {
        await fh.close().catch(() => {});
      }
    }
    return entries.length ? writeObject(store, 'tree', encodeTree(entries)) : null;
  }
}

// ---------------------------------------------------------------- trees and diffs (git on the store only)

/** Every file and link of a tree, by path. */
export async function flatten(store: string, tree: string, prefix = '', out = new Map<string, { mode: string; id: string }>()): Promise<Map<string, { mode: string; id: string }>> {
  const { type, body } = await readObject(store, tree);
  if (type !== 'tree') throw new Error(`${tree} is not a tree`);
  for (const e of decodeTree(body)) {
    const path = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.mode === '40000') await flatten(store, e.id, path, out);
    else out.set(path, { mode: e.mode, id: e.id });
  }
  return out;
}

/**
 * The most snapshot refs a store keeps (a turn has two, its before and after): past it, the oldest turns'
 * snapshots are dropped (their changes say "not recorded", they can no longer be undone) and the objects
 * nothing names any more are removed. Without it the store, which is outside the person's workspace quota,
 * would grow with every turn that changed something, for as long as the person works.
 */
const MAX_SNAPSHOT_REFS = Number(process.env.AGENTWS_SNAPSHOT_REFS_MAX ?? 400);

/** Drops the oldest refs past `max` (down to three quarters of it, so a prune is rare), then prunes. */
export async function pruneOldest(store: string, max = MAX_SNAPSHOT_REFS): Promise<void> {
  const found: Array<{ file: string; at: number }> = [];
  async function walk(dir: string) {
    for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const file = join(dir, e.name);
      if (e.isDirectory()) await walk(file);
      else if (e.isFile() && !e.name.includes('.tmp-')) found.push({ file, at: (await lstat(file).catch(() => null))?.mtimeMs ?? 0 });
    }
  }
  await walk(join(store, 'refs'));
  if (found.length <= max) return;
  found.sort((a, b) => a.at - b.at);
  for (const f of found.slice(0, found.length - Math.floor(max * 0.75))) await unlink(f.file).catch(() => {});
  // git on the store alone (see git() below): what no ref reaches goes.
  await git(store, ['prune', '--expire=now']);
}

const run = promisify(execFile);
/**
 * git on the store alone: no system or global config, an empty HOME, nothing inherited (no GIT_* of the
 * service's environment), no external diff or textconv, no attributes file; no work tree.
 */
async function git(store: string, args: string[]): Promise<string> {
  const { stdout } = await run('git', ['--git-dir', store, '-c', 'core.quotePath=false', '-c', 'core.attributesFile=/dev/null', '-c', 'diff.renameLimit=2000', ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_ATTR_NOSYSTEM: '1', HOME: '/nonexistent', LC_ALL: 'C' },
    maxBuffer: 512 * 1024 * 1024,
    encoding: 'utf8',
  });
  return stdout;
}

/** The rows of `diff-tree -z --raw --numstat` output: status and paths, lines added and removed. Pure. */
export function parseRawNumstat(out: string): Array<{ status: ChangeStatus; path: string; from?: string; additions: number; deletions: number; binary: boolean }> {
  const f = out.split('\0');
  const raw: Array<{ status: ChangeStatus; path: string; from?: string }> = [];
  const counts: Array<{ a: number; d: number; binary: boolean }> = [];
  let i = 0;
  while (i < f.length) {
    const head = f[i];
    if (!head) {
      i++;
      continue;
    }
    if (head.startsWith(':')) {
      const letter = head.trim().split(' ').pop()![0];
      if (letter === 'R' || letter === 'C') {
        raw.push({ status: 'renamed', from: f[i + 1], path: f[i + 2] });
        i += 3;
      } else {
        raw.push({ status: letter === 'A' ? 'added' : letter === 'D' ? 'deleted' : 'modified', path: f[i + 1] });
        i += 2;
      }
      continue;
    }
    // numstat: "a\td\tpath" or, for a rename, "a\td\t" then old, new.
    const [a, d, p] = head.split('\t');
    counts.push({ a: a === '-' ? 0 : Number(a), d: d === '-' ? 0 : Number(d), binary: a === '-' });
    i += p === '' ? 3 : 1;
  }
  return raw.map((r, k) => ({ ...r, additions: counts[k]?.a ?? 0, deletions: counts[k]?.d ?? 0, binary: counts[k]?.binary ?? false }));
}

/** The hunks of each file of a `diff-tree -p` output, in order ('' for a binary or rename-only one). Pure. */
export function splitPatch(out: string): string[] {
  if (!out) return [];
  const parts = out.split(/^diff --git /m).slice(1);
  return parts.map((p) => {
    const at = p.search(/^@@/m);
    return at < 0 ? '' : p.slice(at);
  });
}

/**
 * What changed from tree `a` to tree `b` (ids): files with status, counts and, with `patch`, their unified
 * diffs (3 lines of context; renames found by content, 50% similar). `notKept`: files too large to keep on
 * either side.
 */
export async function changes(store: string, a: string, b: string, o: { patch?: boolean; maxFileChars?: number } = {}): Promise<{ files: FileChange[]; notKept: string[] }> {
  if (!isId(a) || !isId(b)) throw new Error('not a tree id');
  // The listing and the patches at once (two processes side by side; both list the files in the same order).
  const [raw, patch] = await Promise.all([
    git(store, ['diff-tree', '-r', '-z', '-M', '--raw', '--numstat', '--no-ext-diff', '--no-textconv', a, b]),
    o.patch ? git(store, ['diff-tree', '-r', '-M', '-p', '-U3', '--no-color', '--no-ext-diff', '--no-textconv', a, b]) : Promise.resolve(''),
  ]);
  const listing = parseRawNumstat(raw);
  const patches = splitPatch(patch);
  const max = o.maxFileChars ?? MAX_FILE_DIFF_CHARS;
  const files = listing.map((f, i) => {
    const hunks = o.patch && !f.binary ? (patches[i] ?? '') : '';
    const head = hunks ? `--- ${f.status === 'added' ? '/dev/null' : `a/${f.from ?? f.path}`}\n+++ ${f.status === 'deleted' ? '/dev/null' : `b/${f.path}`}\n` : '';
    const diff = head + hunks;
    return { ...f, diff: diff.length > max ? diff.slice(0, max) : diff, truncated: diff.length > max };
  });
  const notKept = new Set<string>();
  for (const t of [a, b]) for (const p of JSON.parse(await readFile(join(store, SKIPPED_DIR, t), 'utf8').catch(() => '[]')) as string[]) notKept.add(p);
  return { files: files.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0)), notKept: [...notKept].sort() };
}

// ---------------------------------------------------------------- restore (confined writes)

export interface RestoreResult {
  written: number;
  deleted: number;
  /** Paths that could not be put back (a directory in the way, a link on the path): named. */
  failed: string[];
  /** The snapshot of the workspace just before (the redo point). */
  before: string;
}

/**
 * Puts the workspace back as tree `target` was: files and links that differ from the workspace now are
 * written (new file renamed over the name in the pinned directory), those the target does not have are
 * unlinked, directories left empty by that are removed. A snapshot is taken first and `saveAs` pointed at
 * it (the redo point). Files not kept (too large, hard-linked, special) are left as they are.
 */
export function restore(root: string, store: string, target: string, saveAs: string): Promise<RestoreResult> {
  checkRef(saveAs);
  return serialized(store, async () => {
    const now = await snapshotNow(root, store, [saveAs]);
    const want = await flatten(store, target);
    const have = await flatten(store, now.tree);
    const r: RestoreResult = { written: 0, deleted: 0, failed: [], before: now.tree };
    const dirsOf = (p: string) => p.split('/').slice(0, -1).map((_, i, a) => a.slice(0, i + 1).join('/'));
    const emptied = new Set<string>();
    for (const path of have.keys()) {
      const w = want.get(path);
      // A name the target has is replaced by the write below (a rename replaces a link, never follows it).
      if (w) continue;
      try {
        await removeAt(root, path);
        r.deleted++;
        dirsOf(path).forEach((d) => emptied.add(d));
      } catch {
        r.failed.push(path);
      }
    }
    // Deepest first: a directory the target does not have, left empty, goes too.
    const wantDirs = new Set([...want.keys()].flatMap(dirsOf));
    for (const d of [...emptied].sort((x, y) => y.split('/').length - x.split('/').length)) {
      if (!wantDirs.has(d)) await removeDirAt(root, d).catch(() => {});
    }
    for (const [path, w] of want) {
      const h = have.get(path);
      if (h && h.mode === w.mode && h.id === w.id) continue;
      try {
        const { body } = await readObject(store, w.id);
        await putAt(root, path, body, w.mode);
        r.written++;
      } catch {
        r.failed.push(path);
      }
    }
    return r;
  });
}

async function inParent<T>(root: string, path: string, fn: (dir: FileHandle, name: string) => Promise<T>, create = false): Promise<T> {
  const parts = splitPath(path);
  const dir = await openDirAt(root, parts.slice(0, -1), { create });
  try {
    return await fn(dir, parts[parts.length - 1]);
  } finally {
    await dir.close().catch(() => {});
  }
}

/** Unlinks a file or link (never a directory, never through a link). */
function removeAt(root: string, path: string): Promise<void> {
  return inParent(root, path, async (dir, name) => {
    const st = await lstat(pinned(dir, name)).catch(() => null);
    if (!st) return;
    if (st.isDirectory()) throw new Error('a directory');
    await unlink(pinned(dir, name));
  });
}

/** Removes an empty directory (its parent pinned). */
function removeDirAt(root: string, path: string): Promise<void> {
  return inParent(root, path, (dir, name) => rmdir(pinned(dir, name)));
}

/** Writes a file (mode 100644/100755) or a link (120000) at `path`: made under a temporary name, renamed over it. */
function putAt(root: string, path: string, body: Buffer, mode: string): Promise<void> {
  return inParent(
    root,
    path,
    async (dir, name) => {
      const tmp = `.${name.slice(0, 180)}.agentws-restore-${randomBytes(6).toString('hex')}`;
      try {
        if (mode === '120000') await symlink(body.toString('utf8'), pinned(dir, tmp));
        else {
          const fh = await open(pinned(dir, tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, FILE_MODE);
          try {
            await fh.write(body);
            await fh.chmod(mode === '100755' ? DIR_MODE : FILE_MODE);
          } finally {
            await fh.close();
          }
        }
        const existing = await lstat(pinned(dir, name)).catch(() => null);
        if (existing?.isDirectory()) throw new Error('a directory is in the way');
        await rename(pinned(dir, tmp), pinned(dir, name));
      } catch (err) {
        await unlink(pinned(dir, tmp)).catch(() => {});
        throw err;
      }
    },
    true,
  );
}

// ---------------------------------------------------------------- the runner's route

/**
 * The route, under a runtime's path on the runner channel (`/rt/<user>`), by which the control plane asks
 * a runner host for snapshots of a workspace it holds: `POST <route>/<op>?tenantId=` with a JSON body.
 */
export const WORKSPACE_SNAPSHOTS_ROUTE = '/agentws/snapshots';
const SNAPSHOT_OPS = ['snapshot', 'refs', 'changes', 'restore', 'delete', 'set'] as const;
export type SnapshotOp = (typeof SNAPSHOT_OPS)[number];

/** The store of a person's snapshots, beside (not inside) what the sandbox binds of their runtime root. */
export const snapshotStore = (runtimeRootDir: string) => join(runtimeRootDir, 'snapshots.git');

/** Answers one snapshots request on the host holding the workspace `root` and the store. */
export async function answerSnapshots(root: string, store: string, op: string, body: Record<string, unknown>): Promise<{ status: number; json: unknown }> {
  const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
  try {
    switch (op) {
      case 'snapshot': {
        const taken = await snapshot(root, store, Array.isArray(body.refs) ? (body.refs as string[]).map(String) : []);
        // Refs to drop with it (a prompt drops the session's redo point): one request, not two.
        for (const ref of Array.isArray(body.drop) ? (body.drop as string[]) : []) await deleteRef(store, String(ref));
        return { status: 200, json: taken };
      }
      case 'refs':
        return { status: 200, json: await listRefs(store, str('prefix')) };
      case 'changes':
        return { status: 200, json: await changes(store, str('a'), str('b'), { patch: body.patch === true }) };
      case 'restore':
        return { status: 200, json: await restore(root, store, str('target'), str('saveAs')) };
      case 'set': {
        // A ref pointed at a snapshot the store has (a turn sent while another ran shares its before).
        const id = str('id');
        if (!isId(id) || (await readObject(store, id).catch(() => null))?.type !== 'tree') return { status: 400, json: { error: 'validation_failed', message: 'id: not a snapshot of this store' } };
        await writeRef(store, str('ref'), id);
        return { status: 200, json: { ok: true } };
      }
      case 'delete':
        for (const ref of Array.isArray(body.refs) ? (body.refs as string[]) : []) await deleteRef(store, String(ref));
        return { status: 200, json: { ok: true } };
      default:
        return { status: 404, json: { error: 'not_found', message: `no snapshots operation ${op}` } };
    }
  } catch (err) {
    const e = err as { status?: number; code?: string; message: string };
    return { status: typeof e.status === 'number' ? e.status : 500, json: { error: e.code ?? 'snapshot_failed', message: e.message.slice(0, 300) } };
  }
}
