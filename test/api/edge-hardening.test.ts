import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api, captureLogs, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

const NUL = 'a\u0000b';
const LONE = 'a\ud800b';
const NUL_IN_URL = 'a%00b';
const MiB = 1024 * 1024;

/**
 * Streams `size` bytes with http.request the way a piped upload does: write, wait for drain, until done,
 * whatever the server answers meanwhile. With `pauseAfter` it stops after that many bytes and waits up to
 * `waitMs` for an answer first, so a test can tell an answer given before the body was read from one
 * given after. Resolves once the request is over, with what the client saw: the answer, how far the
 * upload had got when it came, and the first socket error (EPIPE, ECONNRESET), if any.
 */
function upload(url: string, size: number, headers: Record<string, string>, opts: { pauseAfter?: number; waitMs?: number } = {}) {
  type Seen = { status?: number; body: string; sentAtResponse?: number; sent: number; error?: string };
  return new Promise<Seen>((resolve) => {
    const out: Seen = { body: '', sent: 0 };
    let settle: () => void = () => {};
    const answeredOrClosed = new Promise<void>((r) => (settle = r));
    let closed = false;
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(size), ...headers } }, (res) => {
      out.status = res.statusCode;
      out.sentAtResponse = out.sent;
      res.on('data', (d) => (out.body += d));
      res.on('end', settle);
    });
    req.on('error', (e: NodeJS.ErrnoException) => (out.error ??= e.code ?? e.message));
    req.on('close', () => {
      closed = true;
      settle();
      // Let a response still being read finish first.
      setTimeout(() => resolve(out), 50);
    });
    const chunk = Buffer.alloc(256 * 1024, 32);
    void (async () => {
      let paused = opts.pauseAfter === undefined;
      while (out.sent < size && !closed) {
        if (!paused && out.sent >= opts.pauseAfter!) {
          paused = true;
          await Promise.race([answeredOrClosed, new Promise((r) => setTimeout(r, opts.waitMs ?? 3000))]);
          continue;
        }
        const n = Math.min(chunk.length, size - out.sent);
        out.sent += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) await new Promise<void>((r) => (req.once('drain', r), req.once('close', r)));
      }
      if (!closed) req.end();
    })();
  });
}

