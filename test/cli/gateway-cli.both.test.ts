import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { botChatHeaders, botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { HAS_SCRIPT, runCommand, runInTerminal } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

const TOKEN = '123456:AAH-stdin-token-0123456789SECRET';
const FLAG_TOKEN = '654321:flag-token-visible-in-history';
const ROTATED = '123456:rotated-token-XYZ987';
const HOOK = 'https://8.8.8.8/agentws/hook';
const CODE = /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}$/;
const GATEWAY_KEYS = ['botId', 'botUsername', 'createdAt', 'enabled', 'id', 'kind', 'updatedAt', 'webhookUrl'];

// util-linux's `script` provides the terminal (Debian ships it in an essential package).

/**
 * The gateway, webhook and pair commands run in-process (the built CLI). The app runs in this process (on the
 * same database, which it also hosts in embedded mode), so chat messages can arrive at its webhook
 * route while the commands act on what they leave behind; the chat platform is the loopback fake.
 */
describe(`gateway, webhook and pair commands (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  let platform: FakeChatPlatform;
  const run = (args: string[], input?: string) => runCommand([...args, '--tenant', 'acme'], { env: t.env, input });
  const sealed = async (id: string) => (await t.opened.db.query<{ token: string; secret: string | null }>(`select bot_token_sealed as token, webhook_secret_sealed as secret from gateways where id = $1`, [id])).rows[0];
  const open = (s: string) => createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]).open(s);
  let gatewayId = '';
  let secret = '';

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    t = await startTestApp({ vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url } });
    await seedTenant(t, 'acme');
    await seedTenant(t, 'beta');
  });
  afterAll(async () => {
    await t?.close();
    await platform?.close();
  });

  it('gateway create: token from stdin stored sealed, --bot-token warns, no terminal and no token fails; list never shows secrets', async () => {
    const r = await run(['gateway', 'create', '--kind', 'bot_chat', '--bot-username', 'acme_bot', '--bot-id', '123456', '--bot-token-stdin', '--json'], `${TOKEN}\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/Warning/);
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
    const { gateway } = JSON.parse(r.stdout);
    expect(Object.keys(gateway).sort()).toEqual(GATEWAY_KEYS);
    expect(gateway).toMatchObject({ kind: 'bot_chat', botUsername: 'acme_bot', botId: '123456', webhookUrl: '', enabled: true });
    gatewayId = gateway.id;
    const row = await sealed(gatewayId);
    expect(row.token).toMatch(/^v1\./);
    expect(row.token).not.toContain(TOKEN.split(':')[1]);
    expect(open(row.token)).toBe(TOKEN);

    const flag = await run(['gateway', 'create', '--kind', 'team_chat', '--bot-username', 'team_bot', '--bot-id', '28:team', '--bot-token', FLAG_TOKEN, '--json']);
    expect(flag.code, flag.stderr).toBe(0);
    expect(flag.stderr).toMatch(/Warning: --bot-token may be recorded in your shell history; prefer piping it: .*--bot-token-stdin/);
    expect(JSON.parse(flag.stdout).gateway).toMatchObject({ kind: 'team_chat', botUsername: 'team_bot' });

    const none = await run(['gateway', 'create', '--kind', 'bot_chat', '--bot-username', 'other_bot', '--bot-id', '9']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/a bot token is needed, and there is no terminal to ask for it/);
    expect(none.stderr).toMatch(/Hint: Pipe it in: printf %s "\$BOT_TOKEN" \| npx aws gateway create .*--bot-token-stdin/);
    const empty = await run(['gateway', 'create', '--kind', 'bot_chat', '--bot-username', 'other_bot', '--bot-id', '9', '--bot-token-stdin', '--json'], '\n');
    expect(empty.code).toBe(1);
    expect(JSON.parse(empty.stdout)).toMatchObject({ error: 'validation_failed', message: '--bot-token-stdin was given but stdin was empty' });

    const list = await run(['gateway', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    const doc = JSON.parse(list.stdout);
    expect(Object.keys(doc)).toEqual(['gateways']);
    expect(doc.gateways.map((g: { botUsername: string }) => g.botUsername).sort()).toEqual(['acme_bot', 'team_bot']);
    for (const g of doc.gateways) expect(Object.keys(g).sort()).toEqual(GATEWAY_KEYS);
    expect(list.stdout).not.toContain(TOKEN);
    expect(list.stdout).not.toContain(FLAG_TOKEN);
    const human = await run(['gateway', 'list']);
    expect(human.stdout.split('\n')[0]).toMatch(/^ID\s+KIND\s+BOT\s+WEBHOOK\s+ENABLED\s+CREATED$/);
    expect(human.stdout).toMatch(new RegExp(`^${gatewayId}\\s+bot_chat\\s+@acme_bot\\s+-\\s+yes\\s+\\d{4}-`, 'm'));
    expect(JSON.parse((await runCommand(['gateway', 'list', '--tenant', 'beta', '--json'], { env: t.env })).stdout)).toEqual({ gateways: [] });
  });

  it('enable, disable and rotate-token by bot username; ambiguous and unknown names; delete', async () => {
    const off = await run(['gateway', 'disable', '@acme_bot', '--json']);
    expect(off.code, off.stderr).toBe(0);
    expect(JSON.parse(off.stdout).gateway).toMatchObject({ id: gatewayId, enabled: false });
    const on = await run(['gateway', 'enable', gatewayId]);
    expect(on.code, on.stderr).toBe(0);
    expect(on.stderr).toMatch(/is now enabled/);

    const rotated = await run(['gateway', 'rotate-token', 'acme_bot', '--bot-token-stdin', '--json'], ROTATED);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(JSON.parse(rotated.stdout)).toMatchObject({ gateway: { id: gatewayId, enabled: true }, rotated: true });
    expect(rotated.stdout + rotated.stderr).not.toContain(ROTATED);
    expect(open((await sealed(gatewayId)).token)).toBe(ROTATED);
    const noToken = await run(['gateway', 'rotate-token', 'acme_bot']);
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toMatch(/Hint: Pipe it in: .*gateway rotate-token acme_bot --bot-token-stdin/);

    // A second gateway with the same bot username: the name no longer says which one.
    const dup = await run(['gateway', 'create', '--kind', 'bot_chat', '--bot-username', 'acme_bot', '--bot-id', '777', '--bot-token-stdin', '--json'], '777:dup');
    const dupId = JSON.parse(dup.stdout).gateway.id as string;
    const ambiguous = await run(['gateway', 'disable', 'acme_bot']);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toMatch(/2 gateways have the bot username @acme_bot: name one by id/);
    expect(ambiguous.stderr).toContain(gatewayId);
    expect(ambiguous.stderr).toContain(dupId);
    const unknown = await run(['gateway', 'enable', 'nobody_bot']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/gateway "nobody_bot" not found/);

    // No terminal: deleting does not ask.
    const del = await run(['gateway', 'delete', dupId, '--json']);
    expect(del.code, del.stderr).toBe(0);
    expect(JSON.parse(del.stdout)).toEqual({ deleted: dupId });
    expect((await run(['gateway', 'delete', dupId])).code).toBe(1);
  });

  it('webhook register: refuses a private URL, fails when the platform is down, registers with a secret it never prints', async () => {
    const priv = await run(['webhook', 'register', 'acme_bot', 'https://10.1.2.3/hook']);
    expect(priv.code).toBe(1);
    expect(priv.stderr).toMatch(/Error: webhookUrl points to a private address \(10\.1\.2\.3\)/);
    const http = await run(['webhook', 'register', 'acme_bot', 'http://8.8.8.8/hook', '--json']);
    expect(http.code).toBe(1);
    expect(JSON.parse(http.stdout)).toMatchObject({ error: 'validation_failed', message: 'webhookUrl must use https' });

    await platform.setDown(true);
    const down = await run(['webhook', 'register', 'acme_bot', HOOK]).finally(() => platform.setDown(false));
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/Error: the bot_chat platform cannot be reached/);
    expect(down.stderr).not.toContain(ROTATED);
    expect((await sealed(gatewayId)).secret).toBeNull();

    const human = await run(['webhook', 'register', 'acme_bot', HOOK]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toBe(`${HOOK}\n`);
    const json = await run(['webhook', 'register', gatewayId, HOOK, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).gateway).toMatchObject({ id: gatewayId, webhookUrl: HOOK });
    const hook = platform.webhooks().at(-1)!;
    expect(hook).toMatchObject({ kind: 'bot_chat', url: HOOK, token: ROTATED });
    secret = hook.secret;
    for (const out of [human, json]) expect(out.stdout + out.stderr).not.toContain(secret);
    expect(open((await sealed(gatewayId)).secret!)).toBe(secret);
  });

  it('pair list, approve (twice: the second is not found), deny and revoke', async () => {
    for (const [userId, username] of [[42, 'alice'], [43, 'bob'], [44, 'carol']] as const) {
      const res = await fetch(`${t.url}/v1/gateways/${gatewayId}/webhook`, { method: 'POST', headers: botChatHeaders(secret), body: JSON.stringify(botChatUpdate({ userId, username, text: 'hi' })) });
      expect(res.status).toBe(200);
    }
    const list = await run(['pair', 'list', '--json']);
    expect(list.code, list.stderr).toBe(0);
    const codes = JSON.parse(list.stdout).codes as Array<Record<string, string>>;
    expect(codes.map((c) => c.externalUserName)).toEqual(['alice', 'bob', 'carol']);
    expect(codes[0]).toMatchObject({ gatewayId, code: expect.stringMatching(CODE), externalUserId: '42', gatewayKind: 'bot_chat', botUsername: 'acme_bot', consumedAt: null });
    const byGateway = JSON.parse((await run(['pair', 'list', 'acme_bot', '--json'])).stdout).codes;
    expect(byGateway).toEqual(codes);
    const human = await run(['pair', 'list']);
    expect(human.stdout.split('\n')[0]).toMatch(/^CODE\s+GATEWAY\s+USER\s+AGE\s+EXPIRES$/);
    expect(human.stdout).toMatch(new RegExp(`^${codes[0].code}\\s+@acme_bot \\(bot_chat\\)\\s+@alice \\(42\\)\\s+(just now|\\d+ s ago)\\s+in 59 min$`, 'm'));

    const noCode = await run(['pair', 'approve']);
    expect(noCode.code).toBe(1);
    expect(noCode.stderr).toMatch(/no pairing code given, and there is no terminal to choose one in/);

    // Typed the way someone reads it out: lower case, with a dash.
    const typed = `${codes[0].code.slice(0, 4)}-${codes[0].code.slice(4)}`.toLowerCase();
    const approve = await run(['pair', 'approve', typed, '--json']);
    expect(approve.code, approve.stderr).toBe(0);
    expect(JSON.parse(approve.stdout)).toEqual({ ok: true, gatewayId, user: { externalUserId: '42', externalUserName: 'alice' } });
    const again = await run(['pair', 'approve', codes[0].code]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/pairing code not found or expired/);
    const paired = await t.opened.db.query(`select external_user_id as id from paired_users where gateway_id = $1`, [gatewayId]);
    expect(paired.rows).toEqual([{ id: '42' }]);

    const deny = await run(['pair', 'deny', codes[1].code, '--gateway', 'acme_bot', '--json']);
    expect(deny.code, deny.stderr).toBe(0);
    expect(JSON.parse(deny.stdout)).toEqual({ ok: true, denied: codes[1].code });
    expect((await run(['pair', 'deny', codes[1].code])).code).toBe(1);
    expect(JSON.parse((await run(['pair', 'list', '--json'])).stdout).codes.map((c: { externalUserId: string }) => c.externalUserId)).toEqual(['44']);

    const revoke = await run(['pair', 'revoke', 'acme_bot', '42', '--json']);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect(JSON.parse(revoke.stdout)).toEqual({ ok: true, revoked: { gatewayId, externalUserId: '42' } });
    const revokeAgain = await run(['pair', 'revoke', 'acme_bot', '42']);
    expect(revokeAgain.code).toBe(1);
    expect(revokeAgain.stderr).toMatch(/paired user not found/);

    const actions = (await t.opened.db.query<{ a: string }>(`select action || ' ' || actor as a from audit_log where action like 'pairing.%' and actor = 'system:cli' order by ts`)).rows.map((r) => r.a);
    // (A code unknown in the whole tenant names no gateway, so no failed approval is counted against one.)
    expect(actions).toEqual(['pairing.approve system:cli', 'pairing.deny system:cli', 'pairing.revoke system:cli']);
    const all = await t.opened.db.query(`select details::text as d from audit_log`);
    for (const r of all.rows) for (const s of [TOKEN, ROTATED, FLAG_TOKEN, secret]) expect(r.d).not.toContain(s);
  });

  // The terminal path is the same on both databases; it runs once, on the embedded one.
  it.runIf(DB_MODE === 'embedded' && HAS_SCRIPT)('in a terminal: pair approve picks from the pending codes; gateway delete asks first', async () => {
    const pending = JSON.parse((await run(['pair', 'list', '--json'])).stdout).codes as Array<Record<string, string>>;
    expect(pending).toHaveLength(1);
    const pick = await inTerminal(['pair', 'approve', '--tenant', 'acme'], [[/Approve which pairing code\?/, '\r']]);
    expect(pick.code, pick.out).toBe(0);
    expect(pick.out).toMatch(new RegExp(`${pending[0].code}  @carol \\(44\\) via @acme_bot \\(bot_chat\\)  (just now|\\d+ (s|min) ago)`));
    expect(pick.out).toMatch(/paired @carol \(44\) with gateway/);
    const paired = await t.opened.db.query(`select external_user_id as id from paired_users where gateway_id = $1`, [gatewayId]);
    expect(paired.rows).toEqual([{ id: '44' }]);

    const none = await inTerminal(['pair', 'approve', '--tenant', 'acme'], []);
    expect(none.code, none.out).toBe(0);
    expect(none.out).toMatch(/No pending pairing codes\./);

    const no = await inTerminal(['gateway', 'delete', 'acme_bot', '--tenant', 'acme'], [[/Delete gateway @acme_bot/, 'n\r']]);
    expect(no.code, no.out).toBe(1);
    expect(no.out).toMatch(/paired users and pending pairing codes are removed too/);
    expect(no.out).toMatch(/Nothing was deleted/);
    expect((await sealed(gatewayId)).token).toMatch(/^v1\./);
  });

  const inTerminal = (args: string[], answers: Array<[RegExp, string]>) => runInTerminal(t.env, args, answers);

});
