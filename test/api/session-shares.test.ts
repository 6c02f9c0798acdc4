import { existsSync, lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Sessions shared read-only and handed over, without a runtime: sessions with no transcript yet
 * (the runtime configuration is applied while no runtime runs, enough for prompts to be queued). What needs
 * a real runtime (a live follower, a revoked follower's stream, as-of-now against later turns, the
 * teammate's runtime continuing) is in session-shares.runtime.test.ts.
 */
describe(`sessions: shares and hand-over (${DB_MODE})`, () => {
  let t: TestApp;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  let sid: string;
  let platform: string;
  let betaTeam: string;

  const audits = async (action: string, sessionId: string) =>
    (await t.opened.db.query<{ user_id: string; details: any }>(`select user_id, details from audit_log where action = $1 and session_id = $2 order by ts`, [action, sessionId])).rows;

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'max', roles: ['member'] },
      { handle: 'tom', roles: ['member'] },
      { handle: 'ned', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
    ]);
    beta = await seedTenant(t, 'beta', [{ handle: 'bea', roles: ['member'] }]);
    for (const h of ['mia', 'max', 'tom', 'ned']) tok[h] = await signToken(t, { sub: acme.ids[h], tid: acme.tenantId, roles: ['member'] });
    tok.vic = await signToken(t, { sub: acme.ids.vic, tid: acme.tenantId, roles: ['viewer'] });
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.bea = await signToken(t, { sub: beta.ids.bea, tid: beta.tenantId, roles: ['member'] });
    tok.betaOwner = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
    expect((await api(t, 'POST', '/v1/admin/providers', { token: tok.owner, body: { name: 'local', kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-local-secret-123', models: [{ id: 'm1' }] } })).status).toBe(201);
    expect((await api(t, 'POST', '/v1/admin/runtime/apply', { token: tok.owner, body: { defaultModel: 'local/m1' } })).status).toBe(200);
    platform = (await api(t, 'POST', '/v1/admin/teams', { token: tok.owner, body: { name: 'platform' } })).json.team.id;
    expect((await api(t, 'POST', `/v1/admin/teams/${platform}/members`, { token: tok.owner, body: { userId: acme.ids.tom } })).status).toBe(200);
    betaTeam = (await api(t, 'POST', '/v1/admin/teams', { token: tok.betaOwner, body: { name: 'platform' } })).json.team.id;
    sid = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'Fix the build' } })).json.sessionId;
  });
  afterAll(() => t?.close());

  it('shares with people and teams of the same tenant only, refusing others by field, and lists and replaces shares', async () => {
    const share = (token: string, body: unknown) => api(t, 'POST', `/v1/sessions/${sid}/shares`, { token, body });
    // Another tenant's person or team reads as unknown, naming the field (nothing about the other tenant leaks).
    for (const [body, field] of [
      [{ people: ['bea@beta.example'], mode: 'live' }, 'people/0'],
      [{ people: ['max', beta.ids.bea], mode: 'live' }, 'people/1'],
      [{ teams: [betaTeam], mode: 'live' }, 'teams/0'],
      [{ people: ['mia'], mode: 'live' }, 'people/0'],
      [{ people: ['max', 'MAX'], mode: 'live' }, 'people/1'],
      [{ mode: 'live' }, 'people'],
    ] as const) {
      const r = await share(tok.mia, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.details?.field, r.text).toBe(field);
      expect(r.json.message).toContain(`body/${field}`);
    }
    expect((await share(tok.mia, { people: ['max'], mode: 'sometimes' })).status).toBe(400);
    // Only the owner shares: anyone else (same tenant or not) meets 404.
    for (const token of [tok.max, tok.bea, tok.owner]) expect((await share(token, { people: ['ned'], mode: 'live' })).status).toBe(404);
    expect(await audits('session.share', sid)).toEqual([]);

    const made = await share(tok.mia, { people: ['max@acme.example'], teams: ['Platform'], mode: 'live' });
    expect(made.status, made.text).toBe(201);
    expect(made.json.shares).toEqual([
      { shareId: expect.any(String), mode: 'live', createdAt: expect.any(String), person: { userId: acme.ids.max, handle: 'max', email: 'max@acme.example', name: 'max' }, team: null },
      { shareId: expect.any(String), mode: 'live', createdAt: expect.any(String), person: null, team: { teamId: platform, name: 'platform' } },
    ]);
    // The team's share again, as of now: it replaces the live one.
    const again = await share(tok.mia, { teams: [platform], mode: 'as_of_now' });
    expect(again.status).toBe(201);
    const listed = await api(t, 'GET', `/v1/sessions/${sid}/shares`, { token: tok.mia });
    expect(listed.json.shares.map((s: any) => [s.person?.handle ?? s.team.name, s.mode])).toEqual([['max', 'live'], ['platform', 'as_of_now']]);
    for (const token of [tok.max, tok.tom, tok.bea]) expect((await api(t, 'GET', `/v1/sessions/${sid}/shares`, { token })).status).toBe(404);
    expect((await audits('session.share', sid)).map((a) => a.details.mode)).toEqual(['live', 'live', 'as_of_now']);

    // Who may be named: people of the tenant (never the caller, never another tenant's), teams of it.
    const targets = await api(t, 'GET', '/v1/share-targets?q=ma', { token: tok.mia });
    expect(targets.json.people.map((p: any) => p.handle)).toEqual(['max']);
    expect((await api(t, 'GET', '/v1/share-targets?q=be', { token: tok.mia })).json.people).toEqual([]);
    expect((await api(t, 'GET', '/v1/share-targets?q=plat', { token: tok.mia })).json.teams).toEqual([{ teamId: platform, name: 'platform', members: 1 }]);
  });

  it('lets viewers read the transcript, the changes and (live) the stream, audited; everything else is 404, and outsiders see nothing', async () => {
    const shared = await api(t, 'GET', '/v1/sessions/shared-with-me', { token: tok.max });
    expect(shared.json.sessions).toEqual([
      { sessionId: sid, title: 'Fix the build', updatedAt: expect.any(String), owner: { userId: acme.ids.mia, handle: 'mia', email: 'mia@acme.example', name: 'mia' }, shareId: expect.any(String), mode: 'live', sharedAt: expect.any(String), team: null },
    ]);
    expect((await api(t, 'GET', '/v1/sessions/shared-with-me', { token: tok.tom })).json.sessions.map((s: any) => [s.sessionId, s.mode, s.team])).toEqual([[sid, 'as_of_now', 'platform']]);
    for (const token of [tok.ned, tok.bea, tok.mia]) expect((await api(t, 'GET', '/v1/sessions/shared-with-me', { token })).json.sessions).toEqual([]);
    // Not in the viewer's own list of sessions.
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.max })).json.sessions).toEqual([]);

    expect((await api(t, 'GET', `/v1/sessions/${sid}/access`, { token: tok.max })).json).toMatchObject({ role: 'viewer', mode: 'live', asOf: null, owner: { handle: 'mia' } });
    expect((await api(t, 'GET', `/v1/sessions/${sid}/access`, { token: tok.tom })).json).toMatchObject({ role: 'viewer', mode: 'as_of_now', asOf: expect.any(String) });
    expect((await api(t, 'GET', `/v1/sessions/${sid}/access`, { token: tok.mia })).json).toMatchObject({ role: 'owner', mode: null });

    for (const token of [tok.max, tok.tom]) {
      const m = await api(t, 'GET', `/v1/sessions/${sid}/messages`, { token });
      expect(m.status, m.text).toBe(200);
      expect(m.json.messages).toEqual([]);
      expect((await api(t, 'GET', `/v1/sessions/${sid}/changes`, { token })).status).toBe(200);
    }
    // The live viewer follows the stream; the as-of-now one has none (403: they already see the session).
    const live = await openSse(`${t.url}/v1/sessions/${sid}/events`, { authorization: `Bearer ${tok.max}` });
    expect(live.status).toBe(200);
    await live.close();
    const notLive = await openSse(`${t.url}/v1/sessions/${sid}/events`, { authorization: `Bearer ${tok.tom}` });
    expect([notLive.status, JSON.parse(notLive.body!).error]).toEqual([403, 'share_not_live']);

    // Each view of another person's session is audited; the owner's own reads are not views.
    await api(t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.mia });
    const views = await audits('session.view', sid);
    expect(views.map((v) => [v.user_id, v.details.what, v.details.mode])).toEqual([
      [acme.ids.max, 'transcript', 'live'],
      [acme.ids.tom, 'transcript', 'as_of_now'],
      [acme.ids.max, 'stream', 'live'],
    ]);

    // What stays the owner's answers a viewer 404, as it does a stranger, another tenant, or a viewer-role person.
    const owned: Array<[string, string, unknown?]> = [
      ['POST', `/v1/sessions/${sid}/prompt`, { text: 'hi', agent: 'build' }],
      ['POST', `/v1/sessions/${sid}/stop`],
      ['DELETE', `/v1/sessions/${sid}/turns/00000000-0000-4000-8000-000000000000`],
      ['GET', `/v1/sessions/${sid}/permissions`],
      ['POST', `/v1/sessions/${sid}/permissions/per_123`, { response: 'once' }],
      ['POST', `/v1/sessions/${sid}/revert`, { messageId: 'msg_abc' }],
      ['POST', `/v1/sessions/${sid}/unrevert`],
      ['POST', `/v1/sessions/${sid}/claim`],
      ['DELETE', `/v1/sessions/${sid}`],
      ['GET', `/v1/sessions/${sid}/shares`],
      ['POST', `/v1/sessions/${sid}/shares`, { people: ['ned'], mode: 'live' }],
      ['POST', `/v1/sessions/${sid}/handover`, { to: 'ned' }],
    ];
    for (const token of [tok.max, tok.tom, tok.ned, tok.bea]) {
      for (const [method, path, body] of owned) {
        const r = await api(t, method, path, { token, body });
        expect(r.status, `${method} ${path}`).toBe(404);
      }
    }
    for (const token of [tok.ned, tok.bea]) {
      for (const path of ['messages', 'changes', 'access']) expect((await api(t, 'GET', `/v1/sessions/${sid}/${path}`, { token })).status, path).toBe(404);
      expect((await openSse(`${t.url}/v1/sessions/${sid}/events`, { authorization: `Bearer ${token}` })).status).toBe(404);
    }
    // The workspace routes are each person's own: a viewer's reach the viewer's workspace, never the owner's.
    const miaDir = (await t.opened.db.query(`select directory from agent_sessions where id = $1`, [sid])).rows[0].directory as string;
    writeFileSync(join(miaDir, 'secret.txt'), 'the owner only\n');
    expect((await api(t, 'GET', '/v1/workspace/file?path=secret.txt', { token: tok.max })).status).toBe(404);
    const archive = await api(t, 'GET', '/v1/workspace/archive', { token: tok.max });
    expect(archive.text).not.toContain('the owner only');
    expect((await api(t, 'GET', '/v1/workspace/files', { token: tok.max })).json.entries ?? []).not.toContainEqual(expect.objectContaining({ name: 'secret.txt' }));
    expect(await audits('agent.prompt', sid)).toEqual([]);
  });

  it('revokes a share: the viewer loses the session at once; an unknown or revoked share is 404', async () => {
    const shares = (await api(t, 'GET', `/v1/sessions/${sid}/shares`, { token: tok.mia })).json.shares;
    const maxShare = shares.find((s: any) => s.person?.handle === 'max').shareId;
    expect((await api(t, 'DELETE', `/v1/sessions/${sid}/shares/${maxShare}`, { token: tok.max })).status).toBe(404);
    expect((await api(t, 'DELETE', `/v1/sessions/${sid}/shares/${maxShare}`, { token: tok.mia })).status).toBe(204);
    expect((await api(t, 'DELETE', `/v1/sessions/${sid}/shares/${maxShare}`, { token: tok.mia })).status).toBe(404);
    for (const path of ['messages', 'changes', 'access']) expect((await api(t, 'GET', `/v1/sessions/${sid}/${path}`, { token: tok.max })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/sessions/shared-with-me', { token: tok.max })).json.sessions).toEqual([]);
    expect((await audits('session.share_revoke', sid)).map((a) => [a.user_id, a.details.shareId])).toEqual([[acme.ids.mia, maxShare]]);
    // The team's share is untouched.
    expect((await api(t, 'GET', `/v1/sessions/${sid}/messages`, { token: tok.tom })).status).toBe(200);
  });

  it('hands a session over to a teammate: ownership, workspace copy (confined, never over their files), the earlier conversation for their first turn, audited', async () => {
    const s2 = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'Port the parser!' } })).json.sessionId as string;
    const hand = (token: string, body: unknown, id = s2) => api(t, 'POST', `/v1/sessions/${id}/handover`, { token, body });
    for (const [body, field] of [
      [{ to: 'bea@beta.example' }, 'to'],
      [{ to: beta.ids.bea }, 'to'],
      [{ to: 'mia' }, 'to'],
      [{ to: 'vic' }, 'to'],
      [{ to: 'max', folder: '../etc' }, 'folder'],
    ] as const) {
      const r = await hand(tok.mia, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.details?.field, r.text).toBe(field);
    }
    for (const token of [tok.max, tok.bea]) expect((await hand(token, { to: 'max' })).status).toBe(404);
    // A turn waiting: refused until it has ended (here: withdrawn).
    const queued = await api(t, 'POST', `/v1/sessions/${s2}/prompt`, { token: tok.mia, body: { text: 'first', agent: 'build' } });
    expect(queued.status).toBe(202);
    expect((await hand(tok.mia, { to: 'max' })).json.error).toBe('turn_running');
    expect((await api(t, 'DELETE', `/v1/sessions/${s2}/turns/${queued.json.turnId}`, { token: tok.mia })).status).toBe(200);

    // The owner's workspace as the agent left it: files, a link out of it, a .git directory.
    const { rows } = await t.opened.db.query(`select directory from agent_sessions where id = $1`, [s2]);
    const miaDir = rows[0].directory as string;
    mkdirSync(join(miaDir, 'src'), { recursive: true });
    writeFileSync(join(miaDir, 'src', 'parser.ts'), 'export const parse = 1;\n');
    writeFileSync(join(miaDir, 'README.md'), '# parser\n');
    symlinkSync('/etc/passwd', join(miaDir, 'passwd-link'));
    mkdirSync(join(miaDir, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(miaDir, '.git', 'hooks', 'post-checkout'), '#!/bin/sh\necho pwned\n');
    // The teammate already has a folder of that name: theirs stays as it is, the copy goes beside it.
    const maxDir = miaDir.replace(acme.ids.mia, acme.ids.max);
    expect(maxDir).not.toBe(miaDir);
    const taken = join(maxDir, 'handed-over', `port-the-parser-${s2.slice(0, 8)}`);
    mkdirSync(taken, { recursive: true });
    writeFileSync(join(taken, 'README.md'), 'mine, not yours\n');

    const r = await hand(tok.mia, { to: 'max@acme.example' });
    expect(r.status, r.text).toBe(200);
    const folder = `handed-over/port-the-parser-${s2.slice(0, 8)}-2`;
    expect(r.json).toEqual({
      sessionId: s2,
      owner: { userId: acme.ids.max, handle: 'max', email: 'max@acme.example', name: 'max' },
      transcript: { messages: 0 },
      workspace: { folder, files: 3, bytes: expect.any(Number), skipped: { links: 1, git: expect.any(Number), overLimit: 0, other: 0 } },
      keptAccess: true,
    });
    expect(readFileSync(join(maxDir, folder, 'src', 'parser.ts'), 'utf8')).toBe('export const parse = 1;\n');
    expect(readFileSync(join(maxDir, folder, 'README.md'), 'utf8')).toBe('# parser\n');
    expect(readFileSync(join(taken, 'README.md'), 'utf8')).toBe('mine, not yours\n');
    expect(existsSync(join(maxDir, folder, 'passwd-link')) || existsSync(join(maxDir, folder, '.git'))).toBe(false);
    expect(lstatSync(join(maxDir, folder, 'secret.txt')).isFile()).toBe(true);

    // The teammate owns it now; the previous owner keeps a live read-only share.
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.max })).json.sessions.map((s: any) => s.sessionId)).toEqual([s2]);
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.mia })).json.sessions.map((s: any) => s.sessionId)).not.toContain(s2);
    expect((await api(t, 'GET', `/v1/sessions/${s2}/access`, { token: tok.mia })).json).toMatchObject({ role: 'viewer', mode: 'live', owner: { handle: 'max' } });
    expect((await api(t, 'POST', `/v1/sessions/${s2}/prompt`, { token: tok.mia, body: { text: 'mine again?', agent: 'build' } })).status).toBe(404);
    expect((await hand(tok.mia, { to: 'tom' })).status).toBe(404);

    // The teammate's first turn carries the earlier conversation (and where the files are) to their agent; the next does not.
    const p1 = await api(t, 'POST', `/v1/sessions/${s2}/prompt`, { token: tok.max, body: { text: 'carry on', agent: 'build' } });
    expect(p1.status, p1.text).toBe(202);
    const p2 = await api(t, 'POST', `/v1/sessions/${s2}/prompt`, { token: tok.max, body: { text: 'and then', agent: 'build' } });
    const turns = (await t.opened.db.query<{ id: string; user_id: string; parts: any[] }>(`select id, user_id, parts from agent_turns where session_id = $1 and status <> 'failed' order by created_at`, [s2])).rows;
    expect(turns.map((x) => [x.id, x.user_id])).toEqual([[p1.json.turnId, acme.ids.max], [p2.json.turnId, acme.ids.max]]);
    expect(turns[0].parts[0]).toMatchObject({ type: 'text', synthetic: true });
    expect(turns[0].parts[0].text).toContain('<earlier-conversation>');
    expect(turns[0].parts[0].text).toContain(`copied into the folder ${folder}/`);
    expect(turns[0].parts[0].text).toContain('handed over by mia <mia@acme.example> to max <max@acme.example>');
    expect(turns[0].parts.at(-1)).toMatchObject({ type: 'text', text: 'carry on' });
    expect(turns[1].parts.some((p) => p.synthetic)).toBe(false);

    const [audit] = await audits('session.handover', s2);
    expect(audit).toMatchObject({ user_id: acme.ids.mia, details: { from: acme.ids.mia, to: acme.ids.max, folder, files: 3, keptAccess: true } });
    // Hand-over without keeping access: the previous owner loses it.
    for (const x of [p1, p2]) await api(t, 'DELETE', `/v1/sessions/${s2}/turns/${x.json.turnId}`, { token: tok.max });
    const back = await hand(tok.max, { to: 'tom', keepAccess: false });
    expect(back.status, back.text).toBe(200);
    for (const token of [tok.mia, tok.max]) expect((await api(t, 'GET', `/v1/sessions/${s2}/messages`, { token })).status).toBe(404);
    expect((await api(t, 'GET', `/v1/sessions/${s2}/access`, { token: tok.tom })).json.role).toBe('owner');
  });
});
