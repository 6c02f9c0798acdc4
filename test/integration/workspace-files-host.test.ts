import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, existsSync, lstatSync, readlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveDir, listDir, openFile, writeFile } from '../../src/core/runtime/host/workspace-files.js';

/**
 * The confinement of workspace files on a real directory: what a hostile agent can plant (symlinks and
 * hard links to files outside, links on the path, special files, a directory swapped for a link) never
 * makes the host read or write outside the workspace.
 */
const text = async (s: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};
async function untar(s: Readable): Promise<Map<string, { type: string; body: string; linkname?: string }>> {
  const out = new Map<string, { type: string; body: string; linkname?: string }>();
  const ex = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (h, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
      stream.on('end', () => {
        out.set(h.name, { type: String(h.type), body: Buffer.concat(chunks).toString('utf8'), linkname: h.linkname ?? undefined });
        next();
      });
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  s.pipe(ex);
  await done;
  return out;
}

describe('workspace files on the host: confinement', () => {
  const archiveBytes = async () => {
    const chunks: Buffer[] = [];
    for await (const c of (await archiveDir(ws, '')).stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };
  let base: string;
  let ws: string;
  let outside: string;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'wsfiles-'));
    ws = join(base, 'ws');
    outside = join(base, 'secret.txt');
    mkdirSync(join(ws, 'src'), { recursive: true });
    mkdirSync(join(base, 'other-user'));
    writeFileSync(join(base, 'other-user', 'private.txt'), 'other user secret');
    writeFileSync(outside, 'TOP SECRET');
    writeFileSync(join(ws, 'src', 'app.ts'), 'export const x = 1;\n');
    writeFileSync(join(ws, 'report.md'), '# Report\n');
    mkdirSync(join(ws, 'd'.repeat(90), 'ü'.repeat(20)), { recursive: true });
    writeFileSync(join(ws, 'd'.repeat(90), 'ü'.repeat(20), 'long-name-é.txt'), 'long and unicode\n');
    symlinkSync(outside, join(ws, 'shadow-link'));
    symlinkSync('/etc', join(ws, 'etc-link'));
    symlinkSync(join(base, 'other-user'), join(ws, 'other-link'));
    linkSync(outside, join(ws, 'hard-link'));
    execFileSync('mkfifo', [join(ws, 'fifo')]);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('lists a directory with links shown as links, never followed', async () => {
    const r = await listDir(ws, '');
    const by = new Map(r.entries.map((e) => [e.name, e]));
    expect(by.get('src')?.type).toBe('directory');
    expect(by.get('report.md')).toMatchObject({ type: 'file', size: 9 });
    expect(by.get('shadow-link')).toMatchObject({ type: 'symlink', target: outside });
    expect(by.get('hard-link')).toMatchObject({ type: 'file', links: 2 });
    expect(by.get('fifo')?.type).toBe('other');
    await expect(listDir(ws, 'other-link')).rejects.toMatchObject({ code: 'symlink_refused', status: 422 });
    await expect(listDir(ws, 'etc-link')).rejects.toMatchObject({ code: 'symlink_refused' });
    await expect(listDir(ws, 'report.md')).rejects.toMatchObject({ code: 'not_a_directory' });
    await expect(listDir(ws, 'nope')).rejects.toMatchObject({ status: 404 });
  });

  it('reads a file; refuses a symlink, a hard link to an outside file, a link on the path and a FIFO', async () => {
    expect(await text((await openFile(ws, 'src/app.ts')).stream)).toBe('export const x = 1;\n');
    await expect(openFile(ws, 'shadow-link')).rejects.toMatchObject({ code: 'symlink_refused' });
    await expect(openFile(ws, 'hard-link')).rejects.toThrow(/2 hard links/);
    await expect(openFile(ws, 'etc-link/passwd')).rejects.toMatchObject({ code: 'symlink_refused' });
    await expect(openFile(ws, 'other-link/private.txt')).rejects.toMatchObject({ code: 'symlink_refused' });
    await expect(openFile(ws, 'fifo')).rejects.toMatchObject({ code: 'special_file_refused' });
    await expect(openFile(ws, '../secret.txt')).rejects.toMatchObject({ status: 400 });
    await expect(openFile(ws, join(base, 'secret.txt'))).rejects.toMatchObject({ status: 400 });
    await expect(openFile(ws, 'src\0/app.ts')).rejects.toMatchObject({ status: 400 });
  });

  it('archives a folder as a stream: links stored as links, hard-linked and special files left out, nothing outside read', async () => {
    let done: { files: number; skipped: { hardLinked: number; special: number } } | null = null;
    const a = await archiveDir(ws, '', { onDone: (r) => (done = r) });
    expect(a.name).toBe('workspace.tar');
    const entries = await untar(a.stream);
    expect(entries.get('workspace/src/app.ts')?.body).toBe('export const x = 1;\n');
    expect(entries.get('workspace/shadow-link')).toMatchObject({ type: 'symlink', linkname: outside });
    expect(entries.has('workspace/hard-link')).toBe(false);
    expect(entries.has('workspace/fifo')).toBe(false);
    expect(entries.has('workspace/other-link/private.txt')).toBe(false);
    expect([...entries.values()].some((e) => e.body.includes('TOP SECRET') || e.body.includes('other user secret'))).toBe(false);
    // Names past ustar's 100 bytes and not ASCII travel in pax headers, whole.
    expect(entries.get(`workspace/${'d'.repeat(90)}/${'ü'.repeat(20)}/long-name-é.txt`)?.body).toBe('long and unicode\n');
    expect(done).toMatchObject({ files: 3, skipped: { hardLinked: 1, special: 1 } });
    // GNU tar reads it the same (literal names: in the C locale CI runs in, tar would print é as \303\251).
    const listed = execFileSync('tar', ['--quoting-style=literal', '-tf', '-'], { input: await archiveBytes(), encoding: 'utf8' });
    expect(listed).toContain(`workspace/${'d'.repeat(90)}/${'ü'.repeat(20)}/long-name-é.txt`);
    expect(listed).toContain('workspace/src/app.ts');
    await expect(archiveDir(ws, 'other-link')).rejects.toMatchObject({ code: 'symlink_refused' });
  });

  it('writes a new file, replacing a planted link or hard link by name, never writing through it', async () => {
    const r = await writeFile(ws, 'up/deep/new.txt', Readable.from([Buffer.from('hello')]), { maxBytes: 100, limitName: 'x' });
    expect(r).toEqual({ path: 'up/deep/new.txt', bytes: 5 });
    expect(readFileSync(join(ws, 'up/deep/new.txt'), 'utf8')).toBe('hello');
    expect(statSync(join(ws, 'up/deep/new.txt')).mode & 0o777).toBe(0o644);
    expect(statSync(join(ws, 'up/deep')).mode & 0o777).toBe(0o755);
    expect(statSync(join(ws, 'up/deep/new.txt')).uid).toBe(process.getuid!());

    await writeFile(ws, 'shadow-link', Readable.from([Buffer.from('overwritten')]), { maxBytes: 100, limitName: 'x' });
    await writeFile(ws, 'hard-link', Readable.from([Buffer.from('overwritten')]), { maxBytes: 100, limitName: 'x' });
    expect(readFileSync(outside, 'utf8')).toBe('TOP SECRET');
    expect(lstatSync(join(ws, 'shadow-link')).isFile()).toBe(true);
    expect(readFileSync(join(ws, 'hard-link'), 'utf8')).toBe('overwritten');

    // Through a link on the path: refused, nothing made outside.
    await expect(writeFile(ws, 'other-link/planted.txt', Readable.from([Buffer.from('x')]), { maxBytes: 100, limitName: 'x' })).rejects.toMatchObject({ code: 'symlink_refused' });
    expect(existsSync(join(base, 'other-user', 'planted.txt'))).toBe(false);
    await expect(writeFile(ws, '../escape.txt', Readable.from([Buffer.from('x')]), { maxBytes: 100, limitName: 'x' })).rejects.toMatchObject({ status: 400 });
    expect(existsSync(join(base, 'escape.txt'))).toBe(false);
  });

  it('refuses past the size limit, naming it, and leaves nothing behind', async () => {
    await expect(writeFile(ws, 'big.bin', Readable.from([Buffer.alloc(60), Buffer.alloc(60)]), { maxBytes: 100, limitName: 'AGENTWS_UPLOAD_FILE_MAX' })).rejects.toMatchObject({ status: 413, message: expect.stringContaining('AGENTWS_UPLOAD_FILE_MAX') });
    expect(execFileSync('ls', ['-A', ws], { encoding: 'utf8' })).not.toMatch(/big\.bin|agentws-upload/);
  });

  it('a directory swapped for a link while a walk holds it open still reads inside (the fd is pinned)', async () => {
    mkdirSync(join(ws, 'swap'));
    writeFileSync(join(ws, 'swap', 'f.txt'), 'inside');
    const a = await openFile(ws, 'swap/f.txt');
    rmSync(join(ws, 'swap'), { recursive: true });
    symlinkSync(join(base, 'other-user'), join(ws, 'swap'));
    expect(await text(a.stream)).toBe('inside');
    expect(readlinkSync(join(ws, 'swap'))).toBe(join(base, 'other-user'));
    await expect(openFile(ws, 'swap/private.txt')).rejects.toMatchObject({ code: 'symlink_refused' });
  });
});

