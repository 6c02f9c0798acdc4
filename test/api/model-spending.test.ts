import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, signToken } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * Every model call that reaches the provider is counted and capped, whatever the agent sends (issue 24).
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
});
