import { runtimeCapacity } from '../../src/core/runtime/host/runtime-capacity.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/build-app.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { botChatUpdate, startFakeChatPlatform, type FakeChatPlatform } from '../fixtures/fake-chat-platform.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { parsePromText, promValue, type PromFamily } from '../helpers/prom-text.js';
import { DB_MODE } from '../helpers/test-env.js';

const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** GET /metrics: protected by the service's own credentials, parses, and counts what happened. */
describe(`metrics (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  let platform: FakeChatPlatform;
  const metricsToken = randomSecret(32);
  let owner: string;
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  /** The service's clock runs this far ahead of the real one (moved by the usage test). */
  let ahead = 0;

  beforeAll(async () => {
    platform = await startFakeChatPlatform();
    // Paging off: the capacity then follows the memory alone, whatever swap a test beside this one set up.
    t = await startTestApp({ clock: { now: () => new Date(Date.now() + ahead) }, vars: { AGENTWS_METRICS_TOKEN: metricsToken, AGENTWS_BOT_CHAT_API_URL: platform.url, AGENTWS_TEAM_CHAT_API_URL: platform.url, AGENTWS_RUNTIME_PAGEOUT_SECONDS: '0' } });
    acme = await seedTenant(t, 'acme');
    owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
  });
  afterAll(async () => {
    await t?.close();
    await platform?.close();
  });

  async function scrape(token = metricsToken): Promise<Map<string, PromFamily>> {
    const r = await api(t, 'GET', '/metrics', { token });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toBe(CONTENT_TYPE);
    return parsePromText(r.text);
  }
  const requests = (m: Map<string, PromFamily>, route: string, status: number, method = 'GET') =>
    promValue(m, 'agentws_http_requests_total', { method, route, status: String(status) }) ?? 0;

  it('answers 401 without a credential, with a wrong one or a user token; the metrics token and the API key open it', async () => {
    for (const headers of [{} as Record<string, string>, { authorization: `Bearer ${metricsToken}x` }, { authorization: `Bearer ${owner}` }, { authorization: `Basic ${Buffer.from(`x:${metricsToken}`).toString('base64')}` }, { authorization: 'Bearer ' }]) {
      const r = await api(t, 'GET', '/metrics', { headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.json).toMatchObject({ error: 'unauthenticated', requestId: expect.any(String), hint: expect.stringMatching(/AGENTWS_METRICS_TOKEN/) });
      expect(r.text).not.toContain('agentws_');
    }
    // The metrics token opens /metrics only, not the API.
    expect((await api(t, 'GET', '/v1/auth/me', { token: metricsToken })).status).toBe(401);
    const byKey = await scrape(t.env.vars.AGENTWS_API_KEY);
    expect(byKey.get('agentws_http_requests_total')?.type).toBe('counter');
    const byToken = await scrape(metricsToken);
    expect(byToken.get('agentws_http_request_duration_seconds')?.type).toBe('histogram');
  });

  it('refuses everyone when neither the metrics token nor the API key is set', async () => {
    const config = t.env.config();
    const app = await buildApp(t.opened.core, { ...config, secrets: { ...config.secrets, apiKey: null, metricsToken: null } });
    try {
      for (const token of [metricsToken, t.env.vars.AGENTWS_API_KEY, '']) {
        const r = await app.inject({ method: 'GET', url: '/metrics', headers: token ? { authorization: `Bearer ${token}` } : {} });
        expect(r.statusCode).toBe(401);
        expect(r.json()).toMatchObject({ error: 'unauthenticated', message: 'no credential for /metrics is configured' });
      }
    } finally {
      await app.close();
    }
  });

  it('is in the OpenAPI document, with its content type and 401', async () => {
    const doc = (await api(t, 'GET', '/v1/openapi.json')).json;
    const op = doc.paths['/metrics']?.get;
    expect(op, Object.keys(doc.paths).join(' ')).toBeDefined();
    expect(Object.keys(op.responses['200'].content)).toEqual([CONTENT_TYPE]);
    expect(op.responses['401']).toBeDefined();
    // The probes stay out of it.
    expect(doc.paths['/healthz']).toBeUndefined();
  });

  it('parses: every family has HELP and TYPE, names carry the prefix and units, process metrics included', async () => {
    const m = await scrape();
    for (const f of m.values()) expect(f.help, f.name).not.toBe('');
    const ours = [...m.keys()].filter((n) => n.startsWith('agentws_'));
    expect(ours.sort()).toEqual(
      expect.arrayContaining([
        'agentws_agents_available',
        'agentws_database_up',
        'agentws_http_request_duration_seconds',
        'agentws_http_requests_total',
        'agentws_jobs',
        'agentws_jobs_oldest_waiting_seconds',
        'agentws_pairing_codes_pending',
        'agentws_runtimes',
        'agentws_runtimes_busy',
        'agentws_runtimes_max',
        'agentws_sse_streams_open',
      ]),
    );
    for (const f of m.values()) if (f.type === 'counter') expect(f.name, f.name).toMatch(/_total$/);
    expect(m.get('process_cpu_seconds_total')?.type).toBe('counter');
    expect(m.get('nodejs_eventloop_lag_seconds')?.type).toBe('gauge');
    expect(promValue(m, 'agentws_database_up')).toBe(1);
  });

  it('counts requests by route pattern and status; unknown paths as "unmatched"', async () => {
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await api(t, 'GET', '/v1/auth/me', { token: owner })).status).toBe(200);
    expect((await api(t, 'GET', '/v1/auth/me')).status).toBe(401);
    const id = crypto.randomUUID();
    expect((await api(t, 'GET', `/v1/gateways/${id}/pairing-codes`, { token: owner })).status).toBe(404);
    expect((await api(t, 'GET', `/v1/no/such/${crypto.randomUUID()}`)).status).toBe(404);
    const after = await scrape();
    expect(requests(after, '/v1/auth/me', 200) - requests(before, '/v1/auth/me', 200)).toBe(3);
    expect(requests(after, '/v1/auth/me', 401) - requests(before, '/v1/auth/me', 401)).toBe(1);
    expect(requests(after, 'unmatched', 404) - requests(before, 'unmatched', 404)).toBe(1);
    const duration = (m: Map<string, PromFamily>) =>
      promValue(m, 'agentws_http_request_duration_seconds_count', { method: 'GET', route: '/v1/auth/me', status: '200' }, 'agentws_http_request_duration_seconds') ?? 0;
    expect(duration(after) - duration(before)).toBe(3);
    // Labels are route patterns, never the ids in a path.
    const routes = new Set(after.get('agentws_http_requests_total')!.samples.map((s) => s.labels.route));
    expect([...routes].some((r) => r.includes(id))).toBe(false);
    expect(requests(after, '/v1/gateways/:id/pairing-codes', 404) - requests(before, '/v1/gateways/:id/pairing-codes', 404)).toBe(1);
    expect(routes).toContain('/metrics');
  });

  it('reports jobs by queue and state, and the runtimes of this process', async () => {
    const m = await scrape();
    // Seeding a tenant queued its workspace job; no worker runs in this test, so it waits.
    expect(promValue(m, 'agentws_jobs', { queue: 'tenant-provision-workspace', state: 'created' })).toBeGreaterThanOrEqual(1);
    expect(promValue(m, 'agentws_jobs', { queue: 'agent-turn', state: 'failed' })).toBe(0);
    expect(promValue(m, 'agentws_jobs_oldest_waiting_seconds', { queue: 'tenant-provision-workspace' })).toBeGreaterThanOrEqual(0);
    expect(promValue(m, 'agentws_jobs_oldest_waiting_seconds', { queue: 'agent-turn' })).toBe(0);
    expect(promValue(m, 'agentws_runtimes', { state: 'ready' })).toBe(0);
    expect(promValue(m, 'agentws_runtimes', { state: 'starting' })).toBe(0);
    expect(promValue(m, 'agentws_runtimes', { state: 'frozen' })).toBe(0);
    expect(promValue(m, 'agentws_runtimes_memory_bytes')).toBe(0);
    // The capacity follows from the host's memory (AGENTWS_RUNTIME_MAX=auto), which the scrape also shows.
    const total = promValue(m, 'agentws_host_memory_bytes', { kind: 'total' })!;
    expect(total).toBeGreaterThan(0);
    expect(promValue(m, 'agentws_host_memory_bytes', { kind: 'available' })).toBeGreaterThan(0);
    expect(promValue(m, 'agentws_runtimes_max')).toBe(runtimeCapacity({ totalBytes: total }));
    // This app never became the runtimes' host (startRuntime is serve's).
    expect(promValue(m, 'agentws_agents_available')).toBe(0);
  });

  it('counts model calls, tokens and cost recorded in usage, once each, from any process', async () => {
    const { core, db } = t.opened;
    const call = (model: string, costUsd: number, at?: Date) =>
      core.usage.record(db, {
        tenantId: acme.tenantId,
        userId: acme.ids.owner,
        sessionId: null,
        messageId: crypto.randomUUID(),
        model,
        provider: 'prov',
        tokens: { input: 100, output: 20, reasoning: 5, cacheRead: 7, cacheWrite: 3 },
        costUsd,
        channel: 'web',
        at,
      });
    const labels = { provider: 'prov', model: 'm-1', channel: 'web' };
    const calls = (m: Map<string, PromFamily>) => promValue(m, 'agentws_model_calls_total', labels) ?? 0;
    const cost = (m: Map<string, PromFamily>) => promValue(m, 'agentws_model_cost_usd_total', labels) ?? 0;
    const tokens = (m: Map<string, PromFamily>, type: string) => promValue(m, 'agentws_model_tokens_total', { ...labels, type }) ?? 0;

    // Recorded before this process started: not counted (counters start at zero).
    await call('m-1', 9, new Date(Date.now() - 3_600_000));
    const before = await scrape();
    expect(calls(before)).toBe(0);

    await call('m-1', 0.25);
    await call('m-1', 0.5);
    // Another process's record (a worker's embedding call) is a row like any other.
    await db.query(
      `insert into usage_records (tenant_id, model, provider, tokens_input, tokens_output, cost_usd, channel) values ($1, 'm-1', 'prov', 1000, 0, 0.125, 'web')`,
      [acme.tenantId],
    );
    const after = await scrape();
    expect(calls(after)).toBe(3);
    expect(cost(after)).toBeCloseTo(0.875, 9);
    expect(tokens(after, 'input')).toBe(1200);
    expect(tokens(after, 'output')).toBe(40);
    expect(tokens(after, 'reasoning')).toBe(10);
    expect(tokens(after, 'cache_read')).toBe(14);
    expect(tokens(after, 'cache_write')).toBe(6);

    // Scraped again: nothing counted twice.
    expect(calls(await scrape())).toBe(3);
    // Two minutes on, a scrape; then rows stamped before it commit (a slow commit, another host's
    // clock): up to a minute late they are counted at the next scrape, once; later than that they are not.
    ahead = 120_000;
    expect(calls(await scrape())).toBe(3);
    const now = () => Date.now() + ahead;
    await call('m-1', 1, new Date(now() - 30_000));
    await call('m-1', 1000, new Date(now() - 90_000));
    const late = await scrape();
    expect(calls(late)).toBe(4);
    expect(cost(late)).toBeCloseTo(1.875, 9);
    expect(calls(await scrape())).toBe(4);
    // Other labels, other series.
    await call('m-2', 0.5);
    const other = await scrape();
    expect(promValue(other, 'agentws_model_calls_total', { provider: 'prov', model: 'm-2', channel: 'web' })).toBe(1);
    expect(calls(other)).toBe(4);
  });

  it('counts pairing approvals and pending codes, and the gateway stream while it is open', async () => {
    const admin = owner;
    const g = await api(t, 'POST', '/v1/gateways', { token: admin, body: { kind: 'bot_chat', botToken: `123456:${crypto.randomUUID()}`, botUsername: 'acme_bot', botId: '123456' } });
    expect(g.status, g.text).toBe(201);
    const gatewayId = g.json.id as string;
    const reg = await api(t, 'POST', `/v1/gateways/${gatewayId}/webhook/register`, { token: admin, body: { webhookUrl: 'https://8.8.8.8/agentws/hook' } });
    expect(reg.status, reg.text).toBe(200);
    const secret = platform.webhooks().at(-1)!.secret;
    const codeFor = async (userId: number) => {
      const res = await fetch(`${t.url}/v1/gateways/${gatewayId}/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
        body: JSON.stringify(botChatUpdate({ userId, username: `u${userId}`, text: 'hi' })),
      });
      expect(res.status).toBe(200);
      const codes = (await api(t, 'GET', `/v1/gateways/${gatewayId}/pairing-codes`, { token: admin })).json.codes as Array<{ code: string; externalUserId: string }>;
      return codes.find((c) => c.externalUserId === String(userId))!.code;
    };
    const route = '/v1/gateways/:id/events';

    const before = await scrape();
    expect(promValue(before, 'agentws_sse_streams_open', { route })).toBe(0);
    const first = await codeFor(501);
    await codeFor(502);
    const pending = await scrape();
    expect(promValue(pending, 'agentws_pairing_codes_pending')).toBe((promValue(before, 'agentws_pairing_codes_pending') ?? 0) + 2);

    // An open stream counts while it is open, and its 200 is not a request of the HTTP series.
    const abort = new AbortController();
    const stream = await fetch(`${t.url}/v1/gateways/${gatewayId}/events`, { headers: { authorization: `Bearer ${admin}` }, signal: abort.signal });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    await reader.read();
    const open = await scrape();
    expect(promValue(open, 'agentws_sse_streams_open', { route })).toBe(1);
    // A refused stream is a request like any other.
    expect((await api(t, 'GET', `/v1/gateways/${gatewayId}/events`)).status).toBe(401);

    expect((await api(t, 'POST', `/v1/gateways/${gatewayId}/pairing-codes/${first}/approve`, { token: admin })).status).toBe(200);
    const approved = await scrape();
    expect(promValue(approved, 'agentws_pairing_approvals_total', { platform: 'bot_chat' })).toBe(1);
    expect(promValue(approved, 'agentws_pairing_codes_pending')).toBe((promValue(before, 'agentws_pairing_codes_pending') ?? 0) + 1);

    abort.abort();
    await reader.cancel().catch(() => {});
    await expect.poll(async () => promValue(await scrape(), 'agentws_sse_streams_open', { route }), { timeout: 10_000 }).toBe(0);
    const closed = await scrape();
    expect(requests(closed, route, 200)).toBe(0);
    expect(requests(closed, route, 401)).toBe(1);
    expect(promValue(closed, 'agentws_pairing_approvals_total', { platform: 'bot_chat' })).toBe(1);
  });
});
