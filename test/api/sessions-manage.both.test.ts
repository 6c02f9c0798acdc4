import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INDEX_SESSIONS_JOB } from '../../src/core/sessions/session-manage.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { indexRows } from '../../src/core/sessions/session-manage-fns.js';
import { createSessionManageRepo } from '../../src/core/sessions/session-manage.repo.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Managing, searching and exporting sessions on both databases, without a
 * runtime: sessions are made through the API, their search index written through the repo as a turn's
 * end writes it (the turn itself: sessions-turn.runtime.test.ts). Each route refuses another person of the
 * tenant and another tenant with 404, and a search never returns anything of theirs.
 */
describe(`sessions: manage, search, export (${DB_MODE})`, () => {
  let t: TestApp;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  const repo = createSessionManageRepo();
  const create = async (token: string, title: string, template?: string) => {
    const r = await api(t, 'POST', '/v1/sessions', { token, body: { title, ...(template ? { template_slug: template } : {}) } });
    expect(r.status, r.text).toBe(201);
    return r.json.sessionId as string;
  };
  const list = async (token: string, query = '') => {
    const r = await api(t, 'GET', `/v1/sessions${query}`, { token });
    expect(r.status, r.text).toBe(200);
    return r.json as { sessions: Array<Record<string, any>>; nextCursor: string | null };
  };
  /** Indexes messages as a turn's end does: the transcript's text parts through indexRows, then the repo. */
  const index = (tenantId: string, sessionId: string, messages: Array<{ messageId: string; role: 'user' | 'assistant'; body: string }>) => {
    const rows = indexRows(messages.map((m) => ({ info: { id: m.messageId, role: m.role, time: { created: 1, completed: 2 } }, parts: [{ type: 'text', text: m.body }] })));
    return repo.index(t.opened.db, tenantId, sessionId, rows, rows.map((r) => r.messageId), rows.at(-1)?.messageId ?? null);
  };

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'max', roles: ['member'] },
    ]);
    beta = await seedTenant(t, 'beta', [{ handle: 'bea', roles: ['owner'] }]);
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.mia = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.max = await signToken(t, { sub: acme.ids.max, tid: acme.tenantId, roles: ['member'] });
    tok.bea = await signToken(t, { sub: beta.ids.bea, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(() => t?.close());

  it('renames, pins and archives; the list sorts pinned first, hides archived ones, filters and restores', async () => {
    const a = await create(tok.mia, 'alpha');
    const b = await create(tok.mia, 'bravo');
    const c = await create(tok.mia, 'charlie');
    const before = await list(tok.mia);
    expect(before.sessions.map((s) => s.title)).toEqual(['charlie', 'bravo', 'alpha']);
    expect(before.sessions[0]).toMatchObject({ sessionId: c, title: 'charlie', updatedAt: expect.any(String), pinned: false, archived: false, templateSlug: null });
    expect(before.nextCursor).toBeNull();

    const renamed = await api(t, 'PATCH', `/v1/sessions/${a}`, { token: tok.mia, body: { title: '  Deploy the runner fleet ' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.json).toMatchObject({ sessionId: a, title: 'Deploy the runner fleet', pinned: false, archived: false });
    // A rename is not activity: the order stays by last activity.
    expect((await list(tok.mia)).sessions.map((s) => s.sessionId)).toEqual([c, b, a]);

    expect((await api(t, 'PATCH', `/v1/sessions/${a}`, { token: tok.mia, body: { pinned: true } })).json).toMatchObject({ pinned: true, pinnedAt: expect.any(String) });
    expect((await list(tok.mia)).sessions.map((s) => s.sessionId)).toEqual([a, c, b]);
    expect((await list(tok.mia, '?pinned=true')).sessions.map((s) => s.sessionId)).toEqual([a]);

    expect((await api(t, 'PATCH', `/v1/sessions/${c}`, { token: tok.mia, body: { archived: true } })).json).toMatchObject({ archived: true, archivedAt: expect.any(String) });
    expect((await list(tok.mia)).sessions.map((s) => s.sessionId)).toEqual([a, b]);
    expect((await list(tok.mia, '?state=archived')).sessions).toEqual([expect.objectContaining({ sessionId: c, archived: true })]);
    expect((await list(tok.mia, '?state=all')).sessions.map((s) => s.sessionId)).toEqual([a, c, b]);
    // Archived, it is kept: it still opens.
    expect((await api(t, 'GET', `/v1/sessions/${c}/messages`, { token: tok.mia })).status).toBe(200);
    expect((await api(t, 'PATCH', `/v1/sessions/${c}`, { token: tok.mia, body: { archived: false } })).json).toMatchObject({ archived: false, archivedAt: null });
    expect((await list(tok.mia)).sessions.map((s) => s.sessionId)).toEqual([a, c, b]);

    // Each change is audited in its own entry.
    const { rows } = await t.opened.db.query(`select details from audit_log where action = 'session.update' and session_id = $1 order by ts`, [a]);
    expect(rows.map((r: any) => r.details)).toEqual([
      { title: { from: 'alpha', to: 'Deploy the runner fleet' }, requestId: expect.any(String) },
      { pinned: true, requestId: expect.any(String) },
    ]);

    // Bad input names its field; nothing changes.
    for (const [body, field] of [[{}, 'body'], [{ title: '   ' }, 'title'], [{ pinned: 'yes' }, 'pinned'], [{ colour: 'red' }, 'additional properties']] as const) {
      const r = await api(t, 'PATCH', `/v1/sessions/${b}`, { token: tok.mia, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.text).toContain(field);
    }
    const badState = await api(t, 'GET', '/v1/sessions?state=gone', { token: tok.mia });
    expect(badState.status).toBe(400);
    expect(badState.text).toContain('state');
    const badCursor = await api(t, 'GET', '/v1/sessions?cursor=nope', { token: tok.mia });
    expect(badCursor.status).toBe(400);
    expect(badCursor.json.message).toMatch(/^cursor:/);
  });

  it('filters by template and pages through thousands with a cursor, in order, none twice, none missed', async () => {
    const t1 = await api(t, 'POST', '/v1/admin/templates', { token: tok.owner, body: { slug: 'reviewer', name: 'Reviewer', systemPrompt: 'Review code.' } });
    expect(t1.status, t1.text).toBe(201);
    const fromTemplate = await create(tok.owner, 'a review', 'reviewer');
    // 1,203 sessions of the owner, made set-based, several sharing one moment (the key breaks ties by id).
    await t.opened.db.query(
      `insert into agent_sessions (tenant_id, owner_id, title, directory, updated_at)
       select $1, $2, 'bulk ' || g, '/tmp/x', now() - ((g / 3) || ' seconds')::interval from generate_series(1, 1203) g`,
      [acme.tenantId, acme.ids.owner],
    );
    const byTemplate = await list(tok.owner, '?template=reviewer');
    expect(byTemplate.sessions.map((s) => s.sessionId)).toEqual([fromTemplate]);
    expect(byTemplate.sessions[0].templateSlug).toBe('reviewer');

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { sessions: Array<Record<string, any>>; nextCursor: string | null } = await list(tok.owner, `?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.sessions.length).toBeLessThanOrEqual(500);
      seen.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen.length).toBe(1204);
    expect(new Set(seen).size).toBe(1204);
    const { rows } = await t.opened.db.query(
      `select id from agent_sessions where tenant_id = $1 and owner_id = $2 and deleted_at is null order by updated_at desc, id desc`,
      [acme.tenantId, acme.ids.owner],
    );
    expect(seen).toEqual(rows.map((r: any) => r.id));
    // Default page size 100; more than 500 is refused naming limit.
    expect((await list(tok.owner)).sessions.length).toBe(100);
    const tooMany = await api(t, 'GET', '/v1/sessions?limit=501', { token: tok.owner });
    expect(tooMany.status).toBe(400);
    expect(tooMany.text).toContain('limit');
  });

  it('searches titles, prompts and answers of the caller\'s own sessions, ranked, with a snippet and its message', async () => {
    const fleet = await create(tok.mia, 'Kubernetes upgrade notes');
    const other = await create(tok.mia, 'Lunch plans');
    await index(acme.tenantId, fleet, [
      { messageId: 'msg_0001', role: 'user', body: 'How do I roll the kubelet upgrade across the nodes without downtime?' },
      { messageId: 'msg_0002', role: 'assistant', body: 'Drain each node first. Then <b>upgrade</b> the kubelet \u0002 package and uncordon the node again.' },
    ]);
    await index(acme.tenantId, other, [{ messageId: 'msg_0003', role: 'user', body: 'Where should we go for lunch? Somewhere near the node office.' }]);

    const r = await api(t, 'GET', `/v1/sessions/search?q=${encodeURIComponent('drained nodes')}`, { token: tok.mia });
    expect(r.status, r.text).toBe(200);
    expect(r.json.results).toHaveLength(1);
    const hit = r.json.results[0];
    expect(hit).toMatchObject({ sessionId: fleet, title: 'Kubernetes upgrade notes', messageId: 'msg_0002', role: 'assistant', archived: false, pinned: false });
    // Plain text (the agent's markup and fake highlight marks do not come through) and the matched words' ranges in it.
    expect(hit.snippet).toContain('Drain each node first');
    expect(hit.snippet).not.toMatch(/[<>\u0002\u0003]/);
    expect(hit.highlights.map(([a, b]: [number, number]) => hit.snippet.slice(a, b))).toEqual(expect.arrayContaining(['Drain', 'node']));

    // One result per session, best first: a title match ranks the session above a single mention.
    const node = await api(t, 'GET', '/v1/sessions/search?q=node', { token: tok.mia });
    expect(node.json.results.map((x: any) => x.sessionId)).toEqual([fleet, other]);
    const title = await api(t, 'GET', '/v1/sessions/search?q=kubernetes', { token: tok.mia });
    expect(title.json.results).toEqual([expect.objectContaining({ sessionId: fleet, messageId: null, role: 'title', snippet: 'Kubernetes upgrade notes', highlights: [[0, 10]] })]);
    // A rename is found at once; a phrase and an exclusion work.
    await api(t, 'PATCH', `/v1/sessions/${other}`, { token: tok.mia, body: { title: 'Team offsite' } });
    expect((await api(t, 'GET', '/v1/sessions/search?q=offsite', { token: tok.mia })).json.results.map((x: any) => x.sessionId)).toEqual([other]);
    expect((await api(t, 'GET', `/v1/sessions/search?q=${encodeURIComponent('"uncordon the node" -lunch')}`, { token: tok.mia })).json.results.map((x: any) => x.sessionId)).toEqual([fleet]);
    // Archived sessions are found, and say so.
    await api(t, 'PATCH', `/v1/sessions/${other}`, { token: tok.mia, body: { archived: true } });
    expect((await api(t, 'GET', '/v1/sessions/search?q=lunch', { token: tok.mia })).json.results).toEqual([expect.objectContaining({ sessionId: other, archived: true })]);

    // Another person of the tenant and another tenant find nothing of hers, whatever they ask.
    for (const token of [tok.max, tok.owner, tok.bea]) {
      for (const q of ['kubelet', 'kubernetes', 'lunch', 'node']) {
        const x = await api(t, 'GET', `/v1/sessions/search?q=${q}`, { token });
        expect(x.status).toBe(200);
        expect(x.json.results.filter((h: any) => h.sessionId === fleet || h.sessionId === other)).toEqual([]);
      }
    }
    // Their own text is theirs: max's session with the same words is found by max only.
    const maxs = await create(tok.max, 'kubelet at max');
    await index(acme.tenantId, maxs, [{ messageId: 'msg_0004', role: 'user', body: 'kubelet kubelet' }]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=kubelet', { token: tok.max })).json.results.map((x: any) => x.sessionId)).toEqual([maxs]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=kubelet', { token: tok.mia })).json.results.map((x: any) => x.sessionId)).toEqual([fleet]);

    // A session that changes hands (a claim, a hand-over) is searched by its new owner only: the previous
    // owner finds nothing of it at once; the new one once its next turn has been indexed.
    const moving = await create(tok.mia, 'handed over');
    await index(acme.tenantId, moving, [{ messageId: 'msg_0005', role: 'user', body: 'zeppelin maintenance schedule' }]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=zeppelin', { token: tok.mia })).json.results.map((x: any) => x.sessionId)).toEqual([moving]);
    await t.opened.db.query(`update agent_sessions set owner_id = $2 where id = $1`, [moving, acme.ids.max]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=zeppelin', { token: tok.mia })).json.results).toEqual([]);
    await index(acme.tenantId, moving, [
      { messageId: 'msg_0005', role: 'user', body: 'zeppelin maintenance schedule' },
      { messageId: 'msg_0006', role: 'assistant', body: 'The zeppelin hangar opens at nine.' },
    ]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=zeppelin', { token: tok.max })).json.results.map((x: any) => x.sessionId)).toEqual([moving]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=schedule', { token: tok.max })).json.results.map((x: any) => x.messageId)).toEqual(['msg_0005']);
    expect((await api(t, 'GET', '/v1/sessions/search?q=zeppelin', { token: tok.mia })).json.results).toEqual([]);

    // A deleted session leaves the index in its deletion's transaction.
    expect((await api(t, 'DELETE', `/v1/sessions/${fleet}`, { token: tok.mia })).status).toBe(204);
    expect((await api(t, 'GET', '/v1/sessions/search?q=kubelet', { token: tok.mia })).json.results).toEqual([]);
    const { rows } = await t.opened.db.query(`select count(*)::int as n from session_search_entries where session_id = $1`, [fleet]);
    expect(rows[0].n).toBe(0);

    // Empty, too long, or a stop word only.
    expect((await api(t, 'GET', '/v1/sessions/search?q=', { token: tok.mia })).status).toBe(400);
    expect((await api(t, 'GET', `/v1/sessions/search?q=${'x'.repeat(201)}`, { token: tok.mia })).status).toBe(400);
    const stop = await api(t, 'GET', '/v1/sessions/search?q=the', { token: tok.mia });
    expect(stop.status).toBe(200);
    expect(stop.json.results).toEqual([]);
    expect((await api(t, 'GET', '/v1/sessions/search?q=x')).status).toBe(401);
  });

  it('exports a session as Markdown and as JSON, with a file name to save it under', async () => {
    const s = await create(tok.mia, 'Release: v2 / notes');
    const md = await api(t, 'GET', `/v1/sessions/${s}/export`, { token: tok.mia });
    expect(md.status, md.text).toBe(200);
    expect(md.headers.get('content-type')).toMatch(/^text\/markdown/);
    expect(md.headers.get('content-disposition')).toMatch(/^attachment; filename="release-v2-notes-\d{4}-\d\d-\d\d\.md"$/);
    expect(md.text).toMatch(/^# Release: v2 \/ notes\n/);
    expect(md.text).toContain('_No messages yet._');
    const json = await api(t, 'GET', `/v1/sessions/${s}/export?format=json`, { token: tok.mia });
    expect(json.status).toBe(200);
    expect(json.headers.get('content-disposition')).toMatch(/\.json"$/);
    expect(json.json).toMatchObject({ format: 'agentws.session-export', version: 1, session: { sessionId: s, title: 'Release: v2 / notes' }, messages: [], changes: { files: [] } });
    expect((await api(t, 'GET', `/v1/sessions/${s}/export?format=pdf`, { token: tok.mia })).status).toBe(400);
    const { rows } = await t.opened.db.query(`select details from audit_log where action = 'session.export' and session_id = $1 order by ts`, [s]);
    expect(rows.map((r: any) => r.details.format)).toEqual(['markdown', 'json']);
  });

  it('answers 404 to another person of the tenant, another tenant and an unknown id on every route, and changes nothing', async () => {
    const s = await create(tok.mia, 'private');
    const routes: Array<[string, string, unknown?]> = [
      ['PATCH', `/v1/sessions/${s}`, { title: 'taken' }],
      ['PATCH', `/v1/sessions/${s}`, { pinned: true }],
      ['PATCH', `/v1/sessions/${s}`, { archived: true }],
      ['GET', `/v1/sessions/${s}/export`],
      ['GET', `/v1/sessions/${s}/export?format=json`],
    ];
    for (const token of [tok.max, tok.owner, tok.bea]) {
      for (const [method, path, body] of routes) {
        const r = await api(t, method, path, { token, body });
        expect(r.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(404);
        expect(r.json.error).toBe('not_found');
      }
      expect((await list(token, '?state=all')).sessions.map((x) => x.sessionId)).not.toContain(s);
    }
    for (const [method, path, body] of routes) {
      expect((await api(t, method, path.replace(s, '00000000-0000-4000-8000-000000000000'), { token: tok.mia, body })).status).toBe(404);
    }
    expect((await list(tok.mia, '?state=all')).sessions.find((x) => x.sessionId === s)).toMatchObject({ title: 'private', pinned: false, archived: false });
    // A deleted session is gone from every route too.
    expect((await api(t, 'DELETE', `/v1/sessions/${s}`, { token: tok.mia })).status).toBe(204);
    expect((await api(t, 'PATCH', `/v1/sessions/${s}`, { token: tok.mia, body: { pinned: true } })).status).toBe(404);
    expect((await api(t, 'GET', `/v1/sessions/${s}/export`, { token: tok.mia })).status).toBe(404);
  });

  it('the index-sessions job is started through the jobs API and reports its progress', async () => {
    const job = await api(t, 'POST', '/v1/jobs', { token: tok.owner, body: { kind: 'index-sessions' } });
    expect(job.status, job.text).toBe(202);
    // Run as the worker runs it (this app runs none). Nothing of this tenant has a transcript here (no
    // runtime ran): it completes with nothing to do.
    await t.opened.core.jobHandlers[INDEX_SESSIONS_JOB](systemCtx(silentLogger), { tenantId: acme.tenantId, jobId: job.json.job.id }, { id: 'x', retryCount: 0 } as any);
    await expect
      .poll(async () => (await api(t, 'GET', `/v1/jobs/${job.json.job.id}`, { token: tok.owner })).json.job, { timeout: 20_000, interval: 100 })
      .toMatchObject({ status: 'completed', result: { total: 0, indexed: 0, failed: 0, remaining: 0 } });
    const bad = await api(t, 'POST', '/v1/jobs', { token: tok.owner, body: { kind: 'index-sessions', payload: { limit: 5 } } });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toContain('payload.limit');
    // Starting jobs is an admin's; a member is refused.
    expect((await api(t, 'POST', '/v1/jobs', { token: tok.mia, body: { kind: 'index-sessions' } })).status).toBe(403);
  });
});
