import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * What changed, undo and redo on real runtimes in real sandboxes: the service's own snapshots
 * of the workspace before and after each turn (a confined walk into a store outside the sandbox; git only
 * on that store). PostgreSQL run only.
 */
describe.runIf(DB_MODE === 'postgres')('sessions: what changed, undo and redo', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let marker: string;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    marker = mkdtempSync(join(tmpdir(), 'aws-changes-marker-'));
  }, 120_000);
  afterAll(async () => {
    await r?.close();
    if (marker) rmSync(marker, { recursive: true, force: true });
  });

  const changes = (token: string, id: string, messageId?: string) => api(r.t, 'GET', `/v1/sessions/${id}/changes${messageId ? `?messageId=${messageId}` : ''}`, { token });
  const byPath = (files: Array<{ path: string }>): Record<string, any> => Object.fromEntries(files.map((f) => [f.path, f]));

  it('lists each turn and the session, undoes and redoes a turn (files and transcript), and never runs the workspace .git of the agent on the host', async () => {
    const { tokens } = people;
    // The agent's workspace is a git repository whose config runs code: an fsmonitor and hooks that would
    // leave a file on the host if the service ran git there. They may run inside the sandbox (its /tmp is its own).
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'changes' } })).json.sessionId as string;
    const dir = (await r.t.opened.db.query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory as string;
    execFileSync('git', ['init', '-q', dir]);
    const hook = join(dir, 'trap.sh');
    writeFileSync(hook, `#!/bin/sh\ntouch ${marker}/ran-$(basename "$0")\nexit 0\n`);
    chmodSync(hook, 0o755);
    appendFileSync(join(dir, '.git', 'config'), `[core]\n\tfsmonitor = ${hook}\n\thooksPath = ${dir}\n[alias]\n\tdiff = !${hook}\n`);
    for (const h of ['post-checkout', 'pre-commit', 'post-index-change', 'reference-transaction']) writeFileSync(join(dir, h), `#!/bin/sh\n${hook}\n`, { mode: 0o755 });

    const t1 = await agentTurn(r, tokens.member, [
      { toolCalls: [
        { name: 'write', arguments: { filePath: '/workspace/a.txt', content: 'one\ntwo\nthree\n' } },
        { name: 'write', arguments: { filePath: '/workspace/b.txt', content: 'bee\n' } },
        { name: 'write', arguments: { filePath: '/workspace/c.md', content: '# Notes\nkeep me\n' } },
        // A clone in a subfolder: its files are kept one by one (its .git is not).
        { name: 'bash', arguments: { command: 'git init -q lib && echo hi > lib/x.txt', description: 'clone' } },
      ] },
      { text: 'Wrote them.' },
    ], { sessionId });
    const t2 = await agentTurn(r, tokens.member, [
      { toolCall: { name: 'edit', arguments: { filePath: '/workspace/a.txt', oldString: 'two', newString: 'TWO' } } },
      { toolCall: { name: 'bash', arguments: { command: 'rm b.txt && mv c.md d.md && printf "\\000\\001\\002" > bin.dat', description: 'tidy' } } },
      { text: 'Edited.' },
    ], { sessionId });
    const [p1, p2] = t2.messages.filter((m) => m.info.role === 'user').map((m) => m.info.id as string);
    expect(t1.messages.filter((m) => m.info.role === 'user')[0].info.id).toBe(p1);

    // One turn: the diff of its snapshots (the one after it is taken as it ends).
    await expect.poll(async () => (await changes(tokens.member, sessionId, p2)).json.totals, { timeout: 10_000 }).toEqual({ files: 4, additions: 1, deletions: 2 });
    const turn2 = byPath((await changes(tokens.member, sessionId, p2)).json.files);
    expect(turn2['a.txt']).toMatchObject({ status: 'modified', additions: 1, deletions: 1, binary: false, truncated: false, diff: '--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n' });
    expect(turn2['b.txt']).toMatchObject({ status: 'deleted', deletions: 1, diff: '--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bee\n' });
    expect(turn2['d.md']).toMatchObject({ status: 'renamed', from: 'c.md', additions: 0, deletions: 0 });
    expect(turn2['bin.dat']).toMatchObject({ status: 'added', binary: true, diff: '' });

    // The session: each file from before its first turn to after its last.
    const whole = (await changes(tokens.member, sessionId)).json;
    expect(whole.messageId).toBeNull();
    expect(whole.files.map((f: any) => [f.path, f.status, f.additions, f.deletions])).toEqual([['a.txt', 'added', 3, 0], ['bin.dat', 'added', 0, 0], ['d.md', 'added', 2, 0], ['lib/x.txt', 'added', 1, 0]]);
    expect(byPath(whole.files)['a.txt'].diff).toBe('--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,3 @@\n+one\n+TWO\n+three\n');
    expect(whole.turns).toEqual([
      { messageId: p1, files: 4, additions: 7, deletions: 0, paths: ['a.txt', 'b.txt', 'c.md', 'lib/x.txt'], reverted: false },
      { messageId: p2, files: 4, additions: 1, deletions: 2, paths: ['a.txt', 'b.txt', 'bin.dat', 'd.md'], reverted: false },
    ]);
    expect(whole.reverted).toBeNull();

    // Another user's session is 404 on every route; a viewer may not undo.
    for (const [method, path, body] of [['GET', 'changes', undefined], ['POST', 'revert', { messageId: p2 }], ['POST', 'unrevert', undefined]] as const) {
      expect((await api(r.t, method, `/v1/sessions/${sessionId}/${path}`, { token: tokens.owner, body })).status).toBe(404);
    }
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.viewer, body: { messageId: p2 } })).status).toBe(403);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: 'msg_unknown1' } })).status).toBe(404);
    expect((await changes(tokens.member, sessionId, 'msg_unknown1')).status).toBe(404);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: '../x' } })).status).toBe(400);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/unrevert`, { token: tokens.member })).json.error).toBe('nothing_to_redo');

    // Undo turn 2: its files as before it, its messages gone from the transcript.
    const undone = await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: p2 } });
    expect(undone.status, undone.text).toBe(200);
    expect(undone.json.reverted).toEqual({ messageId: p2, turns: 1 });
    expect(undone.json.turns.map((t: any) => t.reverted)).toEqual([false, true]);
    expect(undone.json.files.map((f: any) => f.path)).toEqual(['a.txt', 'b.txt', 'c.md', 'lib/x.txt']);
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\ntwo\nthree\n');
    expect(readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('bee\n');
    expect(readFileSync(join(dir, 'c.md'), 'utf8')).toBe('# Notes\nkeep me\n');
    expect(existsSync(join(dir, 'd.md')) || existsSync(join(dir, 'bin.dat'))).toBe(false);
    let transcript = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages;
    expect(transcript.filter((m: any) => m.info.role === 'user').map((m: any) => m.info.id)).toEqual([p1]);
    expect(transcript.flatMap((m: any) => m.parts).some((p: any) => p.text === 'Edited.')).toBe(false);

    // Redo: the files and the transcript as they were.
    const redone = await api(r.t, 'POST', `/v1/sessions/${sessionId}/unrevert`, { token: tokens.member });
    expect(redone.status, redone.text).toBe(200);
    expect(redone.json.reverted).toBeNull();
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\nTWO\nthree\n');
    expect(existsSync(join(dir, 'b.txt'))).toBe(false);
    expect(readFileSync(join(dir, 'bin.dat'))).toEqual(Buffer.from([0, 1, 2]));
    transcript = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages;
    expect(transcript.filter((m: any) => m.info.role === 'user').map((m: any) => m.info.id)).toEqual([p1, p2]);

    // Undo both turns, then prompt: the undone turns are dropped for good and the new turn starts from before them.
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: p1 } })).json.reverted).toEqual({ messageId: p1, turns: 2 });
    expect(['a.txt', 'b.txt', 'c.md', 'd.md', 'bin.dat', 'lib/x.txt'].filter((f) => existsSync(join(dir, f)))).toEqual([]);
    // The clone's own .git is the agent's: left as it was.
    expect(existsSync(join(dir, 'lib', '.git'))).toBe(true);
    // The next prompt is refused an undo while it runs (and queued), then drops the undone turns for good.
    let release!: () => void;
    const held = new Promise<void>((res) => (release = res));
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    const before = r.llm.requests.length;
    r.llm.script([{ toolCall: { name: 'write', arguments: { filePath: '/workspace/e.txt', content: 'fresh\n' } }, until: held }, { text: 'Started over.' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'start over', agent: 'build' } })).status).toBe(202);
    for (const [path, body] of [['revert', { messageId: p1 }], ['unrevert', undefined]] as const) {
      const refused = await api(r.t, 'POST', `/v1/sessions/${sessionId}/${path}`, { token: tokens.member, body });
      expect(refused.status).toBe(409);
      expect(refused.json).toMatchObject({ error: 'turn_running', message: expect.stringContaining('a turn is running or queued') });
    }
    release();
    await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
    transcript = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages;
    const p3 = transcript.filter((m: any) => m.info.role === 'user').map((m: any) => m.info.id);
    expect(p3).toHaveLength(1);
    expect(p3[0]).not.toBe(p1);
    // The model was not shown the undone turns.
    const sent = r.llm.requests.slice(before).filter((q) => !q.title);
    expect(JSON.stringify(sent[0].body.messages)).toContain('start over');
    expect(JSON.stringify(sent[0].body.messages)).not.toContain('Edited.');
    await expect.poll(async () => (await changes(tokens.member, sessionId)).json.files.map((f: any) => f.path), { timeout: 10_000 }).toEqual(['e.txt']);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/unrevert`, { token: tokens.member })).json.error).toBe('nothing_to_redo');

    const audit = await r.t.opened.db.query(`select action, target, details from audit_log where session_id = $1 and action like 'session.%revert' order by ts`, [sessionId]);
    expect(audit.rows.map((e: any) => [e.action, e.target, e.details.messageId])).toEqual([['session.revert', `session:${sessionId}`, p2], ['session.unrevert', `session:${sessionId}`, p2], ['session.revert', `session:${sessionId}`, p1]]);

    // The store is the service's, outside the sandbox: the agent cannot see it from inside.
    const owner = (await r.t.opened.db.query(`select owner_id from agent_sessions where id = $1`, [sessionId])).rows[0].owner_id as string;
    expect(existsSync(join(r.t.env.dataDir, 'runtimes', owner, 'snapshots.git', 'objects'))).toBe(true);
    await agentTurn(r, tokens.member, [
      { toolCall: { name: 'bash', arguments: { command: 'find /home /workspace /run /tmp /etc /opt -maxdepth 8 \\( -name snapshots.git -o -name agentws-cache.json \\) 2>/dev/null > /workspace/found.txt; ls /home >> /workspace/found.txt; true', description: 'look' } } },
      { text: 'Looked.' },
    ], { sessionId });
    const found = readFileSync(join(dir, 'found.txt'), 'utf8');
    expect(found).toContain('agent');
    expect(found).not.toContain('snapshots.git');
    expect(found).not.toContain('agentws-cache');

    // A prompt sent while a turn runs (the runtime queues it behind): the two are recorded together.
    {
      let go!: () => void;
      const hold = new Promise<void>((res) => (go = res));
      r.llm.script([
        // opencode takes the queued prompt into the same run: the steps after the held one answer both.
        { toolCall: { name: 'write', arguments: { filePath: '/workspace/q1.txt', content: 'first\n' } }, until: hold },
        { toolCall: { name: 'write', arguments: { filePath: '/workspace/q2.txt', content: 'second\n' } } },
        { text: 'Both done.' },
      ]);
      expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'first', agent: 'build' } })).status).toBe(202);
      const handed = () => expect.poll(async () => (await r.t.opened.db.query(`select count(*)::int as n from agent_turns where session_id = $1 and status in ('queued', 'sending')`, [sessionId])).rows[0].n, { timeout: 20_000 }).toBe(0);
      await handed();
      await expect.poll(async () => (await r.t.opened.core.pool.client({ tenantId: people.tenantId, userId: people.ids.mia }).then((c) => c.busySessions())).length, { timeout: 20_000 }).toBeGreaterThan(0);
      expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'second', agent: 'build' } })).status).toBe(202);
      await handed();
      go();
      await expect.poll(async () => JSON.stringify((await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages.flatMap((m: any) => m.parts)), { timeout: 30_000 }).toContain('Both done.');
      const ids = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages.filter((m: any) => m.info.role === 'user').map((m: any) => m.info.id as string);
      const [q1, q2] = ids.slice(-2);
      for (const q of [q1, q2]) {
        await expect.poll(async () => (await changes(tokens.member, sessionId, q)).json.files?.map((f: any) => f.path), { timeout: 10_000 }).toEqual(['q1.txt', 'q2.txt']);
      }
    }

    // A turn with no snapshot (taken while they were off): its changes say so, and it cannot be undone.
    r.t.opened.core.turnSnapshots.enabled = false;
    const unrecorded = await agentTurn(r, tokens.member, [{ text: 'Nothing kept.' }], { sessionId });
    r.t.opened.core.turnSnapshots.enabled = true;
    const p5 = unrecorded.messages.filter((m) => m.info.role === 'user').at(-1)!.info.id as string;
    expect((await changes(tokens.member, sessionId, p5)).json).toMatchObject({ recorded: false, pending: false, files: [] });
    const notRecorded = await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: p5 } });
    expect(notRecorded.status).toBe(409);
    expect(notRecorded.json.error).toBe('not_recorded');

    // Nothing the agent planted ran on the host. The trap is real: git run on the host in that directory springs it.
    expect(readdir(marker)).toEqual([]);
    execFileSync('git', ['status', '--short'], { cwd: dir, stdio: 'ignore' });
    expect(readdir(marker).length).toBeGreaterThan(0);
  }, 150_000);
});

function readdir(dir: string): string[] {
  return execFileSync('ls', ['-A', dir], { encoding: 'utf8' }).split('\n').filter(Boolean);
}
