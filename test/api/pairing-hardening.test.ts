import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The pairing lockout counts distinct wrong codes per caller and gateway, and
 * pairing data is kept per tenant (finding 15).
 */
describe(`pairing: guessing limits per caller, tenant isolation (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  let platform: FakeChatPlatform;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let nextUser = 1000;

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    t = await startTestApp({ vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url } });
    acme = await seedTenant(t, 'acme', [{ handle: 'ada', roles: ['admin'] }]);
    const beta = await seedTenant(t, 'beta');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
  });
  afterAll(async () => {
    await t?.close();
    await platform?.close();
  });

  async function gateway(token = tok.admin) {
    const g = await api(t, 'POST', '/v1/gateways', { token, body: { kind: 'bot_chat', botToken: `123456:${crypto.randomUUID()}`, botUsername: 'acme_bot', botId: '123456' } });
    expect(g.status, g.text).toBe(201);
    const reg = await api(t, 'POST', `/v1/gateways/${g.json.id}/webhook/register`, { token, body: { webhookUrl: 'https://8.8.8.8/agentws/hook' } });
    expect(reg.status, reg.text).toBe(200);
    return { id: g.json.id as string, secret: platform.webhooks().at(-1)!.secret };
  }
  /** A chat user writes to the bot; returns the pairing code they were given. */
  async function codeFor(g: { id: string; secret: string }, token = tok.admin): Promise<string> {
    const userId = nextUser++;
    const res = await fetch(`${t.url}/v1/gateways/${g.id}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': g.secret },
      body: JSON.stringify(botChatUpdate({ userId, username: `u${userId}`, text: 'hi' })),
    });
    expect(res.status).toBe(200);
    const codes = (await api(t, 'GET', `/v1/gateways/${g.id}/pairing-codes`, { token })).json.codes as Array<{ code: string; externalUserId: string }>;
    return codes.find((c) => c.externalUserId === String(userId))!.code;
  }
  const approve = (gatewayId: string, code: string, token = tok.admin) => api(t, 'POST', `/v1/gateways/${gatewayId}/pairing-codes/${code}/approve`, { token });

  it('does not count concurrent approvals of one valid code as guesses: a wrong code and a valid approval still work', async () => {
    const g = await gateway();
    const code = await codeFor(g);
    const results = await Promise.all(Array.from({ length: 10 }, () => approve(g.id, code)));
    expect(results.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(404)]);
    // The same code again (already used) and one wrong code: 404, then a valid approval goes through.
    expect((await approve(g.id, code)).status).toBe(404);
    expect((await approve(g.id, 'WRONGCD2')).status).toBe(404);
    const second = await codeFor(g);
    const ok = await approve(g.id, second);
    expect(ok.status, ok.text).toBe(200);

    // Every failure is audited, the wrong code only as a keyed hash.
    const failed = await t.opened.db.query<{ details: Record<string, string> }>(`select details from audit_log where action = 'pairing.approve_failed' and target = $1`, [`gateway:${g.id}`]);
    expect(failed.rows).toHaveLength(11);
    expect(failed.rows.filter((r) => r.details.codeHash)).toHaveLength(1);
    expect(JSON.stringify(failed.rows)).not.toContain('WRONGCD2');
    expect(JSON.stringify(failed.rows)).not.toContain(code);
  });

  it('locks out a caller after 10 distinct wrong codes on a gateway, but not another caller, and not for repeats', async () => {
    const g = await gateway();
    const valid = await codeFor(g);
    // One wrong code tried many times is one guess.
    for (let i = 0; i < 12; i++) expect((await approve(g.id, 'SAMEWRNG')).status).toBe(404);
    for (let i = 0; i < 9; i++) expect((await approve(g.id, `ZZZZZZZ${i + 2}`)).status).toBe(404);
    const limited = await approve(g.id, valid);
    expect(limited.status).toBe(429);
    expect(limited.json.error).toBe('rate_limited');
    // Another caller (the owner) is not locked out by the admin's guesses.
    const other = await approve(g.id, valid, tok.owner);
    expect(other.status, other.text).toBe(200);
    // The lockout is per gateway: the admin still approves on another gateway.
    const g2 = await gateway();
    expect((await approve(g2.id, await codeFor(g2))).status).toBe(200);
    // And the operator's CLI is its own caller too.
    const cliCode = await codeFor(g);
    const cli = await runCommand(['pair', 'approve', cliCode, '--tenant', 'acme', '--json'], { env: t.env });
    expect(cli.code, cli.stderr).toBe(0);
    expect((await approve(g.id, await codeFor(g))).status).toBe(429);
  });

  it('keeps pairing codes and paired users with their tenant, and another tenant reaches none of them', async () => {
    const g = await gateway();
    const code = await codeFor(g);
    // Another tenant cannot approve, deny or list it, even naming the gateway.
    expect((await approve(g.id, code, tok.beta)).status).toBe(404);
    expect((await api(t, 'DELETE', `/v1/gateways/${g.id}/pairing-codes/${code}`, { token: tok.beta })).status).toBe(404);
    expect((await api(t, 'GET', `/v1/gateways/${g.id}/pairing-codes`, { token: tok.beta })).status).toBe(404);
    expect((await approve(g.id, code)).status).toBe(200);
    const { rows } = await t.opened.db.query<{ codes: string[]; users: string[] }>(
      `select (select array_agg(distinct tenant_id::text) from pairing_codes where gateway_id = $1) as codes,
              (select array_agg(distinct tenant_id::text) from paired_users where gateway_id = $1) as users`,
      [g.id],
    );
    expect(rows[0]).toEqual({ codes: [acme.tenantId], users: [acme.tenantId] });
    // The database refuses a code whose tenant is not its gateway's.
    const { rows: beta } = await t.opened.db.query<{ id: string }>(`select id from tenants where slug = 'beta'`);
    await expect(
      t.opened.db.query(`insert into pairing_codes (tenant_id, gateway_id, code, external_user_id, chat_id, expires_at) values ($1, $2, 'ABCDEFGH', 'x', 'x', now() + interval '1 hour')`, [beta[0].id, g.id]),
    ).rejects.toThrow(/foreign key/);
  });
});
