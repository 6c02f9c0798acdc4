import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChatUpdate, signTeamChat, startFakeChatPlatform, teamChatActivity, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { applyScriptedProvider, openSse, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The whole loop of the gateways issue: a chat user writes to the bot, gets a pairing code, an on-call
 * engineer approves it with `aws pair approve` (a real subprocess), the approval reaches a stream client
 * at once, and from then on the chat user talks to an agent (real runtime, scripted model) whose answer
 * goes back through the (fake) platform.
 */
describe.runIf(DB_MODE === 'postgres')('gateway loop: pairing to agent and back', () => {
  let r: RuntimeApp;
  let platform: FakeChatPlatform;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    r = await startRuntimeApp({ vars: { AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url } });
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
  }, 120_000);
  afterAll(async () => {
    await r?.close();
    await platform?.close();
  });

  const register = async (kind: 'bot_chat' | 'team_chat') => {
    const g = await api(r.t, 'POST', '/v1/gateways', { token: people.tokens.owner, body: { kind, botToken: `987654:tok-${kind}-1234567890`, botUsername: `acme_${kind}`, botId: `bot-${kind}` } });
    await api(r.t, 'POST', `/v1/gateways/${g.json.id}/webhook/register`, { token: people.tokens.owner, body: { webhookUrl: 'https://8.8.8.8/hook' } });
    return { id: g.json.id as string, secret: platform.webhooks().at(-1)!.secret };
  };

  it('bot_chat: code to the user, approved from the terminal, pushed to the stream, then the agent answers in the chat', async () => {
    const g = await register('bot_chat');
    const post = (body: unknown) =>
      fetch(`${r.t.url}/v1/gateways/${g.id}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': g.secret }, body: JSON.stringify(body) });
    const sse = await openSse(`${r.t.url}/v1/gateways/${g.id}/events`, { authorization: `Bearer ${people.tokens.owner}` });

    expect((await post(botChatUpdate({ userId: 4242, username: 'alice', firstName: 'Alice', text: 'hello bot' }))).status).toBe(200);
    await expect.poll(() => platform.sent().find((m) => m.chatId === '4242')?.text ?? '', { timeout: 10_000 }).toMatch(/[A-Z2-9]{8}/);
    const code = /([ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8})/.exec(platform.sent().find((m) => m.chatId === '4242')!.text)![1];
    await sse.until((e) => e.data.kind === 'pairing.code_created' && e.data.codes.some((c: any) => c.code === code), 5000);

    const cli = runCommand(['pair', 'approve', code, '--tenant', 'acme', '--json'], { env: r.t.env });
    await sse.until((e) => e.data.kind === 'pairing.code_approved', 30_000);
    const seenAt = Date.now();
    const res = await cli;
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ ok: true, user: { externalUserId: '4242', externalUserName: 'alice' } });
    // Pushed through the database notification (not found by the 2 s poll): within 200 ms of the approval.
    const { rows } = await r.t.opened.db.query<{ at: Date }>(`select consumed_at as at from pairing_codes where code = $1`, [code]);
    expect(seenAt - rows[0].at.getTime()).toBeLessThan(200);
    await sse.close();

    r.llm.script([{ text: 'Hello Alice, the agent here.' }]);
    expect((await post(botChatUpdate({ userId: 4242, username: 'alice', text: 'what can you do?' }))).status).toBe(200);
    await expect.poll(() => platform.sent().filter((m) => m.chatId === '4242').map((m) => m.text), { timeout: 45_000, interval: 250 }).toContain('Hello Alice, the agent here.');
    expect(JSON.stringify(r.llm.requests.at(-1)!.body.messages)).toContain('what can you do?');

    // The turn is accounted to the gateway's channel.
    await expect
      .poll(async () => (await r.t.opened.db.query(`select channel from usage_records where channel = 'bot_chat'`)).rows.length, { timeout: 15_000 })
      .toBeGreaterThan(0);
    const prompts = await api(r.t, 'GET', '/v1/admin/audit-log?action=agent.prompt', { token: people.tokens.owner });
    expect(prompts.json.entries[0]).toMatchObject({ channel: 'bot_chat' });
  }, 120_000);

  it('bot_chat: a turn lost with its runtime is not left unanswered: the chat user is told to send it again', async () => {
    // Alice was paired with the bot_chat gateway by the first test.
    const g = (await r.t.opened.db.query<{ id: string }>(`select id from gateways where kind = 'bot_chat' limit 1`)).rows[0];
    const secret = platform.webhooks().find((w) => w.kind === 'bot_chat')!.secret;
    const before = r.llm.requests.filter((q) => !q.title).length;
    // The model takes its time: the runtime is killed while the turn waits for it.
    r.llm.script([{ text: 'never delivered', delayMs: 60_000 }]);
    const res = await fetch(`${r.t.url}/v1/gateways/${g.id}/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
      body: JSON.stringify(botChatUpdate({ userId: 4242, username: 'alice', text: 'take your time' })),
    });
    expect(res.status).toBe(200);
    await expect.poll(() => r.llm.requests.filter((q) => !q.title).length, { timeout: 45_000 }).toBeGreaterThan(before);
    const { rows } = await r.t.opened.db.query<{ pid: number }>(
      `select r.pid from agent_runtimes r join agent_sessions s on s.owner_id = r.user_id where s.channel = 'bot_chat' limit 1`,
    );
    process.kill(rows[0].pid, 'SIGKILL');
    await expect
      .poll(() => platform.sent().filter((m) => m.chatId === '4242').map((m) => m.text), { timeout: 30_000, interval: 250 })
      .toContain('Your last message was not fully answered: the agent stopped during the turn. Send it again to retry.');
    expect(platform.sent().some((m) => m.text === 'never delivered')).toBe(false);
  }, 120_000);

  it('team_chat: HMAC-signed activities; a wrong signature is 401 and stores nothing', async () => {
    const g = await register('team_chat');
    const send = (activity: unknown, secret = g.secret) => {
      const raw = JSON.stringify(activity);
      return fetch(`${r.t.url}/v1/gateways/${g.id}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: signTeamChat(secret, Buffer.from(raw)) }, body: raw });
    };
    expect((await send(teamChatActivity({ userId: 'aad-1', userName: 'Bob', text: 'hi' }), 'wrong-secret')).status).toBe(401);
    expect((await api(r.t, 'GET', `/v1/gateways/${g.id}/pairing-codes`, { token: people.tokens.owner })).json.codes).toEqual([]);
    expect((await send(teamChatActivity({ userId: 'aad-1', userName: 'Bob', text: 'hi' }))).status).toBe(200);
    const codes = (await api(r.t, 'GET', `/v1/gateways/${g.id}/pairing-codes`, { token: people.tokens.owner })).json.codes;
    expect(codes).toEqual([expect.objectContaining({ externalUserId: 'aad-1', externalUserName: 'Bob' })]);
    await expect.poll(() => platform.sent().some((m) => m.kind === 'team_chat' && m.text.includes(codes[0].code)), { timeout: 10_000 }).toBe(true);
  }, 60_000);
});
