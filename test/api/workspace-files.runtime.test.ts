import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * Files through every route, with a runtime on serve and one on a runner host: what the
 * agent wrote is listed, read and archived; what a hostile agent planted (links and hard links to files
 * outside, a link to another person's workspace) never makes the service read or write outside; uploads
 * land as the sandbox's user would write them and the agent reads them in its next turn.
 *
 * On a runner host the same module (host/workspace-files.ts) answers through the runner channel, so there
 * the suite keeps what a hostile agent or another person could try through that channel (planted links,
 * hard links and FIFOs, paths out, uploads through links and past the limits, another person's files), the
 * headers the relayed bytes are served with, a first upload that places the person on the host, and
 * reading while the runtime is stopped. What reads the same as on serve (the upload's owner and modes, the
 * agent reading an upload in its next turn) is checked on serve only: each of those costs the runner a
 * turn or a second runtime.
 */
const LIMITS = { AGENTWS_UPLOAD_FILE_MAX: '64KiB', AGENTWS_UPLOAD_MAX_FILES: '5' };

async function untar(body: ArrayBuffer): Promise<Map<string, { type: string; body: string; linkname?: string }>> {
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
  Readable.from([Buffer.from(body)]).pipe(ex);
  await done;
  return out;
}

function suite(name: string, runner: boolean) {
  describe(name, () => {
    let r: RuntimeApp;
    let people: Awaited<ReturnType<typeof seedPeople>>;
    let outside: string;
    let ws: string;
    let otherWs: string;
    const get = (token: string, path: string) => fetch(`${r.t.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    const upload = (token: string, dir: string, files: Array<[string, string | Buffer]>) => {
      const form = new FormData();
      for (const [n, content] of files) form.append('files', new Blob([content]), n);
      return fetch(`${r.t.url}/v1/workspace/files?path=${encodeURIComponent(dir)}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
    };

    beforeAll(async () => {
      r = await startRuntimeApp({ runner, vars: LIMITS });
      people = await seedPeople(r.t, 'acme');
      await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
      const dataDir = runner ? r.runner!.dataDir : r.t.opened.core.config.dataDir;
      ws = join(dataDir, 'workspaces', people.tenantId, people.ids.mia);
      if (runner) {
        // A person with no turn yet uploads: their workspace is made on the runner host they are placed on
        // (which starts their runtime there), never on serve.
        const first = await upload(people.tokens.member, '', [['report.md', '# Report\nall good\n']]);
        expect(first.status, await first.clone().text()).toBe(200);
        expect(readFileSync(join(ws, 'report.md'), 'utf8')).toBe('# Report\nall good\n');
        expect(existsSync(join(r.t.opened.core.config.dataDir, 'workspaces', people.tenantId, people.ids.mia))).toBe(false);
      } else {
        // The agent writes a report in a real turn: its workspace now exists where its runtime runs.
        await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: 'report.md', content: '# Report\nall good\n' } } }, { text: 'written' }]);
      }
      otherWs = join(dataDir, 'workspaces', people.tenantId, people.ids.owner);
      // What a hostile agent plants (the host's paths: a link is resolved on the host when followed there).
      outside = join(dataDir, 'outside-secret.txt');
      writeFileSync(outside, 'TOP SECRET of the host\n');
      mkdirSync(otherWs, { recursive: true });
      writeFileSync(join(otherWs, 'private.txt'), 'the owner\'s private file\n');
      symlinkSync(outside, join(ws, 'shadow-link'));
      symlinkSync('/etc', join(ws, 'etc-link'));
      symlinkSync(otherWs, join(ws, 'other-link'));
      linkSync(outside, join(ws, 'hard-link'));
      execFileSync('mkfifo', [join(ws, 'fifo')]);
    }, 180_000);

    afterAll(async () => {
      await r?.close();
    });

    it(`lists the workspace: ${runner ? 'the uploaded file' : "the agent's file"}, links shown as links, never followed`, async () => {
      const res = await api(r.t, 'GET', '/v1/workspace/files', { token: people.tokens.member });
      expect(res.status, res.text).toBe(200);
      const by = new Map((res.json.entries as Array<{ name: string }>).map((e) => [e.name, e]));
      expect(by.get('report.md')).toMatchObject({ type: 'file', size: 18 });
      expect(by.get('shadow-link')).toMatchObject({ type: 'symlink', target: outside });
      expect(by.get('hard-link')).toMatchObject({ type: 'file', links: 2 });
      expect(by.get('fifo')).toMatchObject({ type: 'other' });
      const through = await api(r.t, 'GET', '/v1/workspace/files?path=other-link', { token: people.tokens.member });
      expect(through.status).toBe(422);
      expect(through.json.code ?? through.json.error).toBe('symlink_refused');
      expect(through.text).not.toContain('private.txt');
      const doc = await api(r.t, 'GET', '/v1/openapi.json');
      expect(Object.keys(doc.json.paths)).toEqual(expect.arrayContaining(['/v1/workspace/files', '/v1/workspace/file', '/v1/workspace/archive']));
      expect(Object.keys(doc.json.paths['/v1/workspace/files'].post.requestBody.content)).toEqual(['multipart/form-data']);
    });

    it('reads a file with headers that never let its bytes run in the dashboard\'s origin', async () => {
      const res = await get(people.tokens.member, '/v1/workspace/file?path=report.md');
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('# Report\nall good\n');
      expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('content-security-policy')).toMatch(/^sandbox/);
      expect(res.headers.get('content-disposition')).toMatch(/^inline/);
      const dl = await get(people.tokens.member, '/v1/workspace/file?path=report.md&download=1');
      expect(dl.headers.get('content-disposition')).toMatch(/^attachment; filename="report.md"/);
      await dl.arrayBuffer();
      // HTML and SVG the agent wrote are attachments, never shown in place.
      expect((await upload(people.tokens.member, 'web', [['x.html', '<script>alert(1)</script>'], ['y.svg', '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>']])).status).toBe(200);
      for (const p of ['web/x.html', 'web/y.svg']) {
        const h = await get(people.tokens.member, `/v1/workspace/file?path=${p}`);
        expect(h.headers.get('content-disposition'), p).toMatch(/^attachment/);
        expect(h.headers.get('content-security-policy'), p).toMatch(/^sandbox/);
        await h.arrayBuffer();
      }
    });

    it('refuses to read through a planted symlink, hard link, a link on the path, a FIFO; .., absolute paths and NUL', async () => {
      for (const [path, status, code] of [
        ['shadow-link', 422, 'symlink_refused'],
        ['hard-link', 422, 'hard_link_refused'],
        ['etc-link/passwd', 422, 'symlink_refused'],
        ['other-link/private.txt', 422, 'symlink_refused'],
        ['fifo', 422, 'special_file_refused'],
        ['../' + people.ids.owner + '/private.txt', 400, 'validation_failed'],
        ['/etc/passwd', 400, 'validation_failed'],
        ['report.md\0', 400, 'validation_failed'],
      ] as const) {
        const res = await get(people.tokens.member, `/v1/workspace/file?path=${encodeURIComponent(path)}`);
        const text = await res.text();
        expect(res.status, `${path}: ${text}`).toBe(status);
        expect(JSON.parse(text).code ?? JSON.parse(text).error, path).toBe(code);
        expect(text).not.toMatch(/TOP SECRET|private file|root:/);
      }
      for (const path of ['..', '/', 'a/../..']) {
        expect((await api(r.t, 'GET', `/v1/workspace/files?path=${encodeURIComponent(path)}`, { token: people.tokens.member })).status, path).toBe(400);
        expect((await api(r.t, 'GET', `/v1/workspace/archive?path=${encodeURIComponent(path)}`, { token: people.tokens.member })).status, path).toBe(400);
      }
    });

    it('archives the workspace as a streamed tar: links stored as links, nothing outside read', async () => {
      const res = await get(people.tokens.member, '/v1/workspace/archive');
      expect(res.status, res.status === 200 ? '' : await res.clone().text()).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-tar');
      expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="workspace.tar"/);
      const entries = await untar(await res.arrayBuffer());
      expect(entries.get('workspace/report.md')?.body).toBe('# Report\nall good\n');
      expect(entries.get('workspace/shadow-link')).toMatchObject({ type: 'symlink', linkname: outside });
      expect(entries.has('workspace/hard-link')).toBe(false);
      expect(entries.has('workspace/other-link/private.txt')).toBe(false);
      expect([...entries.values()].some((e) => /TOP SECRET|private file/.test(e.body))).toBe(false);
      const head = await fetch(`${r.t.url}/v1/workspace/archive`, { method: 'HEAD', headers: { authorization: `Bearer ${people.tokens.member}` } });
      expect([head.status, head.headers.get('content-type')]).toEqual([200, 'application/x-tar']);
      expect((await api(r.t, 'GET', '/v1/workspace/archive?path=other-link', { token: people.tokens.member })).status).toBe(422);
      expect((await api(r.t, 'GET', '/v1/workspace/archive?path=etc-link', { token: people.tokens.member })).status).toBe(422);
      const { rows } = await r.t.opened.db.query(`select details from audit_log where action = 'workspace.archive_downloaded' and user_id = $1`, [people.ids.mia]);
      expect(rows.length).toBeGreaterThanOrEqual(1);
    });

    it('writes through no planted link: a link is replaced by name, a link on the path refused, the outside file never changed', async () => {
      const a = await upload(people.tokens.member, '', [['shadow-link', 'replaced'], ['hard-link', 'replaced too']]);
      expect(a.status, await a.clone().text()).toBe(200);
      expect(readFileSync(outside, 'utf8')).toBe('TOP SECRET of the host\n');
      expect(lstatSync(join(ws, 'shadow-link')).isFile()).toBe(true);
      const b = await upload(people.tokens.member, 'other-link', [['planted.txt', 'x']]);
      expect(b.status).toBe(422);
      const c = await upload(people.tokens.member, '', [['other-link/planted.txt', 'x']]);
      expect(c.status).toBe(422);
      const d = await upload(people.tokens.member, '', [['../escape.txt', 'x']]);
      expect(d.status).toBe(400);
      const e = await upload(people.tokens.member, '../x', [['a.txt', 'x']]);
      expect(e.status).toBe(400);
      expect(existsSync(join(otherWs, 'planted.txt'))).toBe(false);
      expect(existsSync(join(ws, '..', 'escape.txt'))).toBe(false);
      const { rows } = await r.t.opened.db.query<{ details: any }>(`select details from audit_log where action = 'workspace.files_uploaded' and user_id = $1`, [people.ids.mia]);
      expect(rows.some((x) => x.details.paths.includes('shadow-link'))).toBe(true);
    });

    it('refuses uploads past the limits, naming them', async () => {
      const big = await upload(people.tokens.member, 'up', [['big.bin', Buffer.alloc(100 * 1024, 1)]]);
      const bigText = await big.text();
      expect(big.status, bigText).toBe(413);
      expect(bigText).toContain('AGENTWS_UPLOAD_FILE_MAX');
      expect(existsSync(join(ws, 'up', 'big.bin'))).toBe(false);
      const many = await upload(people.tokens.member, 'many', Array.from({ length: 6 }, (_, i) => [`f${i}.txt`, 'x'] as [string, string]));
      const manyText = await many.text();
      expect(many.status, manyText).toBe(413);
      expect(manyText).toContain('AGENTWS_UPLOAD_MAX_FILES');
    });

    it('your own workspace only: another person sees theirs, a viewer has none', async () => {
      // The owner's listing is the owner's workspace: nothing of mia's.
      const own = await api(r.t, 'GET', '/v1/workspace/files', { token: people.tokens.owner });
      expect(own.status).toBe(200);
      expect(own.json.entries.map((e: { name: string }) => e.name)).not.toContain('report.md');
      const theirs = await get(people.tokens.owner, '/v1/workspace/file?path=report.md');
      expect(theirs.status).toBe(404);
      await theirs.arrayBuffer();
      for (const [m, p] of [['GET', '/v1/workspace/files'], ['GET', '/v1/workspace/file?path=report.md'], ['GET', '/v1/workspace/archive']] as const) {
        const v = await api(r.t, m, p, { token: people.tokens.viewer });
        expect(v.status, p).toBe(403);
      }
      expect((await upload(people.tokens.viewer, '', [['v.txt', 'x']])).status).toBe(403);
      expect((await api(r.t, 'GET', '/v1/workspace/files')).status).toBe(401);
    });

    // On serve only (see the top of the file): the runner's first upload is its set-up above.
    if (!runner) it('a person with no turn yet uploads: their workspace is made where they are placed, and holds only theirs', async () => {
      // The owner has never run a turn.
      const up = await upload(people.tokens.owner, 'first', [['hello.txt', 'first upload\n']]);
      expect(up.status, await up.clone().text()).toBe(200);
      const list = await api(r.t, 'GET', '/v1/workspace/files?path=first', { token: people.tokens.owner });
      expect(list.json.entries.map((e: { name: string }) => e.name)).toEqual(['hello.txt']);
      const read = await get(people.tokens.owner, '/v1/workspace/file?path=first/hello.txt');
      expect(await read.text()).toBe('first upload\n');
      expect((await get(people.tokens.member, '/v1/workspace/file?path=first/hello.txt')).status).toBe(404);
    });

    if (!runner) it('an upload (a folder\'s relative paths) lands as the sandbox\'s user writes, and the agent reads it in its next turn', async () => {
      const res = await upload(people.tokens.member, 'inbox', [['project/notes/hello.txt', 'uploaded hello 42\n'], ['project/b.txt', 'b']]);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(((await res.json()) as { files: unknown }).files).toEqual([{ path: 'inbox/project/notes/hello.txt', bytes: 18 }, { path: 'inbox/project/b.txt', bytes: 1 }]);
      const st = statSync(join(ws, 'inbox/project/notes/hello.txt'));
      const agentFile = statSync(join(ws, 'report.md'));
      expect(st.mode & 0o777).toBe(0o644);
      expect(statSync(join(ws, 'inbox/project')).mode & 0o777).toBe(0o755);
      expect([st.uid, st.gid]).toEqual([agentFile.uid, agentFile.gid]);
      const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'read', arguments: { filePath: 'inbox/project/notes/hello.txt' } } }, { text: 'read it' }]);
      expect(turn.output).toContain('uploaded hello 42');
    });

    it('browses and reads while the person\'s runtime is stopped (the files are read on their host, not by the runtime)', async () => {
      await r.t.opened.core.pool.stopUser(people.ids.mia);
      expect(await r.t.opened.core.pool.runningHandle({ tenantId: people.tenantId, userId: people.ids.mia })).toBeNull();
      const list = await api(r.t, 'GET', '/v1/workspace/files', { token: people.tokens.member });
      expect(list.status, list.text).toBe(200);
      expect(list.json.entries.map((e: { name: string }) => e.name)).toContain('report.md');
      const read = await get(people.tokens.member, '/v1/workspace/file?path=report.md');
      expect(await read.text()).toBe('# Report\nall good\n');
      expect(await r.t.opened.core.pool.runningHandle({ tenantId: people.tenantId, userId: people.ids.mia })).toBeNull();
    });
  });
}

suite('workspace files: a runtime on serve', false);
suite('workspace files: a runtime on a runner host (what a hostile agent or another person could reach through the runner channel)', true);

