import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createArchiveWriter, extractArchive } from '../../src/core/backup/backup-archive.js';
import { BACKUP_FORMAT, jwtSecretId } from '../../src/core/backup/backup-fns.js';

const dir = mkdtempSync(join(tmpdir(), 'agentws-archive-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const manifestBase = { format: BACKUP_FORMAT, createdAt: '2026-11-27T00:00:00Z', appVersion: 'test', database: { mode: 'postgres' as const, migrations: [], tables: [], sequences: [] }, secrets: { encryptionKeyIds: [], jwtSecretId: jwtSecretId('x') } };

/** An archive written by hand (what a damaged or hostile file could hold). */
async function handMade(file: string, entries: Array<{ name: string; body?: string; type?: 'file' | 'symlink'; linkname?: string }>) {
  const pack = tar.pack();
  const done = pipeline(pack, createGzip(), createWriteStream(file));
  for (const e of entries) {
    await new Promise<void>((resolve, reject) =>
      e.type === 'symlink' ? pack.entry({ name: e.name, type: 'symlink', linkname: e.linkname }, (err) => (err ? reject(err) : resolve())) : pack.entry({ name: e.name }, e.body ?? '', (err) => (err ? reject(err) : resolve())),
    );
  }
  pack.finalize();
  await done;
}

describe('the backup archive', () => {
  it('round-trips files, empty files and symlinks, every entry checked against the manifest', async () => {
    const src = join(dir, 'src');
    await import('node:fs').then((fs) => fs.mkdirSync(src, { recursive: true }));
    writeFileSync(join(src, 'a.txt'), 'hello\n');
    writeFileSync(join(src, 'empty'), '');
    const file = join(dir, 'ok.tar.gz');
    const w = await createArchiveWriter(file);
    await w.addFile('files/workspaces/a.txt', join(src, 'a.txt'));
    await w.addFile('files/workspaces/empty', join(src, 'empty'));
    await w.addSymlink('files/workspaces/link', 'a.txt');
    await w.addBuffer('db/tenants.jsonl', Buffer.from('{"id":1}\n'));
    await w.finish(manifestBase);
    expect(existsSync(`${file}.partial`)).toBe(false);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const out = join(dir, 'out');
    const m = await extractArchive(file, out);
    expect(Object.keys(m.entries).sort()).toEqual(['db/tenants.jsonl', 'files/workspaces/a.txt', 'files/workspaces/empty', 'files/workspaces/link']);
    expect(readFileSync(join(out, 'files/workspaces/a.txt'), 'utf8')).toBe('hello\n');
    expect(readFileSync(join(out, 'files/workspaces/link'), 'utf8')).toBe('hello\n');
  });

  it('refuses a damaged entry, a cut-short archive and entries the manifest does not list', async () => {
    const bad = join(dir, 'bad.tar.gz');
    await handMade(bad, [{ name: 'db/x.jsonl', body: 'changed' }, { name: 'manifest.json', body: JSON.stringify({ ...manifestBase, entries: { 'db/x.jsonl': { size: 7, sha256: sha('origin') } } }) }]);
    await expect(extractArchive(bad, join(dir, 'bad-out'))).rejects.toThrow(/does not match its checksum/);

    const extra = join(dir, 'extra.tar.gz');
    await handMade(extra, [{ name: 'db/x.jsonl', body: 'x' }, { name: 'manifest.json', body: JSON.stringify({ ...manifestBase, entries: {} }) }]);
    await expect(extractArchive(extra, join(dir, 'extra-out'))).rejects.toThrow(/does not list/);

    const cut = join(dir, 'cut.tar.gz');
    await handMade(cut, [{ name: 'db/x.jsonl', body: 'x'.repeat(100_000) }, { name: 'manifest.json', body: JSON.stringify({ ...manifestBase, entries: {} }) }]);
    truncateSync(cut, Math.floor(statSync(cut).size / 2));
    await expect(extractArchive(cut, join(dir, 'cut-out'))).rejects.toThrow(/cannot be read|no manifest/);
  });

  it('never writes outside its directory: no `..`, no absolute path, nothing through a symlink it made', async () => {
    const up = join(dir, 'up.tar.gz');
    await handMade(up, [{ name: '../escaped.txt', body: 'x' }]);
    await expect(extractArchive(up, join(dir, 'up-out'))).rejects.toThrow(/outside its root/);
    expect(existsSync(join(dir, 'escaped.txt'))).toBe(false);

    const through = join(dir, 'through.tar.gz');
    const victim = join(dir, 'victim');
    await import('node:fs').then((fs) => fs.mkdirSync(victim, { recursive: true }));
    await handMade(through, [{ name: 'files/workspaces/a', type: 'symlink', linkname: victim }, { name: 'files/workspaces/a/planted.txt', body: 'x' }]);
    await expect(extractArchive(through, join(dir, 'through-out'))).rejects.toThrow(/symbolic link/);
    expect(existsSync(join(victim, 'planted.txt'))).toBe(false);
  });
});
