import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/runtime.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { DB_MODE } from '../helpers/test-env.js';

const ALPHABET = /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}$/;

/** Gateways and pairing through the API, with a fake chat platform on loopback (no agent runtime). */
describe(`gateways and pairing (${DB_MODE})`, () => {
  let t: TestApp;
  let platform: FakeChatPlatform;
  let worker: Worker;
  let offsetMs = 0;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    t = await startTestApp({
      vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url },
      clock: { now: () => new Date(Date.now() + offsetMs) },
    });
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }, { handle: 'ada', roles: ['admin'] }]);
    const beta = await seedTenant(t, 'beta');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.member = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
    // Messages to chat users go through a job.
    worker = await startWorker(t.opened.core, t.opened.boss, silentLogger, { concurrency: 2 });
  });
  afterAll(async () => {
    await worker?.stop(1000);
    await t?.close();
    await platform?.close();
  });

  async function createGateway(token = tok.admin, botToken = `123456:${crypto.randomUUID()}`) {
    const r = await api(t, 'POST', '/v1/gateways', { token, body: { kind: 'bot_chat', botToken, botUsername: 'acme_bot', botId: '123456' } });
    expect(r.status, r.text).toBe(201);
    return { gateway: r.json, botToken };
  }
  async function registered(token = tok.admin) {
    const g = await createGateway(token);
    const reg = await api(t, 'POST', `/v1/gateways/${g.gateway.id}/webhook/register`, { token, body: { webhookUrl: 'https://8.8.8.8/agentws/hook' } });
    expect(reg.status, reg.text).toBe(200);
    const secret = platform.webhooks().at(-1)!.secret;
    return { ...g, secret };
  }
  const inbound = (gatewayId: string, secret: string | null, body: unknown) =>
    fetch(`${t.url}/v1/gateways/${gatewayId}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(secret ? { 'x-telegram-bot-api-secret-token': secret } : {}) },
      body: JSON.stringify(body),
    });
  const codesOf = async (gatewayId: string, token = tok.admin) => (await api(t, 'GET', `/v1/gateways/${gatewayId}/pairing-codes`, { token })).json.codes as any[];

  it('creates gateways of the two kinds only, returns them without secrets, and seals the token', async () => {
    const { gateway, botToken } = await createGateway();
    expect(gateway).toEqual({ id: expect.any(String), kind: 'bot_chat', botUsername: 'acme_bot', botId: '123456', webhookUrl: '', enabled: true, createdAt: expect.any(String), updatedAt: expect.any(String) });
    const bad = await api(t, 'POST', '/v1/gateways', { token: tok.admin, body: { kind: 'email', botToken: 'x', botUsername: 'b', botId: '1' } });
    expect(bad.status).toBe(400);
    const list = await api(t, 'GET', '/v1/gateways', { token: tok.admin });
    expect(list.json.gateways.map((g: any) => g.id)).toContain(gateway.id);
    expect(list.text).not.toContain(botToken);
    const { rows } = await t.opened.db.query(`select bot_token_sealed as s from gateways where id = $1`, [gateway.id]);
    expect(rows[0].s).toMatch(/^v1\./);
    expect(rows[0].s).not.toContain(botToken.split(':')[1]);
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=gateway.create', { token: tok.owner });
    expect(audit.text).not.toContain(botToken);
  });

  it('needs admin.manage_providers when an API key is configured, and keeps tenants apart', async () => {
    expect((await api(t, 'GET', '/v1/gateways')).status).toBe(401);
    const member = await api(t, 'GET', '/v1/gateways', { token: tok.member });
    expect(member.status).toBe(403);
    expect(member.json.details).toEqual({ permission: 'admin.manage_providers' });
    const { gateway } = await createGateway();
    for (const [method, path, body] of [
      ['PATCH', `/v1/gateways/${gateway.id}`, { enabled: false }],
      ['DELETE', `/v1/gateways/${gateway.id}`],
      ['POST', `/v1/gateways/${gateway.id}/webhook/register`, { webhookUrl: 'https://8.8.8.8/x' }],
      ['GET', `/v1/gateways/${gateway.id}/pairing-codes`],
      ['GET', `/v1/gateways/${gateway.id}/paired-users`],
      ['POST', `/v1/gateways/${gateway.id}/pairing-codes/ABCDEFGH/approve`],
      ['GET', `/v1/gateways/${gateway.id}/events`],
    ] as Array<[string, string, unknown?]>) {
      expect((await api(t, method, path, { token: tok.beta, body })).status, `${method} ${path}`).toBe(404);
    }
    expect((await api(t, 'GET', '/v1/gateways', { token: tok.beta })).json.gateways).toEqual([]);
  });

  it('registers the webhook with a fresh secret, refuses non-public URLs, and answers 502 when the platform is down', async () => {
    const { gateway, botToken } = await createGateway();
    for (const url of ['http://8.8.8.8/hook', 'https://127.0.0.1/hook', 'https://10.1.2.3/x', 'https://[::1]/x', 'https://169.254.169.254/latest', 'https://2130706433/x', 'https://localhost/x']) {
      const r = await api(t, 'POST', `/v1/gateways/${gateway.id}/webhook/register`, { token: tok.admin, body: { webhookUrl: url } });
      expect(r.status, url).toBe(400);
    }
    await platform.setDown(true);
    const down = await api(t, 'POST', `/v1/gateways/${gateway.id}/webhook/register`, { token: tok.admin, body: { webhookUrl: 'https://8.8.8.8/hook' } });
    await platform.setDown(false);
    expect(down.status).toBe(502);
    expect(down.text).not.toContain(botToken);
    expect((await api(t, 'GET', '/v1/gateways', { token: tok.admin })).json.gateways.find((g: any) => g.id === gateway.id).webhookUrl).toBe('');

    const ok = await api(t, 'POST', `/v1/gateways/${gateway.id}/webhook/register`, { token: tok.admin, body: { webhookUrl: 'https://8.8.8.8/hook' } });
    expect(ok.json.webhookUrl).toBe('https://8.8.8.8/hook');
    const hook = platform.webhooks().at(-1)!;
    expect(hook.url).toBe('https://8.8.8.8/hook');
    expect(hook.secret.length).toBeGreaterThanOrEqual(32);
    const { rows } = await t.opened.db.query(`select webhook_secret_sealed as s from gateways where id = $1`, [gateway.id]);
    expect(rows[0].s).toMatch(/^v1\./);
    expect(rows[0].s).not.toContain(hook.secret);
  });

  it('issues one pending code per user (a retry repeats it), verifies the secret, and ignores a disabled gateway', async () => {
    const { gateway, secret } = await registered();
    const wrong = await inbound(gateway.id, 'not-the-secret', botChatUpdate({ userId: 42, username: 'alice', text: 'hi' }));
    expect(wrong.status).toBe(401);
    expect((await inbound(gateway.id, null, botChatUpdate({ userId: 42, username: 'alice', text: 'hi' }))).status).toBe(401);
    expect(await codesOf(gateway.id)).toEqual([]);

    expect((await inbound(gateway.id, secret, botChatUpdate({ userId: 42, username: 'alice', text: 'hi' }))).status).toBe(200);
    const [code] = await codesOf(gateway.id);
    expect(code).toMatchObject({ gatewayId: gateway.id, code: expect.stringMatching(ALPHABET), externalUserId: '42', externalUserName: 'alice', consumedAt: null });
    expect(new Date(code.expiresAt).getTime() - new Date(code.createdAt).getTime()).toBe(3600_000);
    await expect.poll(() => platform.sent().filter((m) => m.chatId === '42').map((m) => m.text), { timeout: 10_000 }).toEqual([expect.stringContaining(code.code)]);

    // Writing again: the same code, sent again at most once a minute.
    await inbound(gateway.id, secret, botChatUpdate({ userId: 42, username: 'alice', text: 'hello?' }));
    expect((await codesOf(gateway.id)).map((c) => c.code)).toEqual([code.code]);
    offsetMs = 61_000;
    try {
      await inbound(gateway.id, secret, botChatUpdate({ userId: 42, username: 'alice', text: 'anyone?' }));
    } finally {
      offsetMs = 0;
    }
    await expect.poll(() => platform.sent().filter((m) => m.chatId === '42').length, { timeout: 10_000 }).toBe(2);
    expect(platform.sent().filter((m) => m.chatId === '42')[1].text).toContain(code.code);

    await api(t, 'PATCH', `/v1/gateways/${gateway.id}`, { token: tok.admin, body: { enabled: false } });
    await new Promise((r) => setTimeout(r, 5100)); // the webhook route caches a gateway for up to 5 s
    expect((await inbound(gateway.id, secret, botChatUpdate({ userId: 77, username: 'bob', text: 'hi' }))).status).toBe(200);
    expect((await codesOf(gateway.id)).map((c) => c.externalUserId)).toEqual(['42']);
  }, 30_000);

  it('keeps at most 3 pending codes per gateway, one new code per user per 10 minutes, and expires codes after an hour', async () => {
    const { gateway, secret } = await registered();
    for (const id of [1, 2, 3, 4]) await inbound(gateway.id, secret, botChatUpdate({ userId: id, username: `u${id}`, text: 'hi' }));
    const codes = await codesOf(gateway.id);
    expect(codes.map((c) => c.externalUserId)).toEqual(['1', '2', '3']);
    expect(new Set(codes.map((c) => c.code)).size).toBe(3);

    // A denied user cannot get a new code at once.
    expect((await api(t, 'DELETE', `/v1/gateways/${gateway.id}/pairing-codes/${codes[0].code}`, { token: tok.admin })).status).toBe(204);
    await inbound(gateway.id, secret, botChatUpdate({ userId: 1, username: 'u1', text: 'again' }));
    expect((await codesOf(gateway.id)).map((c) => c.externalUserId)).toEqual(['2', '3']);

    // An hour later the codes are gone: not listed, not approvable; users may ask again.
    offsetMs = 3600_000 + 1000;
    // A token that is valid an hour from now, for the service's clock.
    const later = Math.floor((Date.now() + offsetMs) / 1000);
    const admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'], iatS: later, expS: later + 900 });
    try {
      expect(await codesOf(gateway.id, admin)).toEqual([]);
      expect((await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/${codes[1].code}/approve`, { token: admin })).status).toBe(404);
      await inbound(gateway.id, secret, botChatUpdate({ userId: 1, username: 'u1', text: 'later' }));
      expect((await codesOf(gateway.id, admin)).map((c) => c.externalUserId)).toEqual(['1']);
    } finally {
      offsetMs = 0;
    }
  });

  it('approves atomically (paired user, code consumed, event, audit), 404 for a used code, and unpairing makes the user pair again', async () => {
    const { gateway, secret } = await registered();
    const sse = await openSse(`${t.url}/v1/gateways/${gateway.id}/events`, { authorization: `Bearer ${tok.admin}` });
    await inbound(gateway.id, secret, botChatUpdate({ userId: 500, username: 'carol', firstName: 'Carol', text: 'hi' }));
    const [code] = await codesOf(gateway.id);
    await sse.until((e) => e.data.kind === 'pairing.code_created' && e.data.codes.some((c: any) => c.code === code.code), 5000);

    const started = Date.now();
    const approved = await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/${code.code.toLowerCase()}/approve`, { token: tok.admin });
    expect(approved.status).toBe(200);
    expect(approved.json).toEqual({ ok: true, user: { externalUserId: '500', externalUserName: 'carol' } });
    await sse.until((e) => e.data.kind === 'pairing.code_approved', 2000);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(sse.events.find((e) => e.data.kind === 'pairing.code_approved')!.data).toEqual({ kind: 'pairing.code_approved', gatewayId: gateway.id, userId: '500' });
    await sse.close();

    expect(await codesOf(gateway.id)).toEqual([]);
    const paired = await api(t, 'GET', `/v1/gateways/${gateway.id}/paired-users`, { token: tok.admin });
    expect(paired.json.pairedUsers).toEqual([{ id: expect.any(String), gatewayId: gateway.id, externalUserId: '500', externalUserName: 'carol', platformDisplayName: 'Carol', pairedAt: expect.any(String) }]);
    expect((await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/${code.code}/approve`, { token: tok.admin })).status).toBe(404);
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=pairing.approve', { token: tok.owner });
    expect(audit.json.entries[0]).toMatchObject({ target: `gateway:${gateway.id}`, userId: acme.ids.ada });
    expect(JSON.stringify(audit.json)).not.toContain(code.code);

    expect((await api(t, 'DELETE', `/v1/gateways/${gateway.id}/paired-users/500`, { token: tok.admin })).status).toBe(204);
    expect((await api(t, 'GET', `/v1/gateways/${gateway.id}/paired-users`, { token: tok.admin })).json.pairedUsers).toEqual([]);
    await inbound(gateway.id, secret, botChatUpdate({ userId: 500, username: 'carol', text: 'back' }));
    expect((await codesOf(gateway.id)).map((c) => c.externalUserId)).toEqual(['500']);
  });

  it('rate-limits repeated failed approvals of a gateway', async () => {
    const { gateway } = await registered();
    for (let i = 0; i < 10; i++) {
      expect((await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/ZZZZZZZ${i + 2}/approve`, { token: tok.admin })).status).toBe(404);
    }
    const limited = await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/ZZZZZZZZ/approve`, { token: tok.admin });
    expect(limited.status).toBe(429);
    expect(limited.json.error).toBe('rate_limited');
  });

  it('rotates the bot token (later messages use the new one) and deletes a gateway with its codes and paired users', async () => {
    const { gateway, secret } = await registered();
    await inbound(gateway.id, secret, botChatUpdate({ userId: 900, username: 'dave', text: 'hi' }));
    const [code] = await codesOf(gateway.id);
    await api(t, 'POST', `/v1/gateways/${gateway.id}/pairing-codes/${code.code}/approve`, { token: tok.admin });
    const rotated = await api(t, 'PATCH', `/v1/gateways/${gateway.id}`, { token: tok.admin, body: { botToken: '123456:rotated-token' } });
    expect(rotated.status).toBe(200);
    expect(rotated.text).not.toContain('rotated-token');
    await inbound(gateway.id, secret, botChatUpdate({ userId: 901, username: 'erin', text: 'hi' }));
    await expect.poll(() => platform.calls.some((c) => c.path.includes('/bot123456:rotated-token/sendMessage')), { timeout: 10_000 }).toBe(true);

    expect((await api(t, 'DELETE', `/v1/gateways/${gateway.id}`, { token: tok.admin })).status).toBe(204);
    const { rows } = await t.opened.db.query(
      `select (select count(*)::int from pairing_codes where gateway_id = $1) as codes, (select count(*)::int from paired_users where gateway_id = $1) as users`,
      [gateway.id],
    );
    expect(rows[0]).toEqual({ codes: 0, users: 0 });
    expect((await api(t, 'GET', `/v1/gateways/${gateway.id}/pairing-codes`, { token: tok.admin })).status).toBe(404);
  });
});

describe(`gateways in local development, without an API key (${DB_MODE})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_API_KEY: '', AGENTWS_OPERATOR_EMAIL: 'owner@acme.example' } });
  });
  afterAll(() => t?.close());

  it('bypasses authentication on gateway routes (acting as the operator) and says so in /v1/auth/status', async () => {
    await seedTenant(t, 'acme');
    expect((await api(t, 'GET', '/v1/auth/status')).json.auth.gatewaysProtected).toBe(false);
    const created = await api(t, 'POST', '/v1/gateways', { body: { kind: 'team_chat', botToken: 'secret-token', botUsername: 'acme', botId: 'bot-1' } });
    expect(created.status).toBe(201);
    expect((await api(t, 'GET', '/v1/gateways')).json.gateways).toHaveLength(1);
    // Other routes still need a caller.
    expect((await api(t, 'GET', '/v1/sessions')).status).toBe(401);
  });
});
