import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Choosing models on a real runtime in its sandbox: the model chosen for a session and for one turn is the one
 * the provider is asked for, the transcript and the usage digest name it, a model taken away between a
 * prompt and its sending fails the turn, and a branch of a session holds its messages up to the chosen
 * one and continues on its own. One app, one runtime. PostgreSQL run only.
 */
describe.runIf(DB_MODE === 'postgres')('sessions: model per session and per turn, and branches, on a real runtime', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let sessionId: string;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // A second model on the scripted provider, priced apart.
    const models = [
      { id: 'fake-model', contextLimit: 32000, outputLimit: 4096, inputCostPerMTok: 2, outputCostPerMTok: 8 },
      { id: 'fake-big', name: 'Fake Big', contextLimit: 64000, outputLimit: 4096, inputCostPerMTok: 20, outputCostPerMTok: 80 },
    ];
    expect((await api(r.t, 'PATCH', '/v1/admin/providers/scripted', { token: people.tokens.owner, body: { models } })).status).toBe(200);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token: people.tokens.owner, body: {} })).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  const modelsAsked = (requests: Array<{ body: any }>) => requests.map((q) => q.body.model);
  const answers = (messages: Array<{ info: any }>) => messages.filter((m) => m.info.role === 'assistant');

  it('asks the provider for the model chosen for the session, then for one turn, and says which on each answer and in the usage digest', async () => {
    const { tokens } = people;
    const listed = await api(r.t, 'GET', '/v1/models', { token: tokens.member });
    expect(listed.json.defaultModel).toBe('scripted/fake-model');
    expect(listed.json.models.map((m: any) => [m.ref, m.name, m.default])).toEqual([['scripted/fake-model', 'fake-model', true], ['scripted/fake-big', 'Fake Big', false]]);

    sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'big one', model: 'scripted/fake-big' } })).json.sessionId;
    // The first turn writes a file (the branch below keeps its change).
    const t1 = await agentTurn(r, tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: '/workspace/branch.txt', content: 'one\n' } } }, { text: 'Answer one.' }], { sessionId, text: 'first question' });
    expect(modelsAsked(t1.requests)).toEqual(['fake-big', 'fake-big']);
    // This turn only: the next one is back on the session's model.
    const t2 = await agentTurn(r, tokens.member, [{ text: 'Answer two.' }], { sessionId, text: 'second question', model: 'scripted/fake-model' });
    expect(modelsAsked(t2.requests)).toEqual(['fake-model']);
    const t3 = await agentTurn(r, tokens.member, [{ text: 'Answer three.' }], { sessionId, text: 'third question' });
    expect(modelsAsked(t3.requests)).toEqual(['fake-big']);
    expect(answers(t3.messages).map((m) => m.info.model)).toEqual(['scripted/fake-big', 'scripted/fake-big', 'scripted/fake-model', 'scripted/fake-big']);

    // Back to the default for the session.
    const cleared = await api(r.t, 'PUT', `/v1/sessions/${sessionId}/model`, { token: tokens.member, body: { model: null } });
    expect(cleared.json).toMatchObject({ model: null, defaultModel: 'scripted/fake-model', effective: { model: 'scripted/fake-model', source: 'default' } });
    expect((await api(r.t, 'PUT', `/v1/sessions/${sessionId}/model`, { token: tokens.member, body: { model: 'scripted/fake-big' } })).json.effective).toEqual({ model: 'scripted/fake-big', source: 'session' });

    // The usage digest per model: both, the big one at its own prices.
    await expect
      .poll(async () => Object.keys((await api(r.t, 'GET', '/v1/admin/usage', { token: tokens.owner })).json.byModel).sort(), { timeout: 10_000 })
      .toEqual(['fake-big', 'fake-model']);
    const digest = (await api(r.t, 'GET', '/v1/admin/usage', { token: tokens.owner })).json;
    expect(digest.byModel['fake-big'].tokens).toBeGreaterThan(0);
    expect(digest.byModel['fake-big'].cost).toBeGreaterThan(digest.byModel['fake-model'].cost);
  }, 180_000);

  it('branches the session at an answer: the branch holds the messages up to it, continues on its own, and is only its owner\'s', async () => {
    const { tokens } = people;
    const original = (await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages as Array<{ info: any; parts: any[] }>;
    expect(original).toHaveLength(7);
    // The first step of the first answer (its write): the branch keeps the whole answer.
    const firstAnswer = original[1];
    expect(firstAnswer.info.role).toBe('assistant');

    // Another person's session: 404, as an unknown message of one's own.
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/fork`, { token: tokens.owner, body: { messageId: firstAnswer.info.id } })).status).toBe(404);
    const unknown = await api(r.t, 'POST', `/v1/sessions/${sessionId}/fork`, { token: tokens.member, body: { messageId: 'msg_0000000000000000000000nope' } });
    expect(unknown.status).toBe(404);
    expect(unknown.json.message).toContain('messageId');

    const forked = await api(r.t, 'POST', `/v1/sessions/${sessionId}/fork`, { token: tokens.member, body: { messageId: firstAnswer.info.id } });
    expect(forked.status).toBe(201);
    expect(forked.json).toMatchObject({ title: 'big one (branch)', messages: 3, workspace: 'shared', from: { sessionId, messageId: firstAnswer.info.id } });
    expect(forked.json.message).toContain('shares your workspace');
    const branchId = forked.json.sessionId as string;
    const text = (m: { parts: any[] }) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
    const copied = (await api(r.t, 'GET', `/v1/sessions/${branchId}/messages`, { token: tokens.member })).json.messages as Array<{ info: any; parts: any[] }>;
    expect(copied.map((m) => [m.info.role, text(m)])).toEqual([['user', 'first question'], ['assistant', ''], ['assistant', 'Answer one.']]);
    // The copied turn keeps what it changed, under the branch's own prompt id.
    const branchPrompt = copied[0].info.id as string;
    expect(branchPrompt).not.toBe(original[0].info.id);
    const changes = (await api(r.t, 'GET', `/v1/sessions/${branchId}/changes`, { token: tokens.member })).json;
    expect(changes.turns).toEqual([{ messageId: branchPrompt, files: 1, additions: 1, deletions: 0, paths: ['branch.txt'], reverted: false }]);
    expect((await api(r.t, 'GET', '/v1/sessions', { token: tokens.member })).json.sessions.map((s: any) => s.sessionId)).toContain(branchId);
    expect((await api(r.t, 'GET', `/v1/sessions/${branchId}/model`, { token: tokens.member })).json.model).toBe('scripted/fake-big');
    expect((await api(r.t, 'GET', `/v1/sessions/${branchId}/messages`, { token: tokens.owner })).status).toBe(404);

    // It continues from there: the model reads the first exchange and the new question, nothing of the later turns.
    const next = await agentTurn(r, tokens.member, [{ text: 'Answer on the branch.' }], { sessionId: branchId, text: 'branch question' });
    const sent = JSON.stringify(next.requests[0].body.messages);
    expect(sent).toContain('first question');
    expect(sent).toContain('branch question');
    expect(sent).not.toContain('second question');
    expect(next.messages.map((m) => text(m))).toEqual(['first question', '', 'Answer one.', 'branch question', 'Answer on the branch.']);
    // The original is as it was.
    expect((await api(r.t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: tokens.member })).json.messages).toHaveLength(7);
    // Undo of the copied turn in the branch puts the files back as before it; redo brings them back.
    const dir = (await r.t.opened.db.query(`select directory from agent_sessions where id = $1`, [branchId])).rows[0].directory as string;
    expect(existsSync(join(dir, 'branch.txt'))).toBe(true);
    expect((await api(r.t, 'POST', `/v1/sessions/${branchId}/revert`, { token: tokens.member, body: { messageId: branchPrompt } })).status).toBe(200);
    expect(existsSync(join(dir, 'branch.txt'))).toBe(false);
    expect((await api(r.t, 'POST', `/v1/sessions/${branchId}/unrevert`, { token: tokens.member })).status).toBe(200);
    expect(readFileSync(join(dir, 'branch.txt'), 'utf8')).toBe('one\n');
    const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=session.fork', { token: tokens.owner });
    expect(audit.json.entries.some((e: any) => e.action === 'session.fork' && e.sessionId === branchId)).toBe(true);
  }, 180_000);

  it('checks the model again when the turn is sent: a model the role lost meanwhile fails the turn, saying why', async () => {
    const { tokens, tenantId, ids } = people;
    const member = (await api(r.t, 'GET', '/v1/admin/roles', { token: tokens.owner })).json.roles.find((x: any) => x.name === 'member');
    const id = (await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'taken away' } })).json.sessionId as string;
    // The person's runtime is stopped: the turn waits for it to start (seconds) between its acceptance and its sending.
    await r.t.opened.core.pool.stopAnywhere({ tenantId, userId: ids.mia });
    const sse = await openSse(`${r.t.url}/v1/sessions/${id}/events`, { authorization: `Bearer ${tokens.member}` });
    try {
      const before = r.llm.requests.length;
      const accepted = await api(r.t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'on the big one', model: 'scripted/fake-big' } });
      expect(accepted.status).toBe(202);
      const narrowed = await api(r.t, 'PATCH', `/v1/admin/roles/${member.id}`, { token: tokens.owner, body: { permissions: { models: { allowed: ['scripted/fake-model'] } } } });
      expect(narrowed.status).toBe(200);
      await expect.poll(() => sse.events.find((e) => e.data.type === 'session.error')?.data.properties.error, { timeout: 60_000 }).toMatchObject({ code: 'model_not_allowed' });
      expect(sse.events.find((e) => e.data.type === 'session.error')!.data.properties.error.message).toContain('scripted/fake-big');
      expect(r.llm.requests.slice(before).filter((q) => !q.title)).toEqual([]);
      // And at once when the prompt is made now.
      const refused = await api(r.t, 'POST', `/v1/sessions/${id}/prompt`, { token: tokens.member, body: { text: 'again', model: 'scripted/fake-big' } });
      expect(refused.status).toBe(403);
      expect(refused.json).toMatchObject({ error: 'model_not_allowed' });
    } finally {
      await sse.close();
      await api(r.t, 'PATCH', `/v1/admin/roles/${member.id}`, { token: tokens.owner, body: { permissions: { models: { allowed: '*' } } } });
    }
  }, 180_000);
});