/**
 * The HTTP edge as an attacker or a sloppy client meets it: unreadable credentials, input
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
    t = await startTestApp({ logger: logs.logger, vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url, AGENTWS_ACCESS_LOG: 'all' } });
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

  describe('authentication comes before the body (finding 4)', () => {
    it('answers 401, not 400 or 413, on protected routes whatever the body, without a token', async () => {
      const gw = `/v1/gateways/${gatewayId}`;
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/v1/sessions', {}],
        ['POST', `/v1/sessions/${sessionId}/prompt`, { text: {} }],
        ['POST', '/v1/sessions/not-a-uuid/prompt', { text: 'hi' }],
        ['POST', `/v1/sessions/${sessionId}/permissions/p1`, { response: 'maybe' }],
        ['POST', '/v1/admin/roles', {}],
        ['POST', '/v1/admin/users/not-a-uuid/roles', {}],
        ['PATCH', '/v1/admin/tenant', { settings: 1 }],
        ['GET', '/v1/admin/audit-log?limit=many', undefined],
        ['POST', '/v1/admin/providers', { name: 'NO' }],
        ['PATCH', '/v1/admin/runtime', {}],
        ['POST', '/v1/admin/templates', { slug: '!' }],
        ['POST', '/v1/gateways', {}],
        ['PATCH', '/v1/gateways/not-a-uuid', { enabled: 'x' }],
        ['POST', `${gw}/webhook/register`, {}],
        ['POST', `${gw}/pairing-codes/${NUL_IN_URL}/approve`, undefined],
      ];
      for (const [method, path, body] of cases) {
        const r = await api(t, method, path, { body });
        expect(r.status, `${method} ${path}: ${r.text}`).toBe(401);
        expect(r.json).toMatchObject({ error: 'unauthenticated', requestId: expect.any(String) });
      }
      const notJson = await fetch(`${t.url}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
      expect(notJson.status).toBe(401);
      const tooBig = await fetch(`${t.url}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer wrong' }, body: JSON.stringify({ title: 'x'.repeat(2 * MiB) }) });
      expect(tooBig.status).toBe(401);
    });

    it('answers a wrong token at once, before the upload of a 45 MB body is done, and the client reads it cleanly', async () => {
      for (const path of [`/v1/sessions/${sessionId}/prompt`, '/v1/sessions', '/v1/admin/providers']) {
        // The client sends 1 MiB and waits: a server that reads the body first would not answer yet.
        const r = await upload(`${t.url}${path}`, 45_000_000, { authorization: 'Bearer wrong' }, { pauseAfter: MiB, waitMs: 5000 });
        expect(r.status, `${path}: ${JSON.stringify(r)}`).toBe(401);
        expect(r.sentAtResponse).toBeLessThanOrEqual(MiB);
        expect(JSON.parse(r.body)).toMatchObject({ error: 'unauthenticated' });
        // No reset while the client was still sending.
        expect(r.error).toBeUndefined();
      }
    });

    it('keeps the gateways\' development mode: without an API key, no credential acts as the operator', async () => {
      const dev = await startTestApp({ vars: { AGENTWS_API_KEY: '', AGENTWS_OPERATOR_EMAIL: 'owner@dev.example' } });
      try {
        await seedTenant(dev, 'dev');
        const list = await api(dev, 'GET', '/v1/gateways');
        expect(list.status, list.text).toBe(200);
        const made = await api(dev, 'POST', '/v1/gateways', { body: { kind: 'bot_chat', botToken: '1:x', botUsername: 'dev_bot', botId: '1' } });
        expect(made.status, made.text).toBe(201);
        expect((await api(dev, 'POST', '/v1/gateways', { body: { kind: 'bot_chat' } })).status).toBe(400);
        // Other protected routes are not opened by it.
        expect((await api(dev, 'GET', '/v1/sessions')).status).toBe(401);
        // A wrong credential is still 401 there.
        expect((await api(dev, 'GET', '/v1/gateways', { token: 'wrong' })).status).toBe(401);
      } finally {
        await dev.close();
      }
    });
  });

  describe('an early answer is readable by a client that is still uploading (finding 18)', () => {
    it('413 for a 50 MiB JSON body, streamed with http.request and sent with fetch', async () => {
      const path = `${t.url}/v1/sessions/${sessionId}/prompt`;
      const r = await upload(path, 50 * MiB, { authorization: `Bearer ${tok.owner}` });
      expect(r.status, JSON.stringify(r)).toBe(413);
      expect(JSON.parse(r.body)).toEqual({ error: 'payload_too_large', message: expect.any(String), requestId: expect.any(String) });
      expect(r.error).toBeUndefined();
      for (let i = 0; i < 3; i++) {
        const f = await fetch(path, { method: 'POST', headers: { authorization: `Bearer ${tok.owner}`, 'content-type': 'application/json' }, body: Buffer.alloc(50 * MiB, 32) });
        expect(f.status).toBe(413);
        expect(((await f.json()) as any).error).toBe('payload_too_large');
      }
    });

    it('413 for a 50 MiB file in a multipart prompt, sent with fetch', async () => {
      for (let i = 0; i < 3; i++) {
        const r = await multipart(form([['text', 'hi'], ['files', new Blob([Buffer.alloc(50 * MiB, 65)]), 'big.bin']]));
        expect(r.status).toBe(413);
        expect(r.json.error).toBe('payload_too_large');
      }
    });

    it('reads on for at most 64 MiB: a client that keeps sending after the answer is then disconnected', async () => {
      const { port } = new URL(t.url);
      const socket = net.connect(Number(port), '127.0.0.1');
      let answer = '';
      let sent = 0;
      let closed = false;
      socket.on('data', (d) => (answer += d));
      socket.on('error', () => {});
      socket.on('close', () => (closed = true));
      socket.write(`POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: ${500 * MiB}\r\n\r\n`);
      const chunk = Buffer.alloc(MiB, 32);
      while (!closed && sent < 500 * MiB) {
        sent += chunk.length;
        if (!socket.write(chunk)) await new Promise((r) => (socket.once('drain', r), socket.once('close', r)));
      }
      expect(answer).toMatch(/^HTTP\/1\.1 401 /);
      expect(closed).toBe(true);
      // 64 MiB read after the answer, plus what the kernel's buffers held.
      expect(sent).toBeGreaterThan(64 * MiB);
      expect(sent).toBeLessThan(96 * MiB);
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

    it('answers 400, not 500, for a path that is not UTF-8, a malformed data: URL, a gateway id that is not a uuid, and a long path segment', async () => {
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
      // Path params are bounded by their schemas (a team_chat user id can be long), the router only stops
      // what no schema would take, and answers in the envelope too.
      expect((await as('DELETE', `/v1/gateways/${gatewayId}/paired-users/29:${'x'.repeat(150)}`)).status).toBe(404);
      expect((await as('DELETE', `/v1/gateways/${gatewayId}/paired-users/${'x'.repeat(201)}`)).json.message).toBe('params/externalUserId must NOT have more than 200 characters');
      const long = await as('DELETE', `/v1/gateways/${gatewayId}/paired-users/${'x'.repeat(300)}`);
      expect(long.status).toBe(414);
      expect(long.json).toEqual({ error: 'uri_too_long', message: 'a path segment is too long', requestId: expect.any(String) });
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

  describe('pairing codes never reach the log (finding 12)', () => {
    it('writes [redacted] for the code in the access lines of approve and deny, also for a wrong code', async () => {
      const gw = `/v1/gateways/${gatewayId}`;
      if (!platform.webhooks().length) expect((await api(t, 'POST', `${gw}/webhook/register`, { token: tok.owner, body: { webhookUrl: 'https://8.8.8.8/agentws/hook' } })).status).toBe(200);
      const secret = platform.webhooks().at(-1)!.secret;
      for (const userId of [9101, 9102]) {
        const r = await fetch(`${t.url}${gw}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret }, body: JSON.stringify(botChatUpdate({ userId, username: `u${userId}`, text: 'hi' })) });
        expect(r.status).toBe(200);
      }
      const codes = ((await api(t, 'GET', `${gw}/pairing-codes`, { token: tok.owner })).json.codes as any[]).filter((c) => ['9101', '9102'].includes(c.externalUserId));
      expect(codes).toHaveLength(2);
      const [approve, deny] = codes.map((c) => c.code as string);
      const from = logs.lines.length;
      expect((await api(t, 'POST', `${gw}/pairing-codes/${approve}/approve`, { token: tok.owner })).status).toBe(200);
      expect((await api(t, 'DELETE', `${gw}/pairing-codes/${deny.toLowerCase()}`, { token: tok.owner })).status).toBe(204);
      expect((await api(t, 'POST', `${gw}/pairing-codes/ZZZZ2222/approve`, { token: tok.owner })).status).toBe(404);
      const lines = logs.lines.slice(from);
      const paths = lines.filter((l) => l.msg === 'request completed').map((l) => `${l.method} ${l.path} ${l.status}`);
      expect(paths).toEqual([
        `POST ${gw}/pairing-codes/[redacted]/approve 200`,
        `DELETE ${gw}/pairing-codes/[redacted] 204`,
        `POST ${gw}/pairing-codes/[redacted]/approve 404`,
      ]);
      for (const code of [approve, deny, 'ZZZZ2222']) expect(logs.text().toUpperCase()).not.toContain(code);
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
      const refresh = await api(t, 'POST', '/v1/auth/refresh', { body: {}, headers: { cookie: 'agentws_refresh=%E0%A4%A', 'x-agentws-csrf': '1' } });
      expect(refresh.status).toBe(401);
      const errors = logs.lines.slice(before).filter((l) => l.level === 'error' || l.level === 'fatal');
      expect(errors).toEqual([]);
    });
  });
});

/** A request with a Host header of our choosing (fetch does not let a caller set Host). */
function withHost(url: string, method: string, path: string, host: string | null, body?: unknown) {
  return new Promise<{ status: number; json: any }>((resolve, reject) => {
    const u = new URL(url);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      { host: u.hostname, port: u.port, method, path, setHost: false, headers: { ...(host === null ? {} : { host }), ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}) } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, json: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe(`local demo mode answers only to its own host names (finding 1, ${DB_MODE})`, () => {
  let t: TestApp;
  let port: string;
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'owner@demo.example', AGENTWS_PUBLIC_URL: 'https://agents.demo.test' } });
    await seedTenant(t, 'demo');
    port = new URL(t.url).port;
  });
  afterAll(async () => {
    await t?.close();
  });
  const provider = (name: string) => ({ name, kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', models: [{ id: 'm' }] });
  const providerNames = async () => (await withHost(t.url, 'GET', '/v1/admin/providers', `127.0.0.1:${port}`)).json.providers.map((p: any) => p.name);

  it('acts as the operator without a token, and still refuses a wrong credential', async () => {
    const anon = await withHost(t.url, 'GET', '/v1/auth/me', `localhost:${port}`);
    expect(anon.status).toBe(200);
    expect(anon.json).toMatchObject({ user: { email: 'owner@demo.example' }, roles: ['owner'] });
    expect((await api(t, 'GET', '/v1/auth/me', { token: 'nope' })).status).toBe(401);
  });

  it('answers 421 to another host (DNS rebinding): nothing is created, on any route', async () => {
    const r = await withHost(t.url, 'POST', '/v1/admin/providers', 'attacker.example', provider('rebound'));
    expect(r.status).toBe(421);
    expect(r.json).toEqual({ error: 'misdirected_request', message: 'host "attacker.example" is not this service', hint: expect.stringContaining('localhost'), requestId: expect.any(String) });
    expect(await providerNames()).not.toContain('rebound');
    for (const path of ['/healthz', '/readyz', '/v1/auth/status', '/v1/auth/me', '/v1/openapi.json', '/v1/no-such-route']) {
      expect((await withHost(t.url, 'GET', path, `attacker.example:${port}`)).status, path).toBe(421);
    }
    const hosts = ['localhost', `localhost:${Number(port) + 1}`, `127.0.0.1:1`, `127.0.0.2:${port}`, `agents.demo.test:${port}`, 'agents.demo.test:8443', `localhost.:${port}`, `evil.localhost:${port}`, `[::2]:${port}`, ''];
    for (const host of hosts) expect((await withHost(t.url, 'GET', '/v1/auth/me', host)).status, host).toBe(421);
    const none = await withHost(t.url, 'GET', '/v1/auth/me', null);
    expect(none.status).toBe(421);
    expect(none.json.message).toBe('a request without a Host header is not this service');
  });

  it('lets localhost, 127.0.0.1, [::1] (with the listening port) and the public URL\'s host through', async () => {
    const allowed = [`localhost:${port}`, `LocalHost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'agents.demo.test', 'agents.demo.test:443'];
    for (const [i, host] of allowed.entries()) {
      const r = await withHost(t.url, 'POST', '/v1/admin/providers', host, provider(`ok-${i}`));
      expect(r.status, `${host}: ${JSON.stringify(r.json)}`).toBe(201);
    }
    expect(await providerNames()).toEqual(expect.arrayContaining(allowed.map((_, i) => `ok-${i}`)));
    expect((await withHost(t.url, 'GET', '/healthz', `[::1]:${port}`)).status).toBe(200);
  });

  it('is off outside demo mode: other host names reach the routes (a reverse proxy decides)', async () => {
    const plain = await startTestApp();
    try {
      expect((await withHost(plain.url, 'GET', '/healthz', 'attacker.example')).status).toBe(200);
    } finally {
      await plain.close();
    }
  });
});
