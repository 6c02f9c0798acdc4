import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api, captureLogs, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

const NUL = 'a\u0000b';
const LONE = 'a\ud800b';
const NUL_IN_URL = 'a%00b';

/**
 * The HTTP edge as an attacker or a sloppy client meets it (issue 11): unreadable credentials, input
 * checked before anything reads it, and nothing that answers 500 or fills the log.
 */
describe(`HTTP edge hardening (${DB_MODE})`, () => {
  let t: TestApp;
  let platform: FakeChatPlatform;
  const logs = captureLogs();
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let sessionId: string;
  let gatewayId: string;

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    t = await startTestApp({ logger: logs.logger, vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url } });
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.member = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    const s = await api(t, 'POST', '/v1/sessions', { token: tok.owner, body: { title: 'edge' } });
    expect(s.status, s.text).toBe(201);
    sessionId = s.json.sessionId;
    const g = await api(t, 'POST', '/v1/gateways', { token: tok.owner, body: { kind: 'bot_chat', botToken: `123456:${crypto.randomUUID()}`, botUsername: 'edge_bot', botId: '123456' } });
    expect(g.status, g.text).toBe(201);
    gatewayId = g.json.id;
  });
  afterAll(async () => {
    await t?.close();
    await platform?.close();
  });

  const sessionCount = async () => (await t.opened.db.query<{ n: number }>(`select count(*)::int as n from agent_sessions where tenant_id = $1`, [acme.tenantId])).rows[0].n;
  const prompt = (body: unknown, headers: Record<string, string> = {}, id = sessionId) => api(t, 'POST', `/v1/sessions/${id}/prompt`, { token: tok.owner, body, headers });
  const multipart = (form: FormData) => fetch(`${t.url}/v1/sessions/${sessionId}/prompt`, { method: 'POST', headers: { authorization: `Bearer ${tok.owner}` }, body: form }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
  const form = (fields: Array<[string, string | Blob, string?]>) => {
    const f = new FormData();
    for (const [k, v, name] of fields) typeof v === 'string' ? f.append(k, v) : f.append(k, v, name);
    return f;
  };

  describe('the prompt route enforces its schema (finding 5)', () => {
    it('answers 400 naming the field for wrong JSON types, a bad id, too many parts and a short browser-session header', async () => {
      const cases: Array<[unknown, string, Record<string, string>?, string?]> = [
        [{ text: {} }, 'body/text must be string'],
        [{ text: ['a', 'b'] }, 'body/text must be string'],
        [{ text: 123 }, 'body/text must be string'],
        [{ parts: Array.from({ length: 201 }, () => ({ type: 'text', text: 'x' })) }, 'body/parts must NOT have more than 200 items'],
        [{ text: 'hi' }, 'headers/x-browser-session must NOT have fewer than 16 characters', { 'x-browser-session': 'short' }],
        [{ text: 'hi' }, 'params/id must match format "uuid"', {}, 'not-a-uuid'],
      ];
      for (const [body, message, headers, id] of cases) {
        const r = await prompt(body, headers, id);
        expect(r.status, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`).toBe(400);
        expect(r.json).toEqual({ error: 'validation_failed', message, requestId: expect.any(String) });
      }
      // The same prompt, well-formed, passes validation and meets the runtime check.
      expect((await prompt({ text: 'hi' }, { 'x-browser-session': 'b'.repeat(16) })).json.error).toBe('runtime_not_ready');
    });

    it('checks multipart fields by the same rules, field by field', async () => {
      const file = new Blob(['hello'], { type: 'text/plain' });
      const cases: Array<[FormData, number, string]> = [
        [form([['text', 'hi'], ['agent', 'x'.repeat(65)]]), 400, 'body/agent must NOT have more than 64 characters'],
        [form([['text', 'hi'], ['agentProfileId', 'x'.repeat(201)]]), 400, 'body/agentProfileId must NOT have more than 200 characters'],
        [form([['text', 'hi'], ['text', 'again']]), 400, 'body/text is given more than once'],
        [form([['text', NUL]]), 400, 'body/text must be valid Unicode without NUL characters'],
        [form([['text', 'hi'], ['agentProfileId', NUL]]), 400, 'body/agentProfileId must be valid Unicode without NUL characters'],
        [form([['text', 'hi'], ['files', file, NUL]]), 400, 'body/files/0/filename must be valid Unicode without NUL characters'],
        [form([['text', 'hi'], ...Array.from({ length: 9 }, () => ['files', file, 'f.txt'] as [string, Blob, string])]), 413, ''],
      ];
      for (const [f, status, message] of cases) {
        const r = await multipart(f);
        expect(r.status, JSON.stringify(r.json)).toBe(status);
        if (message) expect(r.json).toEqual({ error: 'validation_failed', message, requestId: expect.any(String) });
        else expect(r.json.error).toBe('payload_too_large');
      }
      const ok = await multipart(form([['text', 'hi'], ['agent', 'build'], ['files', file, 'notes.txt']]));
      expect(ok.json.error).toBe('runtime_not_ready');
    });
  });

  describe('bodies are typed exactly; query strings and params are coerced (finding 6)', () => {
    it('refuses numbers, arrays and nulls where a body wants a string or a boolean', async () => {
      const before = await sessionCount();
      for (const title of [123, ['x'], null, true]) {
        const r = await api(t, 'POST', '/v1/sessions', { token: tok.owner, body: { title } });
        expect(r.status, r.text).toBe(400);
        expect(r.json.message).toBe('body/title must be string');
      }
      expect(await sessionCount()).toBe(before);

      for (const enabled of [null, 'false', 0]) {
        const r = await api(t, 'PATCH', `/v1/gateways/${gatewayId}`, { token: tok.owner, body: { enabled } });
        expect(r.status, r.text).toBe(400);
        expect(r.json.message).toBe('body/enabled must be boolean');
      }
      expect((await api(t, 'GET', '/v1/gateways', { token: tok.owner })).json.gateways.find((g: any) => g.id === gatewayId).enabled).toBe(true);

      const role = await api(t, 'POST', '/v1/admin/roles', { token: tok.owner, body: { name: 'auditor', permissions: { admin: { view_audit_log: 'true' } } } });
      expect(role.status, role.text).toBe(400);
      expect(role.json.message).toBe('body/permissions/admin/view_audit_log must be boolean');
      const roles = await api(t, 'GET', '/v1/admin/roles', { token: tok.owner });
      expect(roles.json.roles.map((r: any) => r.name)).not.toContain('auditor');
    });

    it('still coerces query strings and fills in defaults', async () => {
      const page = await api(t, 'GET', '/v1/admin/audit-log?limit=1', { token: tok.owner });
      expect(page.status, page.text).toBe(200);
      expect(page.json.count).toBeLessThanOrEqual(1);
      expect((await api(t, 'GET', '/v1/admin/audit-log?limit=many', { token: tok.owner })).json.message).toBe('querystring/limit must be integer');
      const p = await api(t, 'POST', '/v1/admin/providers', { token: tok.owner, body: { name: 'local', kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', models: [{ id: 'm1' }] } });
      expect(p.status, p.text).toBe(201);
      expect(p.json.provider.enabled).toBe(true);
      const doc = await api(t, 'GET', '/v1/openapi.json');
      expect(Object.keys(doc.json.paths['/v1/sessions/{id}/prompt'].post.requestBody.content)).toEqual(['application/json', 'multipart/form-data']);
    });
  });

  describe('every string is valid Unicode without NUL (finding 7)', () => {
    type Row = [field: string, request: (bad: string) => Promise<{ status: number; json: any; text?: string }>, message: string, variants?: string[]];
    const as = (method: string, path: string, body?: unknown) => api(t, method, path, { token: tok.owner, body });
    const gw = () => `/v1/gateways/${gatewayId}`;
    // Path and query values can carry NUL (%00); a lone surrogate cannot be percent-encoded (see below).
    const inUrl = [NUL_IN_URL];
    const rows: Row[] = [
      ['session title', (v) => as('POST', '/v1/sessions', { title: v }), 'body/title'],
      ['session template_slug', (v) => as('POST', '/v1/sessions', { title: 'x', template_slug: v }), 'body/template_slug'],
      ['prompt text', (v) => prompt({ text: v }), 'body/text'],
      ['prompt agentProfileId', (v) => prompt({ text: 'hi', agentProfileId: v }), 'body/agentProfileId'],
      ['prompt parts[].text', (v) => prompt({ parts: [{ type: 'text', text: 'ok' }, { type: 'text', text: v }] }), 'body/parts/1/text'],
      ['prompt parts[].filename', (v) => prompt({ parts: [{ type: 'file', mime: 'text/plain', filename: v, content: 'aGk=' }] }), 'body/parts/0/filename'],
      ['multipart text', (v) => multipart(form([['text', v]])), 'body/text', [NUL]],
      ['multipart agentProfileId', (v) => multipart(form([['text', 'hi'], ['agentProfileId', v]])), 'body/agentProfileId', [NUL]],
      ['multipart filename', (v) => multipart(form([['text', 'hi'], ['files', new Blob(['x']), v]])), 'body/files/0/filename', [NUL]],
      ['audit action query', (v) => as('GET', `/v1/admin/audit-log?action=${v}`), 'querystring/action', inUrl],
      ['role description', (v) => as('POST', '/v1/admin/roles', { name: 'r-desc', description: v, permissions: {} }), 'body/description'],
      ['role tools.allowed', (v) => as('POST', '/v1/admin/roles', { name: 'r-tools', permissions: { tools: { allowed: ['bash', v] } } }), 'body/permissions/tools/allowed/1'],
      ['groupRoleMapping key', (v) => as('PATCH', '/v1/admin/tenant', { settings: { groupRoleMapping: { ok: 'member', [v]: 'member' } } }), 'body/settings/groupRoleMapping'],
      ['provider models[].id', (v) => as('POST', '/v1/admin/providers', { name: 'p-id', kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', models: [{ id: v }] }), 'body/models/0/id'],
      ['provider models[].name', (v) => as('POST', '/v1/admin/providers', { name: 'p-name', kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', models: [{ id: 'm', name: v }] }), 'body/models/0/name'],
      ['template name', (v) => as('POST', '/v1/admin/templates', { slug: 't-name', name: v }), 'body/name'],
      ['template systemPrompt', (v) => as('POST', '/v1/admin/templates', { slug: 't-prompt', name: 'T', systemPrompt: v }), 'body/systemPrompt'],
      ['template :slug', (v) => as('PATCH', `/v1/admin/templates/${v}`, { name: 'T' }), 'params/slug', inUrl],
      ['gateway botUsername', (v) => as('POST', '/v1/gateways', { kind: 'bot_chat', botToken: '1:x', botUsername: v, botId: '1' }), 'body/botUsername'],
      ['gateway botId', (v) => as('POST', '/v1/gateways', { kind: 'bot_chat', botToken: '1:x', botUsername: 'b', botId: v }), 'body/botId'],
      ['approve :code', (v) => as('POST', `${gw()}/pairing-codes/${v}/approve`), 'params/code', inUrl],
      ['deny :code', (v) => as('DELETE', `${gw()}/pairing-codes/${v}`), 'params/code', inUrl],
      ['paired user :externalUserId', (v) => as('DELETE', `${gw()}/paired-users/${v}`), 'params/externalUserId', inUrl],
    ];

    it.each(rows)('%s: 400 validation_failed naming the field', async (_field, request, at, variants = [NUL, LONE]) => {
      for (const bad of variants) {
        const r = await request(bad);
        expect(r.status, `${JSON.stringify(bad)}: ${JSON.stringify(r.json)}`).toBe(400);
        const rule = at.endsWith('groupRoleMapping') ? 'must have property names of valid Unicode without NUL characters' : 'must be valid Unicode without NUL characters';
        expect(r.json).toEqual({ error: 'validation_failed', message: `${at} ${rule}`, requestId: expect.any(String) });
      }
    });

    it('nothing was stored by those requests, and the same requests with clean strings pass validation', async () => {
      const { rows: stored } = await t.opened.db.query(
        `select (select count(*)::int from roles where tenant_id = $1 and name like 'r-%') as roles,
                (select count(*)::int from providers where tenant_id = $1 and name like 'p-%') as providers,
                (select count(*)::int from templates where tenant_id = $1 and slug like 't-%') as templates`,
        [acme.tenantId],
      );
      expect(stored[0]).toEqual({ roles: 0, providers: 0, templates: 0 });
      expect((await as('POST', '/v1/admin/roles', { name: 'r-clean', description: 'ok', permissions: { tools: { allowed: ['bash'] } } })).status).toBe(201);
      expect((await as('POST', '/v1/admin/templates', { slug: 't-clean', name: 'ok', systemPrompt: 'ok' })).status).toBe(201);
      expect((await as('PATCH', '/v1/admin/tenant', { settings: { groupRoleMapping: { 'group-1': 'member' } } })).status).toBe(200);
    });

    it('answers 400, not 500, for a path that is not UTF-8, a malformed data: URL and a gateway id that is not a uuid', async () => {
      const lone = await as('PATCH', '/v1/admin/templates/a%ED%A0%80b', { name: 'T' });
      expect(lone.status).toBe(400);
      expect(lone.json).toEqual({ error: 'validation_failed', message: 'the URL path is not valid percent-encoded UTF-8', requestId: expect.any(String) });
      const data = await prompt({ parts: [{ type: 'file', mime: 'text/plain', url: 'data:text/plain,%' }] });
      expect(data.status, data.text).toBe(400);
      expect(data.json.error).toBe('validation_failed');
      for (const [method, path] of [['DELETE', '/v1/gateways/not-a-uuid/pairing-codes/X'], ['POST', '/v1/gateways/not-a-uuid/pairing-codes/X/approve'], ['GET', '/v1/gateways/not-a-uuid/paired-users'], ['PATCH', '/v1/gateways/not-a-uuid']]) {
        const r = await api(t, method, path, { token: tok.owner, ...(method === 'PATCH' ? { body: { enabled: true } } : {}) });
        expect(r.status, `${method} ${path}: ${r.text}`).toBe(400);
        expect(r.json).toEqual({ error: 'validation_failed', message: 'params/id must match format "uuid"', requestId: expect.any(String) });
      }
      const hook = await fetch(`${t.url}/v1/gateways/not-a-uuid/webhook`, { method: 'POST', body: '{}' });
      expect(hook.status).toBe(400);
    });

    it('makes what a chat platform sends storable instead of refusing it (the platform would retry a 400)', async () => {
      const reg = await as('POST', `${gw()}/webhook/register`, { webhookUrl: 'https://8.8.8.8/agentws/hook' });
      expect(reg.status, reg.text).toBe(200);
      const secret = platform.webhooks().at(-1)!.secret;
      const update = botChatUpdate({ userId: 777, username: NUL, firstName: LONE, lastName: 'Doe', text: `hello ${NUL}` });
      const r = await fetch(`${t.url}${gw()}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret }, body: JSON.stringify(update) });
      expect(r.status, await r.text()).toBe(200);
      const codes = (await as('GET', `${gw()}/pairing-codes`)).json.codes;
      expect(codes).toEqual([expect.objectContaining({ externalUserId: '777', externalUserName: 'ab' })]);
      const { rows } = await t.opened.db.query(`select details from audit_log where tenant_id = $1 and action = 'pairing.request'`, [acme.tenantId]);
      expect(rows.map((x: any) => x.details.externalUserName)).toEqual(['ab']);
    });
  });

  describe('a malformed cookie (finding 8)', () => {
    it('is a wrong credential: 401 with the envelope, and nothing is logged at error level', async () => {
      const before = logs.lines.length;
      for (const path of ['/v1/auth/me', '/v1/sessions', '/v1/admin/providers']) {
        const r = await api(t, 'GET', path, { headers: { cookie: 'agentws_access=%E0%A4%A' } });
        expect(r.status, r.text).toBe(401);
        expect(r.json).toEqual({ error: 'unauthenticated', message: 'invalid token', hint: expect.any(String), requestId: r.headers.get('x-request-id') });
      }
      // The refresh cookie is read the same way: an unreadable one is an invalid token.
      const refresh = await api(t, 'POST', '/v1/auth/refresh', { body: {}, headers: { cookie: 'agentws_refresh=%E0%A4%A' } });
      expect(refresh.status).toBe(401);
      const errors = logs.lines.slice(before).filter((l) => l.level === 'error' || l.level === 'fatal');
      expect(errors).toEqual([]);
    });
  });
});
