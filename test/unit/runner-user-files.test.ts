import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync, linkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArchiveRefused, discard, importArchive, listCopies, markCopy, readCopy, RECOVERED_DIR, setAside, userPaths } from '../../src/runner/user-files.js';

/**
 * A user's files on a runner host (src/runner/user-files.ts), on real files: a drain's archive, from a
 * runner that may be hostile, is inspected before anything here changes; copies are marked with the copy
 * they are, set aside or removed.
 */
const T = '11111111-1111-4111-8111-111111111111';
const U = '22222222-2222-4222-8222-222222222222';
const OTHER_T = '33333333-3333-4333-8333-333333333333';
const VICTIM = '44444444-4444-4444-8444-444444444444';
const ws = `workspaces/${T}/${U}`;
const home = `runtimes/${U}/home`;

type Entry = { name: string; type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device'; content?: string; linkname?: string; mode?: number };

/** An archive as a runner would send it, entry by entry as the test says. */
async function archive(entries: Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((r) => pack.on('end', () => r()));
  for (const e of entries) {
    await new Promise<void>((resolve, reject) =>
      pack.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname, mode: e.mode, ...(e.type === 'character-device' ? { devmajor: 1, devminor: 3 } : {}) }, e.content ?? '', (err) => (err ? reject(err) : resolve())),
    );
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

describe('a user\'s files on a runner host', () => {
  let dir: string;
  const refusal = async (entries: Entry[]) => importArchive(dir, { tenantId: T, userId: U, filesFence: 9 }, Readable.from(await archive(entries))).then(
    () => null,
    (err) => err,
  );
  /** What is under the data dir, as relative paths (the import's staging never stays). */
  const tree = (): string[] => {
    const out: string[] = [];
    const walk = (rel: string) => {
      for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
        const p = rel ? `${rel}/${e.name}` : e.name;
        out.push(p);
        if (e.isDirectory()) walk(p);
      }
    };
    walk('');
    return out.sort();
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agentws-user-files-'));
    // The user's current copy here, and another tenant's user's file beside it.
    mkdirSync(join(dir, ws), { recursive: true });
    writeFileSync(join(dir, ws, 'mine.txt'), 'the copy here\n');
    mkdirSync(join(dir, `workspaces/${OTHER_T}/${VICTIM}`), { recursive: true });
    writeFileSync(join(dir, `workspaces/${OTHER_T}/${VICTIM}/secret.txt`), 'the victim\'s secret\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('takes a good archive whole: files, directories, links within the user\'s files and into the system; marks the copy', async () => {
    const r = await importArchive(
      dir,
      { tenantId: T, userId: U, filesFence: 42 },
      Readable.from(
        await archive([
          { name: `${ws}/`, type: 'directory', mode: 0o755 },
          { name: `${ws}/src/`, type: 'directory' },
          { name: `${ws}/src/a.ts`, content: 'export const a = 1;\n', mode: 0o4755 },
          { name: `${ws}/src/b.ts`, type: 'link', linkname: `${ws}/src/a.ts` },
          { name: `${ws}/node_modules/.bin/tool`, type: 'symlink', linkname: '../tool/cli.js' },
          { name: `${ws}/.venv/bin/python3`, type: 'symlink', linkname: '/usr/bin/python3' },
          { name: `${ws}/abs`, type: 'symlink', linkname: '/workspace/src/a.ts' },
          { name: `${home}/`, type: 'directory' },
          { name: `${home}/.local/share/opencode/opencode.db`, content: 'sqlite' },
        ]),
      ),
    );
    expect(r).toEqual({ files: 2, bytes: 26 });
    // The copy that was here is replaced.
    expect(existsSync(join(dir, ws, 'mine.txt'))).toBe(false);
    expect(readFileSync(join(dir, ws, 'src/b.ts'), 'utf8')).toBe('export const a = 1;\n');
    expect(statSync(join(dir, ws, 'src/b.ts')).ino).toBe(statSync(join(dir, ws, 'src/a.ts')).ino);
    // No set-id bit from an archive.
    expect(statSync(join(dir, ws, 'src/a.ts')).mode & 0o7777).toBe(0o755);
    expect(readlinkSync(join(dir, ws, '.venv/bin/python3'))).toBe('/usr/bin/python3');
    expect(readFileSync(join(dir, home, '.local/share/opencode/opencode.db'), 'utf8')).toBe('sqlite');
    expect(readCopy(dir, U)).toEqual({ filesFence: 42, tenantId: T });
    expect(tree().filter((p) => p.startsWith('.import'))).toEqual([]);
  });

  it('takes what GNU tar makes of a real workspace (long names, links), as the leaving runner sends it', async () => {
    const src = mkdtempSync(join(tmpdir(), 'agentws-user-files-src-'));
    try {
      const deep = join(src, ws, 'a'.repeat(60), 'b'.repeat(60));
      mkdirSync(deep, { recursive: true });
      writeFileSync(join(deep, `${'c'.repeat(80)}.txt`), 'long\n');
      linkSync(join(deep, `${'c'.repeat(80)}.txt`), join(src, ws, 'hard.txt'));
      symlinkSync('hard.txt', join(src, ws, 'soft'));
      mkdirSync(join(src, home, '.config/opencode'), { recursive: true });
      const bytes = execFileSync('tar', ['-C', src, '-cf', '-', '--', ws, home]);
      await importArchive(dir, { tenantId: T, userId: U, filesFence: 7 }, Readable.from(bytes));
      expect(readFileSync(join(dir, ws, 'a'.repeat(60), 'b'.repeat(60), `${'c'.repeat(80)}.txt`), 'utf8')).toBe('long\n');
      expect(readFileSync(join(dir, ws, 'soft'), 'utf8')).toBe('long\n');
      expect(lstatSync(join(dir, home, '.config/opencode')).isDirectory()).toBe(true);
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });

  it('refuses a hard link to another user\'s (another tenant\'s) file, and nothing here changes', async () => {
    const before = tree();
    const err = await refusal([
      { name: `${ws}/`, type: 'directory' },
      { name: `${ws}/notes.txt`, content: 'planted\n' },
      { name: `${ws}/steal`, type: 'link', linkname: `workspaces/${OTHER_T}/${VICTIM}/secret.txt` },
    ]);
    expect(err).toBeInstanceOf(ArchiveRefused);
    expect(err.message).toMatch(/hard link/);
    expect(tree()).toEqual(before);
    expect(readFileSync(join(dir, ws, 'mine.txt'), 'utf8')).toBe('the copy here\n');
    expect(statSync(join(dir, `workspaces/${OTHER_T}/${VICTIM}/secret.txt`)).nlink).toBe(1);
    expect(readCopy(dir, U)).toBeNull();
  });

  it('refuses every other way out of the user\'s files, each leaving everything as it was', async () => {
    const cases: Array<[string, Entry[]]> = [
      ['hard link to a file of theirs not in the archive', [{ name: `${ws}/x`, type: 'link', linkname: `${ws}/mine.txt` }]],
      ['hard link to a later entry', [{ name: `${ws}/x`, type: 'link', linkname: `${ws}/y` }, { name: `${ws}/y`, content: 'y' }]],
      ['symlink climbing out', [{ name: `${ws}/x`, type: 'symlink', linkname: `../../${OTHER_T}/${VICTIM}/secret.txt` }]],
      ['symlink climbing out of the home', [{ name: `${home}/x`, type: 'symlink', linkname: '../../../etc' }]],
      ['symlink to a host path', [{ name: `${ws}/x`, type: 'symlink', linkname: '/etc/agentws/runner-token' }]],
      ['symlink into the data dir', [{ name: `${ws}/x`, type: 'symlink', linkname: '/var/lib/agentws/workspaces' }]],
      ['the workspace itself a symlink', [{ name: ws, type: 'symlink', linkname: `/workspace` }]],
      ['a home mount point a symlink', [{ name: `${home}/.config`, type: 'symlink', linkname: '/home/agent' }]],
      ['an entry through a symlink', [{ name: `${ws}/d`, type: 'symlink', linkname: 'e' }, { name: `${ws}/d/f`, content: 'x' }]],
      ['a directory over a symlink', [{ name: `${ws}/d`, type: 'symlink', linkname: '/usr' }, { name: `${ws}/d`, type: 'directory', mode: 0o777 }]],
      ['a device', [{ name: `${ws}/null`, type: 'character-device' }]],
      ['a fifo', [{ name: `${ws}/pipe`, type: 'fifo' }]],
      ['an absolute name', [{ name: `/${ws}/x`, content: 'x' }]],
      ['a climbing name', [{ name: `${ws}/../${VICTIM}/x`, content: 'x' }]],
      ['another user\'s path', [{ name: `workspaces/${OTHER_T}/${VICTIM}/secret.txt`, content: 'overwritten' }]],
      ['the data dir\'s own files', [{ name: `runtimes/${U}/copy.json`, content: '{"filesFence":1}' }]],
    ];
    const before = tree();
    for (const [what, entries] of cases) {
      const err = await refusal(entries);
      expect(err, what).toBeInstanceOf(ArchiveRefused);
      expect(tree(), what).toEqual(before);
    }
    expect(readFileSync(join(dir, `workspaces/${OTHER_T}/${VICTIM}/secret.txt`), 'utf8')).toBe('the victim\'s secret\n');
    expect(statSync('/usr').mode & 0o777).not.toBe(0o777);
  });

  it('copies are marked, listed, set aside out of every sandbox\'s reach, or removed', () => {
    mkdirSync(join(dir, home), { recursive: true });
    writeFileSync(join(dir, home, 'transcript'), 't');
    markCopy(dir, { tenantId: T, userId: U }, 5);
    expect(listCopies(dir).sort((a, b) => a.userId.localeCompare(b.userId))).toEqual([
      { userId: U, tenantId: T, filesFence: 5 },
      { userId: VICTIM, tenantId: OTHER_T, filesFence: null },
    ]);
    const where = setAside(dir, { tenantId: T, userId: U }, 'placed elsewhere since', new Date('2026-12-01T10:00:00Z'));
    expect(where).toBe(`${RECOVERED_DIR}/2026-12-01T10-00-00-000Z-${U}`);
    expect(readFileSync(join(dir, where!, 'workspace/mine.txt'), 'utf8')).toBe('the copy here\n');
    expect(readFileSync(join(dir, where!, 'home/transcript'), 'utf8')).toBe('t');
    expect(JSON.parse(readFileSync(join(dir, where!, 'about.json'), 'utf8'))).toMatchObject({ tenantId: T, userId: U, why: 'placed elsewhere since' });
    expect(existsSync(join(dir, ws))).toBe(false);
    expect(existsSync(join(dir, home))).toBe(false);
    expect(readCopy(dir, U)).toBeNull();
    expect(setAside(dir, { tenantId: T, userId: U }, 'again')).toBeNull();

    expect(discard(dir, { tenantId: OTHER_T, userId: VICTIM })).toBe(true);
    expect(existsSync(join(dir, `workspaces/${OTHER_T}/${VICTIM}`))).toBe(false);
    expect(discard(dir, { tenantId: OTHER_T, userId: VICTIM })).toBe(false);
    expect(userPaths({ tenantId: '../x', userId: U })).toBeNull();
  });
});