describe('workspace file uploads: the quota', () => {
  it('stops an upload at the person\'s workspace quota, naming it, and audits what was written', async () => {
    const { createWorkspaceFilesService } = await import('../../src/core/workspace/workspace-files.service.js');
    const { silentLogger } = await import('../../src/kernel/logger.js');
    const dataDir = mkdtempSync(join(tmpdir(), 'wsquota-'));
    const owner = { tenantId: '11111111-1111-4111-8111-111111111111', userId: '22222222-2222-4222-8222-222222222222' };
    const audited: unknown[] = [];
    const svc = createWorkspaceFilesService({
      db: { transaction: async (fn: (tx: unknown) => Promise<unknown>) => fn({}) } as never,
      audit: { record: async (_tx: unknown, _ctx: unknown, entry: unknown) => (audited.push(entry), 'id') } as never,
      log: silentLogger,
      dataDir,
      placement: async () => null,
      quotaOf: async () => 1000,
      usedBytes: async () => 700,
      uploads: { fileMaxBytes: 1024 * 1024, maxFiles: 10 },
    });
    const ctx = { tenantId: owner.tenantId, requestId: 'r', log: silentLogger, channel: 'web', actor: { kind: 'user', userId: owner.userId, tenantId: owner.tenantId, roles: ['member'], via: 'token', permissions: { agents: { create: true } } } } as never;
    async function* parts() {
      yield { name: 'a.bin', stream: Readable.from([Buffer.alloc(200)]) };
      yield { name: 'b.bin', stream: Readable.from([Buffer.alloc(200)]) };
    }
    try {
      await expect(svc.upload(ctx, { dir: 'in', parts: parts() })).rejects.toMatchObject({ status: 413, message: expect.stringContaining('workspace quota') });
      const ws = join(dataDir, 'workspaces', owner.tenantId, owner.userId);
      expect(statSync(join(ws, 'in', 'a.bin')).size).toBe(200);
      expect(existsSync(join(ws, 'in', 'b.bin'))).toBe(false);
      expect(audited).toEqual([expect.objectContaining({ action: 'workspace.files_uploaded', details: expect.objectContaining({ files: 1, bytes: 200, paths: ['in/a.bin'] }) })]);
      // A role without agents.create has no workspace.
      const viewer = { ...(ctx as object), actor: { ...(ctx as { actor: object }).actor, permissions: { agents: { create: false } } } } as never;
      await expect(svc.list(viewer, { path: '' })).rejects.toMatchObject({ status: 403 });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
