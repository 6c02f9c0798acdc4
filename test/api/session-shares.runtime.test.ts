import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signToken } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, openSse, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Shares and hand-over on real runtimes in real sandboxes, in one app: a live follower sees a
 * turn as it happens, an as-of-now viewer never sees later turns, a revoked share ends the follower's
 * stream, and a handed-over session continues in the teammate's own runtime with the files copied and the
 * earlier conversation given to their agent. PostgreSQL run only (the API rules are database-independent:
 * session-shares.test.ts).
 */
describe.runIf(DB_MODE === 'postgres')('sessions: shares and hand-over on real runtimes', () => {
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  const tok: Record<string, string> = {};
  // The session of the first case is handed over in the second (a turn and a runtime start fewer).
  let sid = '';
  const text = (messages: Array<{ parts: Array<Record<string, any>> }>) => messages.flatMap((m) => m.parts).filter((p) => p.type === 'text').map((p) => p.text as string);

  beforeAll(async () => {
    r = await startRuntimeApp();
    acme = await seedTenant(r.t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'max', roles: ['member'] },
      { handle: 'tom', roles: ['member'] },
    ]);
    tok.owner = await signToken(r.t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    for (const h of ['mia', 'max', 'tom']) tok[h] = await signToken(r.t, { sub: acme.ids[h], tid: acme.tenantId, roles: ['member'] });
    await applyScriptedProvider(r.t, tok.owner, r.llm);
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  it('a live follower sees a turn as it happens, an as-of-now viewer never sees it, and a revoked share ends the follower\'s stream', async () => {
    const first = await agentTurn(r, tok.mia, [{ toolCall: { name: 'write', arguments: { filePath: '/workspace/notes.txt', content: 'written for mia\n' } } }, { text: 'First answer.' }], { title: 'Notes task', text: 'one' });
    sid = first.sessionId;
    expect((await api(r.t, 'POST', `/v1/sessions/${sid}/shares`, { token: tok.mia, body: { people: ['max'], mode: 'live' } })).status).toBe(201);
    expect((await api(r.t, 'POST', `/v1/sessions/${sid}/shares`, { token: tok.mia, body: { people: ['tom'], mode: 'as_of_now' } })).status).toBe(201);

    const follower = await openSse(`${r.t.url}/v1/sessions/${sid}/events`, { authorization: `Bearer ${tok.max}` });
    expect(follower.status).toBe(200);
    // The answer is held until the follower has seen the turn start: what they see comes as it happens.
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    r.llm.script([{ text: 'Second answer, as it happens.', until: gate, chunkDelayMs: 20 }]);
    expect((await api(r.t, 'POST', `/v1/sessions/${sid}/prompt`, { token: tok.mia, body: { text: 'two', agent: 'build' } })).status).toBe(202);
    await follower.until((e) => e.data.type === 'message.updated' && e.data.properties.info?.role === 'user' && e.data.properties.info.id !== first.messages[0].info.id);
    expect(follower.events.some((e) => e.data.type === 'session.idle')).toBe(false);
    release();
    await follower.until((e) => e.data.type === 'session.idle');
    const streamed = follower.events.filter((e) => e.data.type === 'message.part.delta').map((e) => e.data.properties.delta).join('');
    expect(streamed).toContain('Second answer');

    // The live viewer reads all of it; the as-of-now one the transcript as it was when shared.
    await expect.poll(async () => text((await api(r.t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.max })).json.messages), { timeout: 10_000 }).toContain('Second answer, as it happens.');
    const asOf = (await api(r.t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.tom })).json.messages;
    expect(text(asOf)).toEqual(['one', 'First answer.']);
    const changes = await api(r.t, 'GET', `/v1/sessions/${sid}/changes`, { token: tok.tom });
    expect(changes.status).toBe(200);
    expect(changes.json.turns.map((x: any) => x.messageId)).toEqual([asOf[0].info.id]);
    expect((await api(r.t, 'GET', `/v1/sessions/${sid}/changes`, { token: tok.max })).json.turns).toHaveLength(2);

    // Revoked: the follower is told and their stream ends at once; the session is gone for them.
    const shareId = (await api(r.t, 'GET', `/v1/sessions/${sid}/shares`, { token: tok.mia })).json.shares.find((s: any) => s.person.handle === 'max').shareId;
    expect((await api(r.t, 'DELETE', `/v1/sessions/${sid}/shares/${shareId}`, { token: tok.mia })).status).toBe(204);
    await follower.until((e) => e.data.type === 'share.revoked', 10_000);
    await expect.poll(() => follower.ended, { timeout: 10_000 }).toBe(true);
    expect((await api(r.t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.max })).status).toBe(404);
    expect((await openSse(`${r.t.url}/v1/sessions/${sid}/events`, { authorization: `Bearer ${tok.max}` })).status).toBe(404);
    // The follower's stream was audited as a view (the owner's own stream is not a view).
    const views = (await r.t.opened.db.query(`select user_id, details->>'what' as what from audit_log where action = 'session.view' and session_id = $1 order by ts`, [sid])).rows;
    expect(views.filter((v) => v.what === 'stream').map((v) => v.user_id)).toEqual([acme.ids.max]);
  }, 180_000);

  it('the session handed over continues in the teammate\'s own runtime: files copied, the earlier conversation given to their agent, cost theirs', async () => {
    const handed = await api(r.t, 'POST', `/v1/sessions/${sid}/handover`, { token: tok.mia, body: { to: 'max' } });
    expect(handed.status, handed.text).toBe(200);
    const folder = handed.json.workspace.folder as string;
    expect(folder).toBe(`handed-over/notes-task-${sid.slice(0, 8)}`);
    expect(handed.json.workspace.files).toBeGreaterThanOrEqual(1);
    const at = new Date();
    // The session's other shares ended with the hand-over (the new owner decides whom to show it).
    expect((await api(r.t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.tom })).status).toBe(404);

    // Max's agent, in Max's sandbox, reads the copied file where the context says it is.
    const t2 = await agentTurn(r, tok.max, [{ toolCall: { name: 'read', arguments: { filePath: `/workspace/${folder}/notes.txt` } } }, { text: 'Carried on.' }], { sessionId: sid, text: 'carry on' });
    expect(t2.output).toContain('written for mia');
    const firstCall = JSON.stringify(t2.requests[0].body.messages);
    expect(firstCall).toContain('<earlier-conversation>');
    expect(firstCall).toContain('Second answer, as it happens.');
    expect(firstCall).toContain(folder);
    // The transcript: the earlier conversation, then Max's turn; the context given to the agent is not shown again.
    expect(text(t2.messages)).toEqual(['one', 'First answer.', 'two', 'Second answer, as it happens.', 'carry on', 'Carried on.']);
    const runtimes = (await r.t.opened.db.query<{ user_id: string }>(`select user_id from agent_runtimes where user_id = any($1)`, [[acme.ids.mia, acme.ids.max]])).rows.map((x) => x.user_id);
    expect(runtimes).toContain(acme.ids.max);
    // Cost from the hand-over on is Max's.
    await expect.poll(async () => (await r.t.opened.db.query(`select distinct user_id from usage_records where session_id = $1 and created_at >= $2`, [sid, at])).rows.map((x) => x.user_id), { timeout: 10_000 }).toEqual([acme.ids.max]);
    expect((await r.t.opened.db.query(`select distinct user_id from usage_records where session_id = $1 and created_at < $2`, [sid, at])).rows.map((x) => x.user_id)).toEqual([acme.ids.mia]);
    // Mia keeps a live read-only share: she reads it all, and can no longer prompt.
    expect(text((await api(r.t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.mia })).json.messages)).toEqual(['one', 'First answer.', 'two', 'Second answer, as it happens.', 'carry on', 'Carried on.']);
    expect((await api(r.t, 'POST', `/v1/sessions/${sid}/prompt`, { token: tok.mia, body: { text: 'me again', agent: 'build' } })).status).toBe(404);
  }, 180_000);
});
