import http from 'node:http';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeLlm, FakeStep } from '../fixtures/fake-llm.js';
import { api, type TestApp } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp, type SseEvent } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

type Reply = 'once' | 'always' | 'reject';

/** Runs one turn of the scripted model, answering every permission request as `decide` says. */
async function permissionTurn(
  t: TestApp,
  llm: FakeLlm,
  token: string,
  o: {
    steps: FakeStep[];
    decide: (permission: string) => Reply;
    prepare?: (dir: string) => void;
    /** Leave this request unanswered for now (`asked`: what was answered so far); asked again as more arrive. */
    hold?: (permission: string, asked: string[]) => boolean;
  },
) {
  const sessionId = (await api(t, 'POST', '/v1/sessions', { token, body: { title: 'permissions' } })).json.sessionId as string;
  const dir = (await t.opened.db.query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory as string;
  o.prepare?.(dir);
  const sse = await openSse(`${t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
  llm.script(o.steps);
  expect((await api(t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'use the tool', agent: 'build' } })).status).toBe(202);
  const asked: string[] = [];
  const replies: number[] = [];
  const answered = new Set<string>();
  const deadline = Date.now() + 60_000;
  const seen = new Set<string>();
  const held = new Set<string>();
  // A request the runtime itself settled (a rejection ends the session's other open requests) is not open.
  const settled = () => new Set(sse.events.filter((e) => e.data.type === 'permission.replied').map((e) => e.data.properties.requestID as string));
  const unanswered = (e: SseEvent) => e.data.type === 'permission.asked' && !answered.has(e.data.properties.id) && !settled().has(e.data.properties.id);
  const unseen = (e: SseEvent) => unanswered(e) && !seen.has(e.data.properties.id);
  for (;;) {
    // The next new request, or the turn's end.
    await sse.until((e) => unseen(e) || e.data.type === 'session.idle', Math.max(0, deadline - Date.now())).catch((err: Error) => {
      throw new Error(`turn did not end: ${err.message}`);
    });
    // Answer what is open, held requests last and only once `hold` lets them go (answering one may free another).
    for (let progress = true; progress; ) {
      progress = false;
      for (const e of sse.events.filter(unanswered)) {
        const p = e.data.properties;
        seen.add(p.id);
        if (o.hold?.(p.permission, asked)) {
          held.add(p.id);
          continue;
        }
        if (held.has(p.id)) {
          // Released by an answer just given: the runtime may have settled it with that answer (a rejection
          // ends the session's other requests); its `permission.replied` follows the reply within moments.
          await sse.until((e) => e.data.type === 'permission.replied' && e.data.properties.requestID === p.id, 1_000).catch(() => []);
          if (settled().has(p.id)) continue;
        }
        answered.add(p.id);
        asked.push(p.permission);
        const r = await api(t, 'POST', `/v1/sessions/${sessionId}/permissions/${p.id}`, { token, body: { response: o.decide(p.permission) } });
        replies.push(r.status);
        progress = true;
      }
    }
    if (sse.events.some((e) => e.data.type === 'session.idle')) break;
  }
  // The runtime may still settle a tool part or two after the turn ends: wait (a little) for every tool
  // call to reach its last state; the assertions on `tools` say what is wrong when one does not.
  await expect.poll(() => toolStates(sse.events).every((s) => /:(completed|error)$/.test(s)), { timeout: 5_000, interval: 50 }).toBe(true).catch(() => {});
  await sse.close();
  return { sessionId, dir, asked, replies, events: sse.events, tools: toolStates(sse.events) };
}

/** The last state of each tool call of the turn: `<tool>:<status>`. */
function toolStates(events: SseEvent[]): string[] {
  const last = new Map<string, string>();
  for (const e of events) {
    const part = e.data.type === 'message.part.updated' ? e.data.properties.part : null;
    if (part?.type === 'tool') last.set(part.id, `${part.tool}:${part.state.status}`);
  }
  return [...last.values()];
}

/**
 * Every tool opencode 1.18.33 lets ask is answerable with once, always and reject:
 * the runtime's own list of pending requests answers 400 while a request with an unset
 * metadata field is pending (webfetch, glob, grep), so replies are checked against our own record.
 * And a reply the runtime does not take stops the turn (its own tenant, on the same runtime host).
 * PostgreSQL run only (the real runtime; the database plays no part in what is checked here).
 */
describe.runIf(DB_MODE === 'postgres')('sessions: answering every tool that can ask', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let page: http.Server;
  let pageUrl = '';
  let pageHits = 0;

  beforeAll(async () => {
    page = http.createServer((_req, res) => {
      pageHits++;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('fetched page');
    });
    await new Promise<void>((res) => page.listen(0, '127.0.0.1', res));
    pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/page`;
    r = await startRuntimeApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: 'bash,write,read,glob,grep,webfetch,task,skill,todowrite,external_directory' } });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // A skill the runtime can load: only the tenant's promoted skills load (a workspace's never do).
    const { rows } = await r.t.opened.db.query<{ id: string }>(`insert into skills (tenant_id, name, description) values ($1, 'demo', 'A demo skill for the test.') returning id`, [people.tenantId]);
    await r.t.opened.db.query(`insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories) values ($1, $2, 1, 'A demo skill for the test.', $3, '{}')`, [
      rows[0].id,
      people.tenantId,
      '---\nname: demo\ndescription: A demo skill for the test.\n---\nSay hello.\n',
    ]);
    const promoted = await api(r.t, 'PATCH', `/v1/skills/${rows[0].id}/promote`, { token: people.tokens.owner });
    if (promoted.status !== 200) throw new Error(`promote: ${promoted.text}`);
  }, 120_000);
  afterAll(async () => {
    await r?.close();
    await new Promise((res) => page?.close(res));
  });

  const turn = (o: Parameters<typeof permissionTurn>[3]) => permissionTurn(r.t, r.llm, people.tokens.member, o);
  const tool = (name: string, args: Record<string, unknown>): FakeStep[] => [{ toolCall: { name, arguments: args } }, { text: 'Done.' }];
  const seed = (files: Record<string, string>) => (dir: string) => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
  };

  // `makes`: a file the tool creates in the (per-user) workspace when it runs.
  const cases: Array<{ tool: string; permissions: string[]; steps: () => FakeStep[]; prepare?: (dir: string) => void; makes?: string }> = [
    { tool: 'bash', permissions: ['bash'], steps: () => tool('bash', { command: 'echo ok > ran.txt', description: 'write a file' }), makes: 'ran.txt' },
    { tool: 'write', permissions: ['edit'], steps: () => tool('write', { filePath: 'written.txt', content: 'new file\n' }), makes: 'written.txt' },
    { tool: 'read', permissions: ['read'], steps: () => tool('read', { filePath: 'notes.txt' }), prepare: seed({ 'notes.txt': 'hello notes\n' }) },
    { tool: 'glob', permissions: ['glob'], steps: () => tool('glob', { pattern: '*.txt' }), prepare: seed({ 'a.txt': 'a\n' }) },
    { tool: 'grep', permissions: ['grep'], steps: () => tool('grep', { pattern: 'hello' }), prepare: seed({ 'a.txt': 'hello\n' }) },
    { tool: 'webfetch', permissions: ['webfetch'], steps: () => tool('webfetch', { url: pageUrl, format: 'text' }) },
    { tool: 'skill', permissions: ['skill'], steps: () => tool('skill', { name: 'demo' }) },
    { tool: 'todowrite', permissions: ['todowrite'], steps: () => tool('todowrite', { todos: [{ id: 't1', content: 'write the test', status: 'pending', priority: 'high' }] }) },
    { tool: 'task', permissions: ['task'], steps: () => [{ toolCall: { name: 'task', arguments: { description: 'a sub-task', prompt: 'say hi', subagent_type: 'general' } } }, { text: 'Hi from the subagent.' }, { text: 'Done.' }] },
  ];

  for (const c of cases) {
    it(`${c.tool}: asks ${c.permissions.join(', ')}; once runs it, reject does not`, async () => {
      const hitsBefore = pageHits;
      const once = await turn({ steps: c.steps(), decide: () => 'once', prepare: c.prepare });
      expect(once.asked).toEqual(c.permissions);
      expect(once.replies).toEqual(c.permissions.map(() => 200));
      // webfetch ran after `once`, and the sandbox's egress proxy refused the loopback page (no route to the
      // host's loopback from inside; NO_PROXY keeps it on the sandbox's own): an error, and no hit.
      expect(once.tools).toEqual([`${c.tool}:${c.tool === 'webfetch' ? 'error' : 'completed'}`]);
      if (c.makes) {
        expect(existsSync(join(once.dir, c.makes))).toBe(true);
        rmSync(join(once.dir, c.makes));
      }
      if (c.tool === 'webfetch') expect(pageHits).toBe(hitsBefore);

      const rejected = await turn({ steps: c.steps(), decide: () => 'reject', prepare: c.prepare });
      expect(rejected.asked).toEqual(c.permissions.slice(0, 1));
      expect(rejected.replies).toEqual([200]);
      expect(rejected.tools).toEqual([`${c.tool}:error`]);
      if (c.makes) expect(existsSync(join(rejected.dir, c.makes))).toBe(false);
      if (c.tool === 'webfetch') expect(pageHits).toBe(hitsBefore);
    }, 120_000);
  }

  it('edit: asks as edit (after the read it needs); once changes the file, reject does not', async () => {
    const steps = (): FakeStep[] => [
      { toolCall: { name: 'read', arguments: { filePath: 'edit-me.txt' } } },
      { toolCall: { name: 'edit', arguments: { filePath: 'edit-me.txt', oldString: 'hello', newString: 'bye' } } },
      { text: 'Done.' },
    ];
    const prepare = seed({ 'edit-me.txt': 'hello world\n' });
    const once = await turn({ steps: steps(), decide: () => 'once', prepare });
    expect(once.asked).toEqual(['read', 'edit']);
    expect(once.tools).toEqual(['read:completed', 'edit:completed']);
    expect(readFileSync(join(once.dir, 'edit-me.txt'), 'utf8')).toBe('bye world\n');
    const rejected = await turn({ steps: steps(), decide: (p) => (p === 'edit' ? 'reject' : 'once'), prepare });
    expect(rejected.asked).toEqual(['read', 'edit']);
    expect(rejected.tools).toEqual(['read:completed', 'edit:error']);
    expect(readFileSync(join(rejected.dir, 'edit-me.txt'), 'utf8')).toBe('hello world\n');
  }, 120_000);

  it('external_directory: asks before a tool reaches outside the workspace; once lets it, reject stops it', async () => {
    // Outside the workspace but inside the sandbox: its own /etc/passwd (written by the host for the sandbox).
    const steps = (): FakeStep[] => tool('read', { filePath: '/etc/passwd' });
    const once = await turn({ steps: steps(), decide: () => 'once' });
    expect(once.asked).toEqual(['external_directory', 'read']);
    expect(once.tools).toEqual(['read:completed']);
    const rejected = await turn({ steps: steps(), decide: () => 'reject' });
    expect(rejected.asked).toEqual(['external_directory']);
    expect(rejected.tools).toEqual(['read:error']);
  }, 120_000);

  it('doom_loop: asks (unconfigured) when the model repeats one call three times; reject stops the third', async () => {
    const repeat = (): FakeStep[] => [{ toolCalls: Array.from({ length: 3 }, () => ({ name: 'glob', arguments: { pattern: 'nothing-*.md' } })) }, { text: 'Done.' }];
    const once = await turn({ steps: repeat(), decide: () => 'once' });
    expect(once.asked).toContain('doom_loop');
    expect(once.replies.every((s) => s === 200)).toBe(true);
    expect(once.tools).toEqual(['glob:completed', 'glob:completed', 'glob:completed']);
    // The third call's own `glob` request and the runtime's `doom_loop` request are asked at about the same
    // time, in either order; a person sees both and rejects the loop. Answering the third `glob` first
    // would let that call finish before the rejection lands, so it is held until `doom_loop` is answered.
    const rejected = await turn({
      steps: repeat(),
      decide: (p) => (p === 'doom_loop' ? 'reject' : 'once'),
      hold: (p, asked) => p === 'glob' && asked.filter((a) => a === 'glob').length >= 2 && !asked.includes('doom_loop'),
    });
    expect(rejected.asked).toContain('doom_loop');
    expect(rejected.replies.every((s) => s === 200)).toBe(true);
    // The repeated call is stopped (the turn still ends: we got session.idle).
    expect(rejected.tools.filter((s) => s === 'glob:completed').length).toBeLessThan(3);
  }, 120_000);

  it('always: a later matching call runs without asking; and a request is answerable only from its own session, once', async () => {
    const first = await turn({
      steps: [{ toolCall: { name: 'bash', arguments: { command: 'echo one > one.txt', description: 'one' } } }, { toolCall: { name: 'bash', arguments: { command: 'echo two > two.txt', description: 'two' } } }, { text: 'Done.' }],
      decide: () => 'always',
    });
    expect(first.asked).toEqual(['bash']);
    expect(first.tools).toEqual(['bash:completed', 'bash:completed']);
    expect(existsSync(join(first.dir, 'two.txt'))).toBe(true);

    // A pending request of one session cannot be answered through another session of the same owner.
    const token = people.tokens.member;
    const a = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'a' } })).json.sessionId;
    const b = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'b' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${a}/events`, { authorization: `Bearer ${token}` });
    r.llm.script(tool('webfetch', { url: pageUrl, format: 'text' }));
    await api(r.t, 'POST', `/v1/sessions/${a}/prompt`, { token, body: { text: 'fetch', agent: 'build' } });
    const asked = (await sse.until((e) => e.data.type === 'permission.asked')).find((e) => e.data.type === 'permission.asked')!.data.properties;
    expect((await api(r.t, 'POST', `/v1/sessions/${b}/permissions/${asked.id}`, { token, body: { response: 'once' } })).status).toBe(404);
    const replies = await Promise.all([1, 2, 3].map(() => api(r.t, 'POST', `/v1/sessions/${a}/permissions/${asked.id}`, { token, body: { response: 'reject' } })));
    expect(replies.map((x) => x.status).sort()).toEqual([200, 404, 404]);
    await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
  }, 120_000);

  // When the runtime does not take a reply, the turn is stopped and says so, instead of waiting forever.
  it('a permission reply the runtime does not take stops the turn, puts session.error on the stream, answers 502 and audits it', async () => {
    // A tenant of its own, on this app and its runtime host: its runtime is the one frozen below.
    const people = await seedPeople(r.t, 'lost-reply');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'lost reply' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'echo no > never.txt', description: 'x' } } }, { text: 'should not run' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'run it', agent: 'build' } });
    const asked = (await sse.until((e) => e.data.type === 'permission.asked')).find((e) => e.data.type === 'permission.asked')!.data.properties;
    // The runtime is frozen when the answer is sent: it never takes it (the call times out).
    const pid = (await r.t.opened.db.query(`select pid from agent_runtimes where user_id = $1`, [people.ids.mia])).rows[0].pid;
    const tree = (p: number): number[] => [p, ...readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number).flatMap(tree)];
    const frozen = tree(pid);
    for (const p of frozen) process.kill(p, 'SIGSTOP');
    const reply = await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${asked.id}`, { token, body: { response: 'once' } });
    for (const p of frozen) process.kill(p, 'SIGCONT');
    expect(reply.status).toBe(502);
    expect(reply.json.error).toBe('upstream_failed');
    const events = await sse.until((e) => e.data.type === 'session.error', 30_000);
    await sse.close();
    expect(events.filter((e) => e.data.type === 'session.error').map((e) => e.data.properties.error)).toContainEqual(
      expect.objectContaining({ name: 'PermissionReplyFailed', message: expect.stringContaining('the turn was stopped') }),
    );
    const dir = (await r.t.opened.db.query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory;
    expect(existsSync(join(dir, 'never.txt'))).toBe(false);
    const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=permission.reply_failed', { token: people.tokens.owner });
    expect(audit.json.entries).toEqual([expect.objectContaining({ target: 'tool:bash', sessionId })]);
  }, 120_000);
});
