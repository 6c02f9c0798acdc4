import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Ownership, tenant isolation, roles, templates and prompt forms of the session routes. No runtime runs
 * here: the runtime configuration is applied while the managed runtime is down (recorded, pushed when
 * it starts), which is enough for prompts to be accepted and queued.
 */
describe(`sessions: access, templates and prompt forms (${DB_MODE})`, () => {
  let t: TestApp;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let mine: string;

  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_PROMPT_MAX_FILES: '2', AGENTWS_PROMPT_MAX_FILE_MB: '1' } });
    acme = await seedTenant(t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'max', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
    ]);
    const beta = await seedTenant(t, 'beta', [{ handle: 'bea', roles: ['owner'] }]);
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.mia = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.max = await signToken(t, { sub: acme.ids.max, tid: acme.tenantId, roles: ['member'] });
    tok.vic = await signToken(t, { sub: acme.ids.vic, tid: acme.tenantId, roles: ['viewer'] });
    tok.bea = await signToken(t, { sub: beta.ids.bea, tid: beta.tenantId, roles: ['owner'] });
    const add = await api(t, 'POST', '/v1/admin/providers', {
      token: tok.owner,
      body: { name: 'local', kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'sk-local-secret-123', models: [{ id: 'm1' }, { id: 'm2' }] },
    });
    expect(add.status).toBe(201);
    const applied = await api(t, 'POST', '/v1/admin/runtime/apply', { token: tok.owner, body: { defaultModel: 'local/m1' } });
    // No user's runtime runs yet: nothing to write now (each is configured when it starts).
    expect(applied.json).toMatchObject({ applied: { defaultModel: 'local/m1', providers: ['local'] }, pushed: true });
    mine = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'mine' } })).json.sessionId;
  });
  afterAll(() => t?.close());

  it('answers 404 on every session route for another user, another tenant, or an unknown id', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', `/v1/sessions/${mine}/messages`],
      ['POST', `/v1/sessions/${mine}/prompt`, { text: 'hi', agent: 'build' }],
      ['GET', `/v1/sessions/${mine}/events`],
      ['POST', `/v1/sessions/${mine}/permissions/per_123`, { response: 'once' }],
      ['DELETE', `/v1/sessions/${mine}`],
      ['POST', `/v1/sessions/${mine}/claim`],
    ];
    for (const token of [tok.max, tok.bea]) {
      for (const [method, path, body] of routes) {
        const r = await api(t, method, path, { token, body });
        expect(r.status, `${method} ${path}`).toBe(404);
        expect(r.json.error).toBe('not_found');
      }
    }
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const [method, path, body] of routes) {
      const r = await api(t, method, path.replace(mine, unknown), { token: tok.mia, body });
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.max })).json.sessions).toEqual([]);
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.bea })).json.sessions).toEqual([]);
    expect((await api(t, 'GET', '/v1/sessions')).status).toBe(401);
  });

  it('lists the caller\'s sessions, newest activity first, and accepts a JSON prompt from the owner', async () => {
    const other = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'other' } })).json.sessionId;
    const prompt = await api(t, 'POST', `/v1/sessions/${mine}/prompt`, { token: tok.mia, body: { text: 'hello', agent: 'build' } });
    expect(prompt.status).toBe(202);
    expect(prompt.json).toEqual({ jobId: expect.any(String), sessionId: mine, turnId: expect.any(String), messageId: expect.any(String) });
    const list = await api(t, 'GET', '/v1/sessions', { token: tok.mia });
    expect(list.json.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([mine, other]);
    expect(list.json.sessions[0]).toEqual({ sessionId: mine, title: 'mine', updatedAt: expect.any(String), createdAt: expect.any(String), templateSlug: null, pinned: false, archived: false, pinnedAt: null, archivedAt: null, origin: null });
    // The turn, its job and its audit entry were written together.
    const { rows } = await t.opened.db.query(`select t.status, j.state from agent_turns t join pgboss.job j on j.data->>'turnId' = t.id::text where t.session_id = $1`, [mine]);
    expect(rows).toEqual([{ status: 'queued', state: 'created' }]);
  });

  it('lets viewers list but not create sessions or prompt', async () => {
    const created = await api(t, 'POST', '/v1/sessions', { token: tok.vic, body: { title: 'nope' } });
    expect(created.status).toBe(403);
    expect(created.json.details).toEqual({ permission: 'agents.create' });
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.vic })).status).toBe(200);
  });

  it('accepts multipart prompts with files (files and files[]), and answers 413 beyond the limits', async () => {
    const form = new FormData();
    form.append('text', 'see attached');
    form.append('agent', 'plan');
    form.append('agentProfileId', 'profile-7');
    form.append('files', new Blob(['a,b\n1,2\n'], { type: 'text/csv' }), 'data.csv');
    form.append('files[]', new Blob(['hello'], { type: 'text/plain' }), 'note.txt');
    const ok = await fetch(`${t.url}/v1/sessions/${mine}/prompt`, { method: 'POST', headers: { authorization: `Bearer ${tok.mia}` }, body: form });
    expect(ok.status).toBe(202);
    const { rows } = await t.opened.db.query(`select agent, agent_profile_id as "profile", parts from agent_turns where session_id = $1 order by created_at desc limit 1`, [mine]);
    expect(rows[0].agent).toBe('plan');
    expect(rows[0].profile).toBe('profile-7');
    expect(rows[0].parts.map((p: any) => [p.type, p.filename ?? p.text, p.mime])).toEqual([
      ['text', 'see attached', undefined],
      ['file', 'data.csv', 'text/csv'],
      ['file', 'note.txt', 'text/plain'],
    ]);
    expect(rows[0].parts[1].url).toBe(`data:text/csv;base64,${Buffer.from('a,b\n1,2\n').toString('base64')}`);

    const tooMany = new FormData();
    tooMany.append('text', 'three files');
    for (const n of ['a', 'b', 'c']) tooMany.append('files', new Blob(['x'], { type: 'text/plain' }), `${n}.txt`);
    const r1 = await fetch(`${t.url}/v1/sessions/${mine}/prompt`, { method: 'POST', headers: { authorization: `Bearer ${tok.mia}` }, body: tooMany });
    expect(r1.status).toBe(413);
    expect(((await r1.json()) as { error: string }).error).toBe('payload_too_large');

    const tooBig = new FormData();
    tooBig.append('files', new Blob([Buffer.alloc(1024 * 1024 + 1, 65)], { type: 'text/plain' }), 'big.txt');
    const r2 = await fetch(`${t.url}/v1/sessions/${mine}/prompt`, { method: 'POST', headers: { authorization: `Bearer ${tok.mia}` }, body: tooBig });
    expect(r2.status).toBe(413);
  });

  it('accepts the parts form and refuses file parts that point anywhere but inline data', async () => {
    const ok = await api(t, 'POST', `/v1/sessions/${mine}/prompt`, {
      token: tok.mia,
      body: { parts: [{ type: 'text', text: 'look' }, { type: 'file', mime: 'text/plain', filename: 'a.txt', content: Buffer.from('abc').toString('base64') }] },
    });
    expect(ok.status).toBe(202);
    for (const url of ['file:///etc/passwd', 'http://169.254.169.254/latest/meta-data']) {
      const r = await api(t, 'POST', `/v1/sessions/${mine}/prompt`, { token: tok.mia, body: { parts: [{ type: 'file', mime: 'text/plain', url }] } });
      expect(r.status, url).toBe(400);
    }
    expect((await api(t, 'POST', `/v1/sessions/${mine}/prompt`, { token: tok.mia, body: { text: '   ' } })).status).toBe(400);
  });

  it('snapshots a template at creation, enforces use_templates, and backfills older sessions on first prompt', async () => {
    const created = await api(t, 'POST', '/v1/admin/templates', { token: tok.owner, body: { slug: 'reviewer', name: 'Reviewer', systemPrompt: 'You review code v1', model: 'local/m2' } });
    expect(created.status).toBe(201);
    expect((await api(t, 'POST', '/v1/admin/templates', { token: tok.mia, body: { slug: 'x', name: 'X' } })).status).toBe(403);
    expect((await api(t, 'POST', '/v1/admin/templates', { token: tok.owner, body: { slug: 'bad', name: 'Bad', model: 'local/nope' } })).status).toBe(400);

    const s = await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'review', template_slug: 'reviewer' } });
    expect(s.status).toBe(201);
    await api(t, 'PATCH', '/v1/admin/templates/reviewer', { token: tok.owner, body: { systemPrompt: 'You review code v2' } });
    const { rows } = await t.opened.db.query(`select system_prompt as "systemPrompt", model from agent_sessions where id = $1`, [s.json.sessionId]);
    expect(rows[0]).toEqual({ systemPrompt: 'You review code v1', model: 'local/m2' });

    // A role that may use only another template.
    const role = await api(t, 'POST', '/v1/admin/roles', { token: tok.owner, body: { name: 'limited', permissions: { agents: { create: true, use_templates: ['other'] } } } });
    await api(t, 'POST', `/v1/admin/users/${acme.ids.max}/roles`, { token: tok.owner, body: { roleId: role.json.role.id } });
    await api(t, 'DELETE', `/v1/admin/users/${acme.ids.max}/roles/${(await api(t, 'GET', '/v1/admin/roles', { token: tok.owner })).json.roles.find((r: any) => r.name === 'member').id}`, { token: tok.owner });
    const limited = await signToken(t, { sub: acme.ids.max, tid: acme.tenantId, roles: ['limited'] });
    const denied = await api(t, 'POST', '/v1/sessions', { token: limited, body: { title: 'x', template_slug: 'reviewer' } });
    expect(denied.status).toBe(403);
    expect(denied.json.details).toMatchObject({ permission: 'agents.use_templates', template: 'reviewer' });
    expect((await api(t, 'GET', '/v1/templates', { token: limited })).json.templates).toEqual([]);
    expect((await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'x', template_slug: 'missing' } })).status).toBe(404);

    // An older session (made before snapshots) takes the template's current values at its first prompt.
    const old = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'old' } })).json.sessionId;
    await t.opened.db.query(`update agent_sessions set template_slug = 'reviewer' where id = $1`, [old]);
    expect((await api(t, 'POST', `/v1/sessions/${old}/prompt`, { token: tok.mia, body: { text: 'go', agent: 'build' } })).status).toBe(202);
    const after = await t.opened.db.query(`select system_prompt as "systemPrompt", model, snapshot_at is not null as snap from agent_sessions where id = $1`, [old]);
    expect(after.rows[0]).toEqual({ systemPrompt: 'You review code v2', model: 'local/m2', snap: true });
  });

  it('keeps provider keys sealed: never returned, not stored in the clear', async () => {
    const list = await api(t, 'GET', '/v1/admin/providers', { token: tok.owner });
    expect(list.json.providers[0]).toMatchObject({ name: 'local', hasApiKey: true });
    expect(list.text).not.toContain('sk-local-secret-123');
    const { rows } = await t.opened.db.query(`select api_key_sealed as k from providers`);
    expect(rows[0].k).toMatch(/^v1\.[0-9a-f]{8}\./);
    expect(rows[0].k).not.toContain('sk-local');
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=provider.create', { token: tok.owner });
    expect(JSON.stringify(audit.json)).not.toContain('sk-local-secret-123');
    expect((await api(t, 'GET', '/v1/admin/providers', { token: tok.mia })).status).toBe(403);
    expect((await api(t, 'POST', '/v1/admin/runtime/apply', { token: tok.mia, body: {} })).status).toBe(403);
  });

  it('fails closed once the default model\'s provider is disabled', async () => {
    await api(t, 'PATCH', '/v1/admin/providers/local', { token: tok.owner, body: { enabled: false } });
    const r = await api(t, 'POST', `/v1/sessions/${mine}/prompt`, { token: tok.mia, body: { text: 'hi', agent: 'build' } });
    expect(r.status).toBe(409);
    expect(r.json).toMatchObject({ error: 'runtime_not_ready', detail: expect.stringContaining('disabled') });
    await api(t, 'PATCH', '/v1/admin/providers/local', { token: tok.owner, body: { enabled: true } });
  });

  it('refuses a prompt with 429 cost_limit_exceeded once the monthly cost limit is spent', async () => {
    const role = await api(t, 'POST', '/v1/admin/roles', { token: tok.owner, body: { name: 'budget', permissions: { agents: { create: true }, tools: { allowed: '*' }, cost: { monthly_limit_usd: 0.5 } } } });
    const { rows } = await t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, 'bud', 'bud@acme.example') returning id`, [acme.tenantId]);
    await api(t, 'POST', `/v1/admin/users/${rows[0].id}/roles`, { token: tok.owner, body: { roleId: role.json.role.id } });
    const bud = await signToken(t, { sub: rows[0].id, tid: acme.tenantId, roles: ['budget'] });
    const s = (await api(t, 'POST', '/v1/sessions', { token: bud, body: { title: 'budget' } })).json.sessionId;
    expect((await api(t, 'POST', `/v1/sessions/${s}/prompt`, { token: bud, body: { text: 'first', agent: 'build' } })).status).toBe(202);
    await t.opened.core.usage.record(t.opened.db, { tenantId: acme.tenantId, userId: rows[0].id, sessionId: s, model: 'm1', provider: '', tokens: { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: 0.5, channel: 'web' });
    const r = await api(t, 'POST', `/v1/sessions/${s}/prompt`, { token: bud, body: { text: 'second', agent: 'build' } });
    expect(r.status).toBe(429);
    expect(r.json).toMatchObject({ error: 'cost_limit_exceeded', details: { monthlyLimitUsd: 0.5, spentUsd: 0.5 } });
  });

  it('deletes a session from the owner\'s index only', async () => {
    const s = (await api(t, 'POST', '/v1/sessions', { token: tok.mia, body: { title: 'to delete' } })).json.sessionId;
    expect((await api(t, 'DELETE', `/v1/sessions/${s}`, { token: tok.max })).status).toBe(404);
    expect((await api(t, 'DELETE', `/v1/sessions/${s}`, { token: tok.mia })).status).toBe(204);
    expect((await api(t, 'GET', `/v1/sessions/${s}/messages`, { token: tok.mia })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/sessions', { token: tok.mia })).json.sessions.map((x: any) => x.sessionId)).not.toContain(s);
  });
});

describe(`sessions: demo mode and the browser-session header (${DB_MODE})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'owner@acme.example' } });
  });
  afterAll(() => t?.close());

  it('keeps demo-mode sessions of a browser visible after sign-in on it, until the user claims them', async () => {
    const acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    const browser = { 'x-browser-session': 'browser-aaaaaaaaaaaaaaaa' };
    const demo = await api(t, 'POST', '/v1/sessions', { headers: browser, body: { title: 'made in demo mode' } });
    expect(demo.status).toBe(201);
    const id = demo.json.sessionId;
    expect((await api(t, 'GET', '/v1/sessions')).json.sessions.map((s: any) => s.sessionId)).toEqual([id]);

    const mia = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    // Same browser after sign-in: visible and usable, marked claimable. Another browser: not visible.
    expect((await api(t, 'GET', '/v1/sessions', { token: mia, headers: browser })).json.sessions).toEqual([
      expect.objectContaining({ sessionId: id, title: 'made in demo mode', updatedAt: expect.any(String), templateSlug: null, claimable: true, pinned: false, archived: false }),
    ]);
    expect((await api(t, 'GET', '/v1/sessions', { token: mia, headers: { 'x-browser-session': 'browser-bbbbbbbbbbbbbbbb' } })).json.sessions).toEqual([]);
    expect((await api(t, 'GET', `/v1/sessions/${id}/messages`, { token: mia, headers: browser })).status).toBe(200);
    expect((await api(t, 'GET', `/v1/sessions/${id}/messages`, { token: mia })).status).toBe(404);

    const claim = await api(t, 'POST', `/v1/sessions/${id}/claim`, { token: mia, headers: browser });
    expect(claim.json).toEqual({ sessionId: id, claimed: true });
    // Now it is hers, from any browser, and no longer the operator's.
    expect((await api(t, 'GET', '/v1/sessions', { token: mia })).json.sessions.map((s: any) => s.sessionId)).toEqual([id]);
    expect((await api(t, 'GET', '/v1/sessions')).json.sessions).toEqual([]);
  });
});
