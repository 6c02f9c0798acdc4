import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { managedConfigDir, runtimeRoot } from '../../src/core/runtime/host/managed-config.js';
import { api, signToken } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Every model call that reaches the provider is counted and capped, whatever the agent sends.
 * The agent can read its own gateway credential (its runtime's configuration, through the runtime's API
 * and the password every process of the sandbox can read), so it can call the gateway itself: streamed
 * without asking for usage, naming a session that runs no turn, in a loop. Real sandboxed runtime, the
 * scripted model as the provider; what the provider billed is compared with what usage_records hold.
 */
const PRICE = { input: 2 / 1e6, output: 8 / 1e6 };
const MARK = 'HOSTILE-CALL';

// Reads the runtime password from /proc, the gateway credential and URL from the runtime's /config, then
// calls the gateway `n` times as the agent pleases; prints the HTTP status of each call, counted.
const hostileLoop = (n: number) =>
  [
    `pw=$(for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep -a '^OPENCODE_SERVER_PASSWORD=' | head -1 | cut -d= -f2-)`,
    `set -- $(curl -s --noproxy '*' -u "opencode:$pw" http://127.0.0.1:4096/config | python3 -c 'import json,sys; p=next(iter(json.load(sys.stdin)["provider"].values()))["options"]; print(p["apiKey"], p["baseURL"])')`,
    `pad=$(head -c 3000 /dev/zero | tr '\\0' x)`,
    `for i in $(seq ${n}); do curl -s -o /dev/null -w 'status=%{http_code}\\n' -H "authorization: Bearer $1" -H 'x-session-id: ses_forged' -H 'content-type: application/json' -d "{\\"model\\":\\"fake-model\\",\\"stream\\":true,\\"messages\\":[{\\"role\\":\\"user\\",\\"content\\":\\"${MARK} $i $pad\\"}]}" "$2/chat/completions"; done | sort | uniq -c`,
  ].join('\n');

