import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, signToken } from '../helpers/app.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/** Tool permissions, tools policy and stream resumption on the real runtime (PostgreSQL run only). */
describe.runIf(DB_MODE === 'postgres')('sessions: tool permissions, tools policy, Last-Event-ID', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => r?.close());

  const dirOf = async (sessionId: string) => (await r.t.opened.db.query(`select directory from agent_sessions where id = $1`, [sessionId])).rows[0].directory as string;

  it('forwards permission.asked, runs the tool after `once`, audits it, and answers 404 to a second reply', async () => {
    const { tokens, ids } = people;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'tools' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${tokens.member}` });
    // `nice` prints the niceness the tool runs at: the runtime's (AGENTWS_RUNTIME_NICE, default 10).
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'nice > ran-once.txt', description: 'create a file' } } }, { text: 'Created it.' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'make a file', agent: 'build' } })).status).toBe(202);

    const events = await sse.until((e) => e.data.type === 'permission.asked');
    const asked = events.find((e) => e.data.type === 'permission.asked')!.data.properties;
    expect(asked).toMatchObject({ id: expect.stringMatching(/^per_/), sessionID: sessionId, permission: 'bash', patterns: ['nice > ran-once.txt'] });

    // Another user cannot answer it, even knowing the id.
    const other = await signToken(r.t, { sub: ids.owner, tid: people.tenantId, roles: ['owner'] });
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${asked.id}`, { token: other, body: { response: 'once' } })).status).toBe(404);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${asked.id}`, { token: tokens.member, body: { response: 'sometimes' } })).status).toBe(400);
    const reply = await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${asked.id}`, { token: tokens.member, body: { response: 'once' } });
    expect(reply.status).toBe(200);
    await sse.until((e) => e.data.type === 'session.idle');
    expect(readFileSync(join(await dirOf(sessionId), 'ran-once.txt'), 'utf8').trim()).toBe('10');
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/permissions/${asked.id}`, { token: tokens.member, body: { response: 'once' } })).status).toBe(404);
    await sse.close();

    await expect
      .poll(async () => (await api(r.t, 'GET', '/v1/admin/audit-log?action=tool.execute', { token: tokens.owner })).json.entries, { timeout: 15_000, interval: 250 })
      .toEqual([expect.objectContaining({ action: 'tool.execute', target: 'bash', sessionId, userId: ids.mia, channel: 'web', durationMs: expect.any(Number) })]);
    const decision = await api(r.t, 'GET', '/v1/admin/audit-log?action=permission.reply', { token: tokens.owner });
    expect(decision.json.entries).toEqual([expect.objectContaining({ target: 'tool:bash', sessionId, userId: ids.mia })]);
  }, 90_000);

  it('keeps a denied tool from the model: it never asks, never runs, and the attempt is audited', async () => {
    const { tokens, ids, tenantId } = people;
    const role = await api(r.t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name: 'no-shell', permissions: { agents: { create: true }, tools: { allowed: '*', denied: ['bash'] } } } });
    expect(role.status).toBe(201);
    const assigned = await api(r.t, 'POST', `/v1/admin/users/${ids.vic}/roles`, { token: tokens.owner, body: { roleId: role.json.role.id } });
    expect(assigned.status, assigned.text).toBe(200);
    const vic = await signToken(r.t, { sub: ids.vic, tid: tenantId, roles: ['viewer', 'no-shell'] });
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: vic, body: { title: 'denied' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${vic}` });
    const before = r.llm.requests.length;
    r.llm.script([{ toolCall: { name: 'bash', arguments: { command: 'touch ran-denied.txt', description: 'create a file' } } }, { text: 'I could not.' }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: vic, body: { text: 'make a file', agent: 'build' } })).status).toBe(202);
    const events = await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
    expect(events.some((e) => e.data.type === 'permission.asked')).toBe(false);
    expect(existsSync(join(await dirOf(sessionId), 'ran-denied.txt'))).toBe(false);
    // The model was not offered the tool.
    const first = r.llm.requests.slice(before).find((q) => !q.title)!;
    const toolsOffered = (first.body.tools ?? []).map((x: any) => x.function?.name ?? x.name);
    expect(toolsOffered).not.toContain('bash');
    expect(toolsOffered).toContain('read');
    await expect
      .poll(async () => (await api(r.t, 'GET', '/v1/admin/audit-log?action=tool.denied', { token: tokens.owner })).json.entries, { timeout: 15_000, interval: 250 })
      .toEqual([expect.objectContaining({ target: 'bash', sessionId, userId: ids.vic })]);
  }, 90_000);

  it('stops a turn that costs more than the per-request limit, and says so on the stream', async () => {
    const { tokens, tenantId } = people;
    const role = await api(r.t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name: 'frugal', permissions: { agents: { create: true }, tools: { allowed: '*' }, cost: { per_request_limit_usd: 0.001 } } } });
    const { rows } = await r.t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, 'fru', 'fru@acme.example') returning id`, [tenantId]);
    await api(r.t, 'POST', `/v1/admin/users/${rows[0].id}/roles`, { token: tokens.owner, body: { roleId: role.json.role.id } });
    const fru = await signToken(r.t, { sub: rows[0].id, tid: tenantId, roles: ['frugal'] });
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: fru, body: { title: 'expensive' } })).json.sessionId;
    const sse = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { authorization: `Bearer ${fru}` });
    // The first step costs $0.006 (1000 in at $2/M, 500 out at $8/M) and asks for a tool, so the turn would go on.
    r.llm.script([{ toolCall: { name: 'read', arguments: { filePath: 'nothing.txt' } }, usage: { prompt: 1000, completion: 500 } }, { text: 'should not get here' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: fru, body: { text: 'spend', agent: 'build' } });
    const events = await sse.until((e) => e.data.type === 'session.error');
    expect(events.find((e) => e.data.type === 'session.error')!.data.properties).toMatchObject({ sessionID: sessionId, error: { name: 'APIError', data: { statusCode: 402, message: expect.stringContaining('per-request limit') } } });
    await sse.until((e) => e.data.type === 'session.idle');
    await sse.close();
    expect(sse.events.some((e) => e.data.type === 'message.part.delta' && /should not/.test(e.data.properties.delta))).toBe(false);
    await expect
      .poll(async () => (await api(r.t, 'GET', '/v1/admin/audit-log?action=cost.limit_reached', { token: tokens.owner })).json.entries, { timeout: 15_000, interval: 250 })
      .toEqual([expect.objectContaining({ sessionId, userId: rows[0].id })]);
  }, 90_000);

  it('replays what a client missed when it reconnects with Last-Event-ID', async () => {
    const { tokens } = people;
    const sessionId = (await api(r.t, 'POST', '/v1/sessions', { token: tokens.member, body: { title: 'resume' } })).json.sessionId;
    const auth = { authorization: `Bearer ${tokens.member}` };
    const first = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, auth);
    r.llm.script([{ text: 'one two three four five six seven eight nine ten' }]);
    await api(r.t, 'POST', `/v1/sessions/${sessionId}/prompt`, { token: tokens.member, body: { text: 'count', agent: 'build' } });
    await first.until((e) => e.data.type === 'session.idle');
    // The runtime may still send an update or two after the turn ends; let the stream settle.
    await first.quiet();
    await first.close();
    const all = first.events;
    const cut = Math.floor(all.length / 2);
    const resumed = await openSse(`${r.t.url}/v1/sessions/${sessionId}/events`, { ...auth, 'last-event-id': all[cut - 1].id! });
    await resumed.until((e) => e.id === all.at(-1)!.id);
    expect(resumed.events.map((e) => e.id)).toEqual(all.slice(cut).map((e) => e.id));
    expect(resumed.events.map((e) => e.data)).toEqual(all.slice(cut).map((e) => e.data));
    await resumed.close();
  }, 90_000);
});
