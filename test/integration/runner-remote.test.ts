import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemCtx, type Ctx } from '../../src/kernel/context.js';
import { api } from '../helpers/app.js';
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
    // What the fleet does when the runner stops answering (no heartbeat for 30 s): its users' turns are lost.
    await r.t.opened.core.turns.runtimeLost({ tenantId: people.tenantId, userId: people.ids.mia }, 'its runner host "r1" stopped answering');
    await sse.until((e) => e.data.type === 'session.error' && e.data.properties.error?.code === 'turn_lost', 10_000);
    // The provider's answer is abandoned at once, not relayed to its end (ten seconds of it) to nobody.
    await expect.poll(() => call.hungUp, { timeout: 5000, interval: 50 }).toBe(true);
    expect(call.chunks).toBeLessThan(35);
    await expect.poll(async () => (await r.t.opened.db.query(`select 1 from usage_records where session_id = $1 and estimated`, [sessionId])).rowCount, { timeout: 5000 }).toBe(1);
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
