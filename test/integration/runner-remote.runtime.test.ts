import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemCtx, type Ctx } from '../../src/kernel/context.js';
import { RUNNER_HEADERS, RUNNER_PATHS } from '../../src/core/runtime/host/runner-protocol.js';
import { createRunnerAgent } from '../../src/runner/runner-agent.js';
import { api } from '../helpers/app.js';
import { connectFakeRunner } from '../helpers/fake-runner.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * A control plane that runs no agent itself (AGENTWS_LOCAL_RUNNER=off) and a runner host that dials it,
 * here in one process (the multi-host test runs them on separate network namespaces): turns run on the
 * runner's sandboxed runtime, model calls go through the control plane's gateway, and a revoked token
 * ends the runner's channel.
 */
describe('runner hosts: a runtime on a runner', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  const ctx = (): Ctx => systemCtx(silentLogger, { name: 'test' });

  beforeAll(async () => {
    r = await startRuntimeApp({ runner: true });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);

  afterAll(async () => {
    await r?.close();
  });

  it('runs a turn on the runner: its workspace there, its model call through the control plane\'s gateway', async () => {
    const turn = await agentTurn(r, people.tokens.member, [{ text: 'hello from a runner' }]);
    const text = turn.messages.flatMap((m) => m.parts).find((p) => p.type === 'text' && p.text === 'hello from a runner');
    expect(text).toBeTruthy();
    // The model was called by the control plane (with the provider's key), once.
    expect(turn.requests.length).toBeGreaterThanOrEqual(1);
    expect(turn.requests[0].authorization).toBe('Bearer sk-scripted-secret');
    // The runtime is recorded as the runner's, and its files are on the runner's disk, not the control plane's.
    const { rows } = await r.t.opened.db.query(`select socket_path from agent_runtimes where user_id = $1`, [people.ids.mia]);
    expect(rows[0].socket_path).toMatch(/^runner:/);
    expect(readdirSync(join(r.runner!.dataDir, 'workspaces', people.tenantId))).toContain(people.ids.mia);
    // Usage is the gateway's record, as for a local runtime.
    const usage = await r.t.opened.db.query(`select count(*)::int as n from usage_records where user_id = $1`, [people.ids.mia]);
    expect(usage.rows[0].n).toBeGreaterThanOrEqual(1);
    // The runner is listed with what it holds.
    const list = await r.t.opened.core.runners.list(ctx());
    expect(list).toEqual([expect.objectContaining({ name: 'r1', kind: 'remote', state: 'active', healthy: true, users: 1, capacity: 4, labels: { zone: 'test' } })]);
  }, 120_000);

  it('a memory the agent on a runner saves names the session and message that made the call, as the runtime there tells it', async () => {
    const content = 'Mia reviews pull requests before lunch, never after';
    const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'memory_save', arguments: { kind: 'preference', content } } }, { text: 'saved' }], { text: 'remember how I review' });
    expect(turn.tools.map((p) => p.state?.status), turn.output).toEqual(['completed']);
    const list = await api(r.t, 'GET', '/v1/memories', { token: people.tokens.member });
    const assistant = turn.messages.find((m) => m.info.role === 'assistant' && m.parts.some((p) => p.type === 'tool' && p.tool === 'memory_save'));
    expect(list.json.memories.find((m: any) => m.content === content)).toMatchObject({ source: 'agent', author: { id: people.ids.mia }, sessionId: turn.sessionId, messageId: assistant!.info.id });
  }, 120_000);

  /** The user's placement: the runner's id and the lease's fence. */
  const placementOf = async (userId: string) => (await r.t.opened.db.query<{ runnerId: string; fence: number }>(`select runner_id as "runnerId", fence::float8 as fence from runtime_placements where user_id = $1`, [userId])).rows[0];

  it('a runner\'s notices for a user it does not hold change nothing: the victim\'s stream keeps its runtime', async () => {
    // A first turn: mia's runtime runs on r1, her session bound to its runtime session.
    const first = await agentTurn(r, people.tokens.member, [{ text: 'before' }], { text: 'hello' });
    const upstream = (await r.t.opened.db.query<{ u: string }>(`select upstream_id as u from agent_sessions where id = $1`, [first.sessionId])).rows[0].u;
    const lease = await placementOf(people.ids.mia);
    // Another runner, with a valid token of its own and nobody placed on it, that says mia's runtime is
    // ready there (with her real fence), serves an event stream of its own for her, and says it stopped.
    const evil = await r.t.opened.core.runners.createToken(ctx(), { name: 'evil' });
    const fake = await connectFakeRunner(r.t.url, evil.token, { name: 'evil-1' });
    expect(fake.refused).toBeNull();
    fake.handle((req, res) => {
      if (!req.url.startsWith('/rt/')) return false;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ type: 'server.connected', properties: {} })}\n\n`);
      res.write(`data: ${JSON.stringify({ type: 'message.part.delta', properties: { sessionID: upstream, messageID: 'msg_zzzzzzzzzzzz', partID: 'prt_zzzzzzzzzzzz', field: 'text', delta: 'INJECTED by another runner' } })}\n\n`);
      return true;
    });
    const sse = await openSse(`${r.t.url}/v1/sessions/${first.sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    fake.say(JSON.stringify({ type: 'ready', tenantId: people.tenantId, userId: people.ids.mia, fence: lease.fence, pid: 1, authorization: 'Basic eA==', directory: '/workspace' }));
    fake.say(JSON.stringify({ type: 'stopped', tenantId: people.tenantId, userId: people.ids.mia, fence: lease.fence, pid: 1 }));
    // Her next turn streams from her own runtime, to its end, with nothing of the other runner's.
    const next = await agentTurn(r, people.tokens.member, [{ text: 'after the notices' }], { sessionId: first.sessionId, text: 'again' });
    expect(next.messages.flatMap((m) => m.parts).some((p) => p.type === 'text' && p.text === 'after the notices')).toBe(true);
    await sse.until((e) => e.data.type === 'session.idle', 30_000);
    await sse.close();
    const text = sse.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');
    expect(text).toContain('after the notices');
    expect(text).not.toContain('INJECTED');
    // The control plane never opened a stream to the runner that does not hold her.
    expect(fake.requests.filter((q) => q.path.startsWith('/rt/'))).toEqual([]);
    expect(await placementOf(people.ids.mia)).toEqual(lease);
    fake.close();
  }, 120_000);

  it('a drain\'s archive with a hard link to another tenant\'s file is refused by the runner, its files unchanged', async () => {
    const dataDir = r.runner!.dataDir;
    const runnerId = (await r.t.opened.db.query<{ id: string }>(`select id from runners where name = 'r1'`)).rows[0].id;
    const otherTenant = '33333333-3333-4333-8333-333333333333';
    const victim = join(dataDir, 'workspaces', otherTenant, '44444444-4444-4444-8444-444444444444');
    mkdirSync(victim, { recursive: true });
    writeFileSync(join(victim, 'secret.txt'), 'another tenant\'s secret\n');
    // vic is placed nowhere: a drain could bring his files here. A copy of his is here already.
    const ws = join('workspaces', people.tenantId, people.ids.vic);
    mkdirSync(join(dataDir, ws), { recursive: true });
    writeFileSync(join(dataDir, ws, 'kept.txt'), 'kept\n');
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on('data', (c: unknown) => chunks.push(c as Buffer));
    const ended = new Promise<void>((res) => pack.on('end', () => res()));
    pack.entry({ name: `${ws}/`, type: 'directory' });
    pack.entry({ name: `${ws}/notes.txt` }, 'planted\n');
    pack.entry({ name: `${ws}/steal.txt`, type: 'link', linkname: `workspaces/${otherTenant}/44444444-4444-4444-8444-444444444444/secret.txt` });
    pack.finalize();
    await ended;
    const res = await r.t.opened.core.fleet.links.request(runnerId, {
      method: 'POST',
      path: `/import?tenantId=${people.tenantId}&userId=${people.ids.vic}&filesFence=999999`,
      headers: { 'content-type': 'application/x-tar' },
      bodyStream: Readable.from(Buffer.concat(chunks)),
    });
    let body = '';
    for await (const c of res) body += c;
    expect(res.statusCode, body).toBe(422);
    expect(JSON.parse(body)).toMatchObject({ error: 'archive_refused', message: expect.stringMatching(/hard link/) });
    expect(existsSync(join(dataDir, ws, 'steal.txt'))).toBe(false);
    expect(existsSync(join(dataDir, ws, 'notes.txt'))).toBe(false);
    expect(readFileSync(join(dataDir, ws, 'kept.txt'), 'utf8')).toBe('kept\n');
    expect(statSync(join(victim, 'secret.txt')).nlink).toBe(1);
  }, 60_000);

  it('another token cannot take over the runner\'s name, not even while it is lost; the runner itself comes back', async () => {
    const intruder = await r.t.opened.core.runners.createToken(ctx(), { name: 'intruder' });
    const healthy = await connectFakeRunner(r.t.url, intruder.token, { name: 'r1' });
    expect(healthy.refused).toMatchObject({ status: 409 });
    // r1 goes away and is declared lost.
    const lease = await placementOf(people.ids.mia);
    await r.runner!.agent.stop();
    await r.t.opened.db.query(`update runners set heartbeat_at = now() - interval '1 minute' where name = 'r1'`);
    await r.t.opened.core.runners.markLost();
    const lost = await connectFakeRunner(r.t.url, intruder.token, { name: 'r1', capacity: 1000 });
    expect(lost.refused).toMatchObject({ status: 409, message: expect.stringMatching(/"r1" belongs to another runner token/) });
    // What it asks in r1's name, for r1's user under her fence, is refused: no credential, no egress rules.
    for (const path of [`${RUNNER_PATHS.gateway}/v1/chat/completions`, RUNNER_PATHS.egress]) {
      const res = await fetch(`${r.t.url}${path}`, {
        method: path === RUNNER_PATHS.egress ? 'GET' : 'POST',
        headers: { [RUNNER_HEADERS.token]: intruder.token, [RUNNER_HEADERS.runner]: 'r1', [RUNNER_HEADERS.user]: people.ids.mia, [RUNNER_HEADERS.fence]: String(lease.fence), 'content-type': 'application/json' },
        body: path === RUNNER_PATHS.egress ? undefined : '{}',
      });
      expect(res.status, path).toBe(401);
    }
    // The real runner, back with its token: taken again, and mia's next turn runs there.
    const agent = createRunnerAgent({
      controlUrl: r.t.url,
      token: r.runner!.token,
      info: { name: 'r1', address: null, capacity: 4, labels: { zone: 'test' }, version: 'test', sharedStorage: false },
      dataDir: r.runner!.dataDir,
      sandbox: true,
      nice: 10,
      idleMs: 600_000,
      freezeAfterMs: 0,
      log: silentLogger,
    });
    r.runner!.agent = agent;
    await agent.start();
    await expect.poll(() => agent.connected, { timeout: 15_000 }).toBe(true);
    const turn = await agentTurn(r, people.tokens.member, [{ text: 'back on r1' }], { text: 'and now' });
    expect(turn.messages.flatMap((m) => m.parts).some((p) => p.type === 'text' && p.text === 'back on r1')).toBe(true);
    expect((await r.t.opened.core.runners.list(ctx())).find((x) => x.name === 'r1')).toMatchObject({ state: 'active', connected: true });
  }, 120_000);

  it('lists what a turn on a runner changed, undoes and redoes it there (snapshots taken and restored on the runner host)', async () => {
    const { tokens } = people;
    const workspace = join(r.runner!.dataDir, 'workspaces', people.tenantId, people.ids.mia);
    const first = await agentTurn(r, tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: '/workspace/keep.txt', content: 'kept\n' } } }, { text: 'ok' }], { title: 'changes on a runner' });
    const sessionId = first.sessionId;
    const second = await agentTurn(r, tokens.member, [{ toolCall: { name: 'bash', arguments: { command: 'rm keep.txt && echo new > new.txt', description: 'swap' } } }, { text: 'swapped' }], { sessionId });
    const prompt = second.messages.filter((m) => m.info.role === 'user').at(-1)!.info.id as string;
    await expect.poll(async () => (await api(r.t, 'GET', `/v1/sessions/${sessionId}/changes?messageId=${prompt}`, { token: tokens.member })).json.files?.map((f: any) => [f.path, f.status]), { timeout: 10_000 }).toEqual([['keep.txt', 'deleted'], ['new.txt', 'added']]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/revert`, { token: tokens.member, body: { messageId: prompt } })).status).toBe(200);
    expect([existsSync(join(workspace, 'keep.txt')), existsSync(join(workspace, 'new.txt'))]).toEqual([true, false]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/unrevert`, { token: tokens.member })).status).toBe(200);
    expect([existsSync(join(workspace, 'keep.txt')), existsSync(join(workspace, 'new.txt'))]).toEqual([false, true]);
    // The store is on the runner host, beside the runtime's files; serve keeps none for this person.
    expect(existsSync(join(r.runner!.dataDir, 'runtimes', people.ids.mia, 'snapshots.git', 'objects'))).toBe(true);
    expect(existsSync(join(r.t.env.dataDir, 'runtimes', people.ids.mia, 'snapshots.git'))).toBe(false);
  }, 120_000);

  it('a turn on a runner declared lost: its model call, relayed through the control plane\'s gateway, is aborted then and charged', async () => {
    const token = people.tokens.member;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token, body: { title: 'lost on a runner' } })).json.sessionId as string;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${token}` });
    r.llm.script([{ text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '), chunkDelayMs: 250 }]);
    const before = r.llm.requests.length;
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token, body: { text: 'a long answer', agent: 'build' } })).status).toBe(202);
    const deltas = () => sse.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');
    await sse.until(() => deltas().includes('w3 '), 60_000);
    const call = r.llm.requests.slice(before).find((q) => !q.title)!;
    // A runner marked lost before this turn was sent cannot have had it (the person's next turn is placed
    // on another runner at once, and may be in flight there when the sweep reaches them): left alone.
    const mia = { tenantId: people.tenantId, userId: people.ids.mia };
    expect(await r.t.opened.core.turns.runtimeLost(mia, 'its runner host "r0" stopped answering', { sentBefore: new Date(Date.now() - 60_000) })).toBe(0);
    // What the fleet does when the runner stops answering (no heartbeat for 30 s): its users' turns are lost.
    await r.t.opened.core.turns.runtimeLost(mia, 'its runner host "r1" stopped answering', { sentBefore: new Date(Date.now() + 5_000) });
    await sse.until((e) => e.data.type === 'session.error' && e.data.properties.error?.code === 'turn_lost', 10_000);
    // The provider's answer is abandoned at once, not relayed to its end (ten seconds of it) to nobody.
    await expect.poll(() => call.hungUp, { interval: 50 }).toBe(true);
    expect(call.chunks).toBeLessThan(35);
    await expect.poll(async () => (await r.t.opened.db.query(`select 1 from usage_records where session_id = $1 and estimated`, [sessionId])).rowCount).toBe(1);
    await sse.close();
    await r.t.opened.core.pool.stopUser(people.ids.mia);
  }, 120_000);

  it('a revoked runner token ends the channel and is refused when the runner dials again', async () => {
    await r.t.opened.core.runners.revokeToken(ctx(), r.runner!.tokenId);
    await expect.poll(() => r.runner!.agent.connected, { timeout: 15_000 }).toBe(false);
    // On purpose a fixed time: that it stays away (does not dial again successfully) is what is checked.
    await new Promise((res) => setTimeout(res, 1500));
    expect(r.runner!.agent.connected).toBe(false);
  }, 30_000);
});
