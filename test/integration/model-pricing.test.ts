import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateInputTokens } from '../../src/core/llm-gateway/model-call-fns.js';
import { GATEWAY_HOST } from '../../src/core/runtime/host/agent-endpoints.js';
import type { ProxyListener } from '../../src/core/runtime/host/egress-proxy.js';
import { UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';

/**
 * Prompt caching charged as the provider bills it, through the real LLM gateway of the app
 * (a runtime's egress proxy listener on a Unix socket, as a sandbox reaches it), the real spending
 * service and usage records on the database, and the scripted provider speaking both wire formats: an
 * Anthropic stream whose input_tokens leave out the cache reads and writes it reports beside them, and an
 * OpenAI one whose prompt_tokens include the cached_tokens it reports inside. What is recorded is what
 * the provider would bill, to the cent's ten-thousandth and beyond (usage_records.cost_usd keeps eight
 * decimals); the cost limits count that; the digest, the API and the CLI show tokens by kind.
 */
const CREDENTIAL = 'rt_pricing_credential_0123456789';

describe('prompt caching priced as the provider bills it (real gateway, spending and usage records)', () => {
  let t: TestApp;
  let llm: FakeLlm;
  let dir: string;
  let tenantId: string;
  let ids: Record<string, string>;
  let owner: string;
  const listeners: ProxyListener[] = [];

  beforeAll(async () => {
    t = await startTestApp();
    llm = await startFakeLlm();
    dir = mkdtempSync(join(tmpdir(), 'aws-pricing-'));
    const seeded = await seedTenant(t, 'pricing', [
      { handle: 'cal', roles: ['member'] },
      { handle: 'lim', roles: [] },
    ]);
    tenantId = seeded.tenantId;
    ids = seeded.ids;
    owner = await signToken(t, { sub: ids.owner, tid: tenantId, roles: ['owner'] });
    // Claude Sonnet's list prices with no cache prices given: Anthropic's rule (reads $0.30, writes $3.75,
    // one-hour writes $6). gpt-4.1 with OpenAI's cached-input price.
    for (const body of [
      { name: 'claude', kind: 'anthropic', baseUrl: `${llm.url}/v1`, apiKey: 'sk-ant-scripted', models: [{ id: 'claude-sonnet', inputCostPerMTok: 3, outputCostPerMTok: 15 }] },
      { name: 'gpt', kind: 'openai', baseUrl: `${llm.url}/v1`, apiKey: 'sk-openai-scripted', models: [{ id: 'gpt-4.1', inputCostPerMTok: 2, outputCostPerMTok: 8, cacheReadCostPerMTok: 0.5 }] },
    ]) {
      const r = await api(t, 'POST', '/v1/admin/providers', { token: owner, body });
      expect(r.status, r.text).toBe(201);
    }
    const applied = await api(t, 'POST', '/v1/admin/runtime/apply', { token: owner, body: { defaultModel: 'claude/claude-sonnet' } });
    expect(applied.status, applied.text).toBe(200);
    const role = await api(t, 'POST', '/v1/admin/roles', { token: owner, body: { name: 'capped', permissions: { agents: { create: true }, cost: { monthly_limit_usd: 0.03 } } } });
    expect(role.status, role.text).toBe(201);
    expect((await api(t, 'POST', `/v1/admin/users/${ids.lim}/roles`, { token: owner, body: { roleId: role.json.role.id } })).status).toBe(200);
  });

  afterAll(async () => {
    for (const l of listeners) await l.close();
    await llm?.close();
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The gateway as one user's runtime reaches it: its own proxy listener, its own credential. */
  async function runtimeOf(handle: string): Promise<string> {
    const path = join(dir, `${handle}.sock`);
    listeners.push(await t.opened.core.egress.listen({ tenantId, userId: ids[handle], credential: CREDENTIAL, self: UNKNOWN_SELF }, { path }));
    return path;
  }

  function call(socketPath: string, path: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath, method: 'POST', path: `http://${GATEWAY_HOST}${path}`, headers: { host: GATEWAY_HOST, 'content-type': 'application/json', ...headers }, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  const claudeCall = (sock: string, body: Record<string, unknown>) => call(sock, '/p/claude/messages', { 'x-api-key': CREDENTIAL, 'anthropic-version': '2023-06-01' }, JSON.stringify({ model: 'claude-sonnet', ...body }));
  const gptCall = (sock: string, body: Record<string, unknown>) => call(sock, '/p/gpt/chat/completions', { authorization: `Bearer ${CREDENTIAL}` }, JSON.stringify({ model: 'gpt-4.1', ...body }));

  interface RecordRow {
    model: string;
    input: string;
    output: string;
    cacheRead: string;
    cacheWrite: string;
    cost: string;
    estimated: boolean;
  }
  const recordsOf = async (userId: string) =>
    (
      await t.opened.db.query<RecordRow>(
        `select model, tokens_input::text as input, tokens_output::text as output, tokens_cache_read::text as "cacheRead", tokens_cache_write::text as "cacheWrite",
                cost_usd::text as cost, estimated
           from usage_records where user_id = $1 order by created_at, id`,
        [userId],
      )
    ).rows;

  it('an Anthropic stream with cache reads and writes (one-hour writes apart) is charged exactly what Anthropic bills', async () => {
    const sock = await runtimeOf('cal');
    // 45,000 input tokens: 40,000 read from the cache, 3,000 written (2,000 to the one-hour cache), 2,000 fresh; 300 out.
    llm.script([{ text: 'Cached and cheap.', usage: { prompt: 45_000, cacheRead: 40_000, cacheWrite: 3000, cacheWriteLong: 2000, completion: 300 } }]);
    const r = await claudeCall(sock, { max_tokens: 1024, stream: true, system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }], messages: [{ role: 'user', content: 'Hi' }] });
    expect(r.status, r.text).toBe(200);
    expect(r.text).toContain('"cache_read_input_tokens":40000');
    expect(llm.requests.at(-1)!.authorization).toBe('sk-ant-scripted');
    await expect.poll(async () => (await recordsOf(ids.cal)).length).toBe(1);
    // 2,000 x $3 + 40,000 x $0.30 + 1,000 x $3.75 + 2,000 x $6 + 300 x $15, per million: $0.03825 (every input token at $3 would say $0.1395).
    expect((await recordsOf(ids.cal))[0]).toEqual({ model: 'claude-sonnet', input: '2000', output: '300', cacheRead: '40000', cacheWrite: '3000', cost: '0.03825000', estimated: false });

    // The same answer unstreamed (one JSON message): the same bill.
    llm.script([{ text: 'Cached and cheap.', usage: { prompt: 45_000, cacheRead: 40_000, cacheWrite: 3000, cacheWriteLong: 2000, completion: 300 } }]);
    expect((await claudeCall(sock, { max_tokens: 1024, messages: [{ role: 'user', content: 'Hi' }] })).status).toBe(200);
    await expect.poll(async () => (await recordsOf(ids.cal)).length).toBe(2);
    expect((await recordsOf(ids.cal))[1]).toMatchObject({ cacheRead: '40000', cacheWrite: '3000', cost: '0.03825000' });
  });

  it('an OpenAI stream whose prompt_tokens include its cached_tokens is charged the cached ones at the cached price, once', async () => {
    const sock = await runtimeOf('cal');
    llm.script([{ text: 'Mostly cached.', usage: { prompt: 10_000, cacheRead: 8000, completion: 20 } }]);
    // The agent's own call, without stream_options: the gateway asks for the usage report.
    const r = await gptCall(sock, { stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    expect(r.status, r.text).toBe(200);
    expect(r.text).toContain('"prompt_tokens_details":{"cached_tokens":8000}');
    await expect.poll(async () => (await recordsOf(ids.cal)).length).toBe(3);
    // 2,000 x $2 + 8,000 x $0.50 + 20 x $8, per million: $0.00816 (all 10,000 at $2 would say $0.02016).
    expect((await recordsOf(ids.cal))[2]).toEqual({ model: 'gpt-4.1', input: '2000', output: '20', cacheRead: '8000', cacheWrite: '0', cost: '0.00816000', estimated: false });
  });

  it('cache prices through the API: set, shown as charged with the defaults settled, refused when not a price', async () => {
    const listed = await api(t, 'GET', '/v1/admin/providers', { token: owner });
    const claude = listed.json.providers.find((p: { name: string }) => p.name === 'claude');
    expect(claude.models).toEqual([{ id: 'claude-sonnet', inputCostPerMTok: 3, outputCostPerMTok: 15 }]);
    expect(claude.prices).toEqual({ 'claude-sonnet': { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75, cacheWriteLongPerMTok: 6 } });
    for (const bad of [-0.1, 'cheap']) {
      const r = await api(t, 'POST', '/v1/admin/providers', { token: owner, body: { name: 'bad', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, models: [{ id: 'm', cacheReadCostPerMTok: bad }] } });
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toBe('validation_failed');
      expect(r.text).toMatch(/cacheReadCostPerMTok/);
    }
    const patched = await api(t, 'PATCH', '/v1/admin/providers/gpt', { token: owner, body: { models: [{ id: 'gpt-4.1', inputCostPerMTok: 2, outputCostPerMTok: 8, cacheReadCostPerMTok: 0.5, cacheWriteCostPerMTok: 2 }] } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.provider.prices['gpt-4.1']).toEqual({ inputPerMTok: 2, outputPerMTok: 8, cacheReadPerMTok: 0.5, cacheWritePerMTok: 2, cacheWriteLongPerMTok: 4 });
  });

  it('the digest splits tokens by kind and totals the costs as billed: API, CLI JSON and CSV', async () => {
    const d = await api(t, 'GET', '/v1/admin/usage?since=1h', { token: owner });
    expect(d.status, d.text).toBe(200);
    const claude = { tokens: 2 * 45_300, cost: 0.0765, inputTokens: 4000, outputTokens: 600, reasoningTokens: 0, cacheReadTokens: 80_000, cacheWriteTokens: 6000 };
    const gpt = { tokens: 10_020, cost: 0.00816, inputTokens: 2000, outputTokens: 20, reasoningTokens: 0, cacheReadTokens: 8000, cacheWriteTokens: 0 };
    expect(d.json).toMatchObject({
      totalTokens: 100_620,
      totalCostUsd: 0.08466,
      inputTokens: 6000,
      outputTokens: 620,
      reasoningTokens: 0,
      cacheReadTokens: 88_000,
      cacheWriteTokens: 6000,
      byModel: { 'claude-sonnet': claude, 'gpt-4.1': gpt },
      byUser: { [ids.cal]: { tokens: 100_620, cost: 0.08466, inputTokens: 6000, outputTokens: 620, reasoningTokens: 0, cacheReadTokens: 88_000, cacheWriteTokens: 6000 } },
    });

    const json = await runCommand(['usage', 'report', '--tenant', 'pricing', '--since', '1h', '--json'], { env: t.env });
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ totalTokens: 100_620, totalCostUsd: 0.08466, cacheReadTokens: 88_000, cacheWriteTokens: 6000, byModel: { 'claude-sonnet': claude, 'gpt-4.1': gpt } });
    const csv = await runCommand(['usage', 'report', '--tenant', 'pricing', '--since', '1h', '--csv'], { env: t.env });
    expect(csv.code, csv.stderr).toBe(0);
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]).toBe('group,key,tokens,costUsd,inputTokens,outputTokens,reasoningTokens,cacheReadTokens,cacheWriteTokens');
    expect(lines).toContain('model,claude-sonnet,90600,0.076500,4000,600,0,80000,6000');
    expect(lines).toContain('model,gpt-4.1,10020,0.008160,2000,20,0,8000,0');
    expect(lines.at(-1)).toBe('total,,100620,0.084660,6000,620,0,88000,6000');
    const table = await runCommand(['usage', 'report', '--tenant', 'pricing', '--since', '1h'], { env: t.env });
    expect(table.stdout).toMatch(/GROUP\s+KEY\s+TOKENS\s+INPUT\s+CACHEREAD\s+CACHEWRITE\s+OUTPUT\s+REASONING\s+COSTUSD/);
  });

  it('the monthly limit counts what the provider billed: cached calls leave room for more, and each holds its worst case', async () => {
    const sock = await runtimeOf('lim');
    // About 4,000 tokens of text, as the provider counts them too; 400 fresh, the rest read from the cache.
    const body = { max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'word '.repeat(2400) }] };
    const est = estimateInputTokens({ model: 'claude-sonnet', ...body });
    // The first answer waits until the test has seen the call's hold.
    let release!: () => void;
    const seen = new Promise<void>((r) => (release = r));
    let calls = 0;
    llm.respond(() => ({ text: 'ok', usage: { prompt: est, cacheRead: est - 400, completion: 100 }, ...(calls++ === 0 ? { until: seen } : {}) }));
    try {
      // While the first call is out, it holds its worst case: all of its input written to the cache ($3.75), its whole output.
      const first = claudeCall(sock, body);
      await expect.poll(() => calls).toBe(1);
      const held = await t.opened.db.query<{ n: string }>(`select coalesce(sum(amount_usd), 0)::text as n from model_call_holds where user_id = $1`, [ids.lim]);
      expect(Number(held.rows[0].n)).toBeCloseTo((est * 3.75 + 100 * 15) / 1e6, 8);
      release();
      const statuses = [(await first).status];
      for (let i = 0; i < 4; i++) statuses.push((await claudeCall(sock, body)).status);
      // Each call costs (400 x $3 + (est - 400) x $0.30 + 100 x $15) / 1M, about $0.0038, where charging every
      // input token at $3 said $0.0135: then the third call found the month spent; now the fifth does.
      const cost = (400 * 3 + (est - 400) * 0.3 + 100 * 15) / 1e6;
      expect(statuses).toEqual([200, 200, 200, 200, 402]);
      const records = await recordsOf(ids.lim);
      expect(records).toHaveLength(4);
      for (const r of records) expect(Number(r.cost)).toBeCloseTo(cost, 8);
      const month = await t.opened.db.query<{ cost: string }>(`select cost_usd::text as cost from usage_monthly where user_id = $1`, [ids.lim]);
      expect(Number(month.rows[0].cost)).toBeCloseTo(4 * cost, 8);
      expect((await t.opened.db.query(`select 1 from model_call_holds where user_id = $1`, [ids.lim])).rows).toEqual([]);
    } finally {
      llm.respond(null);
    }
  });
});
