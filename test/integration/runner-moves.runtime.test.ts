import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemCtx, type Ctx } from '../../src/kernel/context.js';
import { createRunnerAgent, type RunnerAgent } from '../../src/runner/runner-agent.js';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * Runner loss and drains that never bring back an older copy, with two runner hosts in this
 * process (local storage each; the multi-host test runs the same on network namespaces): a drain moves a
 * person's files and removes them from the runner they leave; when the runner they moved to is lost, the
 * one they left never hands them the copy it may still have (set aside, not used), the stream says they
 * have a fresh workspace, and the transcript says where the earlier turns went; a runner that comes back
 * sets aside the copy of someone placed elsewhere since.
 */
describe('runner hosts: drains and losses never bring back an older copy', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let r2: { agent: RunnerAgent; dataDir: string; token: string };
  let sessionId = '';
  let drainedFence = 0;
  const ctx = (): Ctx => systemCtx(silentLogger, { name: 'test' });

  const startAgent = (name: string, token: string, dataDir: string) =>
    createRunnerAgent({
      controlUrl: r.t.url,
      token,
      info: { name, address: null, capacity: 4, labels: {}, version: 'test', sharedStorage: false },
      dataDir,
      sandbox: true,
      nice: 10,
      idleMs: 600_000,
      freezeAfterMs: 0,
      log: silentLogger,
    });
  const placementOf = async () =>
    (await r.t.opened.db.query<{ name: string; fence: number; filesFence: number }>(`select r.name, p.fence::float8 as fence, (to_jsonb(p)->>'files_fence')::float8 as "filesFence" from runtime_placements p join runners r on r.id = p.runner_id where p.user_id = $1`, [people.ids.mia])).rows[0];
  const stateOf = async (name: string) => (await r.t.opened.core.runners.list(ctx())).find((x) => x.name === name)?.state;
  const ws = (dataDir: string) => join(dataDir, 'workspaces', people.tenantId, people.ids.mia);
  const home = (dataDir: string) => join(dataDir, 'runtimes', people.ids.mia, 'home');
  const recovered = (dataDir: string) => (existsSync(join(dataDir, 'recovered')) ? readdirSync(join(dataDir, 'recovered')) : []);
  const setAsideAudits = async (runner: string) =>
    (await r.t.opened.db.query(`select details from audit_log where action = 'runner.copy_set_aside' and details->>'runner' = $1 and details->>'userId' = $2`, [runner, people.ids.mia])).rows;
  /** A turn of mia's in her session, with what her session's stream said meanwhile. */
  async function turnSeen(text: string, answer: string) {
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${people.tokens.member}` });
    const turn = await agentTurn(r, people.tokens.member, [{ text: answer }], { sessionId, text });
    await sse.until((e) => e.data.type === 'session.idle', 30_000);
    await sse.close();
    return { ...turn, moved: sse.events.filter((e) => e.data.type === 'runtime.moved').map((e) => e.data.properties) };
  }

  beforeAll(async () => {
    r = await startRuntimeApp({ runner: true });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const created = await r.t.opened.core.runners.createToken(ctx(), { name: 'second-runner' });
    const dataDir = mkdtempSync(join(tmpdir(), 'agentws-runner2-'));
    r2 = { agent: startAgent('r2', created.token, dataDir), dataDir, token: created.token };
    await r2.agent.start();
    const deadline = Date.now() + 15_000;
    while (!r2.agent.connected && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    if (!r2.agent.connected) throw new Error('the second runner did not connect');
  }, 120_000);

  afterAll(async () => {
    await r2?.agent.stop().catch(() => {});
    if (r2) rmSync(r2.dataDir, { recursive: true, force: true });
    await r?.close();
  });

  it('a drain moves the person\'s files and removes them from the runner left; their next turn says so once, their conversation intact', async () => {
    const first = await agentTurn(r, people.tokens.member, [{ text: 'answer one' }], { text: 'turn one' });
    sessionId = first.sessionId;
    expect((await placementOf()).name).toBe('r1');
    const r1Dir = r.runner!.dataDir;
    writeFileSync(join(ws(r1Dir), 'notes.txt'), 'written on r1\n');
    // Her runtime stops as an idle one does (the runner keeps her lease): the drain moves her files all the same.
    await r.runner!.agent.runtimes.stopUser(people.ids.mia);

    await r.t.opened.core.runners.drain(ctx(), 'r1');
    await expect.poll(async () => (await placementOf()).name, { timeout: 60_000, interval: 500 }).toBe('r2');
    // Confirmed on r2: gone from r1 (the drain removes what it copied), marked on r2 as the current copy.
    await expect.poll(() => existsSync(ws(r1Dir)) || existsSync(home(r1Dir)), { timeout: 15_000 }).toBe(false);
    const p = await placementOf();
    drainedFence = p.filesFence;
    expect(p.filesFence).toBe(p.fence);
    expect(readFileSync(join(ws(r2.dataDir), 'notes.txt'), 'utf8')).toBe('written on r1\n');
    // The copy's marker (beside the runtime's home, outside any sandbox).
    expect(JSON.parse(readFileSync(join(r2.dataDir, 'runtimes', people.ids.mia, 'copy.json'), 'utf8'))).toEqual({ filesFence: p.filesFence, tenantId: people.tenantId });

    const second = await turnSeen('turn two', 'answer two');
    expect(second.moved).toEqual([expect.objectContaining({ workspace: 'moved', message: expect.stringMatching(/moved with it/) })]);
    const texts = second.messages.flatMap((m) => m.parts).filter((x) => x.type === 'text').map((x) => x.text);
    expect(texts).toEqual(expect.arrayContaining(['turn one', 'answer one', 'turn two', 'answer two']));
    // Told once.
    expect((await turnSeen('turn two b', 'answer two b')).moved).toEqual([]);
  }, 180_000);

  it('the runner moved to is lost: the one left never hands back an older copy; stream and transcript say what the person has; the lost one, back, sets its copy aside', async () => {
    const r1Dir = r.runner!.dataDir;
    // An older copy on r1, as a drain whose removal failed would leave it (marked as the copy it was).
    mkdirSync(ws(r1Dir), { recursive: true });
    writeFileSync(join(ws(r1Dir), 'notes.txt'), 'the copy from before the drain\n');
    writeFileSync(join(r1Dir, 'runtimes', people.ids.mia, 'copy.json'), JSON.stringify({ filesFence: 1, tenantId: people.tenantId }));
    await r.t.opened.core.runners.resume(ctx(), 'r1');

    // r2 is lost: stopped, silent past the heartbeat timeout.
    await r2.agent.stop();
    await r.t.opened.db.query(`update runners set heartbeat_at = now() - interval '1 minute' where name = 'r2'`);
    await expect.poll(() => stateOf('r2'), { timeout: 15_000 }).toBe('lost');

    // The dashboard opens for mia first: her runtime is started on r1 before her turn asks for it.
    const r1Id = (await r.t.opened.db.query<{ id: string }>(`select id from runners where name = 'r1'`)).rows[0].id;
    expect((await api(r.t, 'POST', '/v1/sessions/prepare', { token: people.tokens.member })).status).toBeLessThan(300);
    await expect
      .poll(async () => (await r.t.opened.db.query<{ s: string }>(`select socket_path as s from agent_runtimes where user_id = $1`, [people.ids.mia])).rows[0]?.s, { timeout: 60_000, interval: 300 })
      .toContain(r1Id);
    const third = await turnSeen('turn three', 'answer three');
    expect((await placementOf()).name).toBe('r1');
    expect(third.moved).toEqual([expect.objectContaining({ workspace: 'fresh', message: expect.stringMatching(/fresh workspace/) })]);
    // The older copy was set aside on r1 (the operator is told), never used: the workspace there is a new one.
    // (The runtime was up before the turn: the turn found its session missing when it sent the prompt.)
    expect(existsSync(join(ws(r1Dir), 'notes.txt'))).toBe(false);
    const kept = recovered(r1Dir);
    expect(kept).toHaveLength(1);
    expect(readFileSync(join(r1Dir, 'recovered', kept[0], 'workspace', 'notes.txt'), 'utf8')).toBe('the copy from before the drain\n');
    expect(await setAsideAudits('r1')).toEqual([{ details: expect.objectContaining({ tenantId: people.tenantId, where: `recovered/${kept[0]}` }) }]);
    // The transcript: the two earlier turns are not in this runtime, and it says so where they were.
    const messages = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: people.tokens.member })).json.messages as Array<{ info: any; parts: any[] }>;
    const notice = messages.findIndex((m) => m.info.error?.name === 'RuntimeMoved');
    expect(notice).toBeGreaterThanOrEqual(0);
    expect(messages[notice].info.error.data).toMatchObject({ code: 'runtime_moved', turns: 3, message: expect.stringMatching(/3 earlier turns .* lost/) });
    const after = messages.slice(notice + 1).flatMap((m) => m.parts).filter((x) => x.type === 'text').map((x) => x.text);
    expect(after).toEqual(['turn three', 'answer three']);
    expect(messages.slice(0, notice)).toEqual([]);

    // r2 comes back with the copy it had: placed elsewhere since, it is set aside there at once, never used.
    const back = startAgent('r2', r2.token, r2.dataDir);
    r2.agent = back;
    await back.start();
    await expect.poll(() => existsSync(ws(r2.dataDir)), { timeout: 30_000 }).toBe(false);
    const keptOnR2 = recovered(r2.dataDir);
    expect(keptOnR2).toHaveLength(1);
    expect(readFileSync(join(r2.dataDir, 'recovered', keptOnR2[0], 'workspace', 'notes.txt'), 'utf8')).toBe('written on r1\n');
    expect(existsSync(join(r2.dataDir, 'recovered', keptOnR2[0], 'home'))).toBe(true);
    await expect.poll(async () => (await setAsideAudits('r2')).length, { timeout: 10_000 }).toBe(1);
    expect(drainedFence).toBeGreaterThan(0);
    // And mia stays where she is, on her new copy.
    expect((await turnSeen('turn four', 'answer four')).moved).toEqual([]);
    expect((await placementOf()).name).toBe('r1');
  }, 240_000);
});