describe.runIf(DB_MODE === 'postgres')('model calls: counted and capped whatever the agent sends (real sandboxed runtime)', { timeout: 180_000 }, () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'spend');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // The agent's own calls bill what their text holds and as much output as they are allowed.
    r.llm.respond((q) => (q.lastUser.includes(MARK) ? { text: 'expensive answer', usage: { prompt: Math.ceil(JSON.stringify(q.body.messages).length / 4), completion: 2000 } } : undefined));
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  async function metered(name: string, cost: Record<string, number>) {
    const { tokens, tenantId } = people;
    const role = await api(r.t, 'POST', '/v1/admin/roles', { token: tokens.owner, body: { name, permissions: { agents: { create: true }, tools: { allowed: '*' }, cost } } });
    expect(role.status, role.text).toBe(201);
    const { rows } = await r.t.opened.db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, $2, $3) returning id`, [tenantId, name, `${name}@spend.example`]);
    await api(r.t, 'POST', `/v1/admin/users/${rows[0].id}/roles`, { token: tokens.owner, body: { roleId: role.json.role.id } });
    return { userId: rows[0].id, token: await signToken(r.t, { sub: rows[0].id, tid: tenantId, roles: [name] }) };
  }

  const recordsOf = async (userId: string) =>
    (await r.t.opened.db.query<{ cost: string; sessionId: string | null; estimated: boolean }>(`select cost_usd::text as cost, session_id as "sessionId", estimated from usage_records where user_id = $1`, [userId])).rows;

  it('records every call the provider answered, at what it billed, and holds the turn to its per-request limit', async () => {
    const user = await metered('metered', { monthly_limit_usd: 0.5, per_request_limit_usd: 0.05 });
    const before = r.llm.requests.length;
    const turn = await agentTurn(r, user.token, [{ toolCall: { name: 'bash', arguments: { command: hostileLoop(60), description: 'loop' } } }, { text: 'done' }]);
    const statuses = Object.fromEntries([...turn.output.matchAll(/(\d+) status=(\d+)/g)].map((m) => [m[2], Number(m[1])]));
    // Some of the agent's calls got through, the rest were refused by the limit (402), none slipped by.
    expect(statuses['200'], turn.output).toBeGreaterThanOrEqual(1);
    expect(statuses['402'], turn.output).toBeGreaterThanOrEqual(40);
    expect((statuses['200'] ?? 0) + (statuses['402'] ?? 0)).toBe(60);

    const answered = r.llm.requests.slice(before).filter((q) => q.billed);
    const hostile = answered.filter((q) => JSON.stringify(q.body.messages).includes(MARK));
    expect(hostile).toHaveLength(statuses['200']);
    // The gateway asked for the usage the agent did not ask for, and lowered what the budget could not pay.
    expect(hostile.every((q) => q.body.stream_options?.include_usage === true)).toBe(true);
    await expect.poll(async () => (await recordsOf(user.userId)).length, { timeout: 10_000 }).toBe(answered.length);
    const records = await recordsOf(user.userId);
    const billed = answered.reduce((n, q) => n + q.billed!.prompt * PRICE.input + q.billed!.completion * PRICE.output, 0);
    const recorded = records.reduce((n, x) => n + Number(x.cost), 0);
    expect(recorded).toBeCloseTo(billed, 6);
    // All of it counts against the turn (the forged session name ran no turn), which stays within $0.05.
    expect(new Set(records.map((x) => x.sessionId))).toEqual(new Set([turn.sessionId]));
    expect(recorded).toBeLessThanOrEqual(0.05 + 1e-9);
    expect(records.every((x) => !x.estimated)).toBe(true);
    const audit = await api(r.t, 'GET', '/v1/admin/audit-log?action=cost.limit_reached', { token: people.tokens.owner });
    expect(audit.json.entries).toEqual([expect.objectContaining({ userId: user.userId, sessionId: turn.sessionId })]);
  });

  it('holds a user to the monthly limit across turns', async () => {
    const user = await metered('monthly', { monthly_limit_usd: 0.2 });
    const before = r.llm.requests.length;
    const one = await agentTurn(r, user.token, [{ toolCall: { name: 'bash', arguments: { command: hostileLoop(8), description: 'loop' } } }, { text: 'done' }]);
    const two = await agentTurn(r, user.token, [{ toolCall: { name: 'bash', arguments: { command: hostileLoop(8), description: 'loop' } } }, { text: 'done' }]);
    expect(`${one.output}\n${two.output}`).toMatch(/\d+ status=402/);
    const answered = r.llm.requests.slice(before).filter((q) => q.billed);
    await expect.poll(async () => (await recordsOf(user.userId)).length, { timeout: 10_000 }).toBe(answered.length);
    const recorded = (await recordsOf(user.userId)).reduce((n, x) => n + Number(x.cost), 0);
    expect(recorded).toBeLessThanOrEqual(0.2 + 1e-9);
    expect(recorded).toBeGreaterThan(0.1);
  });

  it('the runtime prices a step whose prompt the provider mostly served from its cache as the gateway charges it (its configuration carries the cache prices)', async () => {
    const owner = people.tokens.owner;
    const models = [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096, inputCostPerMTok: 2, outputCostPerMTok: 8, cacheReadCostPerMTok: 0.5, cacheWriteCostPerMTok: 2.5 }];
    expect((await api(r.t, 'PATCH', '/v1/admin/providers/scripted', { token: owner, body: { models } })).status).toBe(200);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token: owner, body: {} })).status).toBe(200);
    // 10,000 prompt tokens, 8,000 of them read from the cache (inside prompt_tokens, as OpenAI counts them); 100 out.
    const turn = await agentTurn(r, people.tokens.member, [{ text: 'served from the cache', usage: { prompt: 10_000, cacheRead: 8000, completion: 100 } }]);

    // What the member's runtime was given: the prices as opencode reads them, cache prices included.
    const config = JSON.parse(readFileSync(join(managedConfigDir(runtimeRoot(r.t.env.dataDir, people.ids.mia)), 'opencode.json'), 'utf8'));
    const provider = Object.values(config.provider as Record<string, { models: Record<string, { cost: unknown }> }>)[0];
    expect(provider.models['fake-model'].cost).toEqual({ input: 2, output: 8, cache_read: 0.5, cache_write: 2.5 });

    // 2,000 x $2 + 8,000 x $0.50 + 100 x $8, per million: the runtime's own figure for the message (what the
    // person sees as the turn's cost) and the gateway's record agree.
    const expected = (2000 * 2 + 8000 * 0.5 + 100 * 8) / 1e6;
    const step = turn.messages.find((m) => m.info.role === 'assistant' && m.info.tokens?.cache?.read === 8000);
    expect(step?.info.tokens, JSON.stringify(turn.messages.map((m) => m.info))).toMatchObject({ input: 2000, output: 100, cache: { read: 8000, write: 0 } });
    expect(step!.info.cost).toBeCloseTo(expected, 12);
    await expect.poll(async () => (await r.t.opened.db.query(`select cost_usd::text as cost from usage_records where user_id = $1 and tokens_cache_read = 8000`, [people.ids.mia])).rows).toEqual([{ cost: '0.00880000' }]);
  });

  it('an Anthropic model through the runtime: cache reads and writes as Anthropic bills them, the runtime\'s figure and the record the same', async () => {
    const owner = people.tokens.owner;
    // No cache prices given: Anthropic's rule (reads $0.30, writes $3.75 for a $3 model).
    const add = await api(r.t, 'POST', '/v1/admin/providers', {
      token: owner,
      body: { name: 'claude', kind: 'anthropic', baseUrl: `${r.llm.url}/v1`, apiKey: 'sk-ant-scripted', models: [{ id: 'claude-sonnet', contextLimit: 200000, outputLimit: 4096, inputCostPerMTok: 3, outputCostPerMTok: 15 }] },
    });
    expect(add.status, add.text).toBe(201);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token: owner, body: {} })).status).toBe(200);
    expect((await api(r.t, 'POST', '/v1/admin/templates', { token: owner, body: { slug: 'claude', name: 'Claude', model: 'claude/claude-sonnet' } })).status).toBe(201);
    const session = await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'on claude', template_slug: 'claude' } });
    expect(session.status, session.text).toBe(201);
    const before = r.llm.requests.length;
    // 45,000 input tokens: 40,000 read from the cache, 3,000 written to it, 2,000 fresh (Anthropic's input_tokens); 300 out.
    const turn = await agentTurn(r, people.tokens.member, [{ text: 'cached claude', usage: { prompt: 45_000, cacheRead: 40_000, cacheWrite: 3000, completion: 300 } }], { sessionId: session.json.sessionId });
    expect(r.llm.requests.slice(before).filter((q) => !q.title).map((q) => q.path)).toEqual(['/v1/messages']);

    const config = JSON.parse(readFileSync(join(managedConfigDir(runtimeRoot(r.t.env.dataDir, people.ids.mia)), 'opencode.json'), 'utf8'));
    const claude = Object.entries(config.provider as Record<string, { models: Record<string, { cost: unknown }> }>).find(([id]) => id.endsWith('_claude'))![1];
    expect(claude.models['claude-sonnet'].cost).toEqual({ input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 });

    const expected = (2000 * 3 + 40_000 * 0.3 + 3000 * 3.75 + 300 * 15) / 1e6;
    const step = turn.messages.find((m) => m.info.role === 'assistant' && m.info.tokens?.cache?.read === 40_000);
    expect(step?.info.tokens, JSON.stringify(turn.messages.map((m) => m.info))).toMatchObject({ input: 2000, output: 300, cache: { read: 40_000, write: 3000 } });
    expect(step!.info.cost).toBeCloseTo(expected, 12);
    await expect
      .poll(async () => (await r.t.opened.db.query(`select tokens_input::int as input, tokens_cache_write::int as "cacheWrite", cost_usd::text as cost from usage_records where user_id = $1 and tokens_cache_read = 40000`, [people.ids.mia])).rows)
      .toEqual([{ input: 2000, cacheWrite: 3000, cost: '0.03375000' }]);
  });
});
