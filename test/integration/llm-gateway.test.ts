import { mkdtempSync, rmSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decideEgress, parsePrivateAllow, type PrivateAllowEntry } from '../../src/core/runtime/host/egress-policy.js';
import { createEgressProxy, GATEWAY_HOST, type ProxyListener } from '../../src/core/runtime/host/egress-proxy.js';
import { createLlmGateway, type GatewayCaller, type GatewayDeps, type GatewayTurn, type SettledCall } from '../../src/core/llm-gateway/llm-gateway.js';
import { estimateInputTokens } from '../../src/core/llm-gateway/model-call-fns.js';
import { available, fitCall, type CallPrice } from '../../src/core/usage/spending-fns.js';
import type { HoldResult } from '../../src/core/usage/spending.service.js';
import { silentLogger } from '../../src/kernel/logger.js';
import type { ProviderRow } from '../../src/core/providers/providers.repo.js';
import { systemClock } from '../../src/lib/clock.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { connectThrough } from '../helpers/proxy-client.js';

/**
 * The containment path of a model call, end to end over real sockets: a client talking to a runtime's
 * egress proxy listener (a Unix socket, as inside the sandbox), the proxy handing llm.agentws.internal to
 * the LLM gateway, the gateway forwarding to loopback providers (the scripted OpenAI-compatible model, an
 * Anthropic-shaped one, a slow one). Only the gateway's data sources (providers, limits, spending, turns,
 * where usage goes) are in-memory seams the test controls; everything on the wire is real. The same
 * listener's general egress (CONNECT and absolute-form) is checked against loopback targets too.
 */

const CREDENTIAL = 'rt_cred_0123456789abcdef';
const caller: GatewayCaller = { tenantId: 't1', userId: 'u1', credential: CREDENTIAL };
const SCRIPTED_KEY = 'sk-real-scripted-key';
const CLAUDE_KEY = 'sk-ant-real-claude-key';
const SLOW_KEY = 'sk-real-slow-key';
/** Small, so the over-limit case does not need 64 MiB on the wire. */
const MAX_BODY = 64 * 1024;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** What the provider wrote back, byte for byte. */
  sent: Buffer[];
}

/** A loopback provider that records every request and every byte it answers. */
async function startProvider(handle: (req: IncomingMessage, body: string, write: (b: string) => void, res: ServerResponse) => Promise<void> | void) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const s: Seen = { method: req.method!, url: req.url!, headers: req.headers, body, sent: [] };
      seen.push(s);
      const write = (b: string) => {
        s.sent.push(Buffer.from(b));
        res.write(b);
      };
      void handle(req, body, write, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}
type Provider = Awaited<ReturnType<typeof startProvider>>;

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** When each chunk of the body arrived, ms after the request was sent. */
  chunks: Array<{ t: number; data: Buffer }>;
  end: number;
}

describe('LLM gateway behind the egress proxy (Unix socket, real providers on loopback)', () => {
  let dir: string;
  let socketPath: string;
  let listener: ProxyListener;
  let fake: FakeLlm;
  let claude: Provider;
  let slow: Provider;
  let denied: Provider;
  let allowed: Provider;
  /** Streams an answer and never reports its usage (some OpenAI-compatible servers do not). */
  let silent: Provider;
  /** Streams a first chunk, then takes its time (2.5 s) before the rest and its usage report. */
  let lingering: Provider;
  let privateAllow: PrivateAllowEntry[];

  // What the seams answer and collect; reset before each test.
  let limits: { monthly?: number; perRequest?: number };
  let spentMonth: number;
  let turns: Map<string, GatewayTurn>;
  /** USD recorded per budget (what `turn.recorded` reads). */
  let turnSpent: Map<string, number>;
  let records: SettledCall[];
  let holds: Map<string, { amountUsd: number; budgetKey: string | null }>;
  let held: Array<{ turn: GatewayTurn | null; price: CallPrice; result: HoldResult }>;
  let released: Array<string | null>;
  let limitHits: Parameters<GatewayDeps['limitReached']>[0][];
  let refusals: Array<{ host: string; port: number; reason: string }>;

  beforeEach(() => {
    limits = {};
    spentMonth = 0;
    turns = new Map();
    turnSpent = new Map();
    records = [];
    holds = new Map();
    held = [];
    released = [];
    limitHits = [];
    refusals = [];
  });

  /** A turn as the egress wiring makes one: its budget's spending read from turnSpent. */
  const turn = (sessionId: string, spent = 0): GatewayTurn => {
    turnSpent.set(`session:${sessionId}`, spent);
    return { sessionId, channel: 'web', budgetKey: `session:${sessionId}`, recorded: async () => turnSpent.get(`session:${sessionId}`) ?? 0 };
  };

  /**
   * The spending service's rules over in-memory figures (spending.service.ts does the same in a locked
   * transaction): what is recorded plus what calls in flight hold, against the limits.
   */
  const spending: Pick<GatewayDeps, 'hold' | 'settle' | 'release'> = {
    hold: async (_caller, t, price) => {
      const sum = (key?: string | null) => [...holds.values()].filter((h) => key === undefined || h.budgetKey === key).reduce((n, h) => n + h.amountUsd, 0);
      let result: HoldResult;
      if (limits.monthly === undefined && limits.perRequest === undefined) result = { ok: true, holdId: null, maxOutput: price.maxOutput, cut: false, limited: false };
      else {
        const room = available({ monthlyLimit: limits.monthly, perRequestLimit: limits.perRequest, monthSpent: spentMonth + sum(), turnSpent: t ? (await t.recorded(null as never)) + sum(t.budgetKey) : 0 });
        const fit = fitCall(price, room.usd);
        if (!fit.ok) result = { ok: false, limit: room.limit!, limitUsd: room.limitUsd!, spentUsd: room.spentUsd, needUsd: fit.needUsd };
        else {
          const holdId = crypto.randomUUID();
          holds.set(holdId, { amountUsd: fit.holdUsd, budgetKey: t?.budgetKey ?? null });
          result = { ok: true, holdId, maxOutput: fit.maxOutput, cut: fit.cut, limited: true };
        }
      }
      held.push({ turn: t, price, result });
      return result;
    },
    settle: async (holdId, call) => {
      if (holdId) holds.delete(holdId);
      records.push(call);
      spentMonth += call.costUsd;
      if (call.turn) turnSpent.set(call.turn.budgetKey, (turnSpent.get(call.turn.budgetKey) ?? 0) + call.costUsd);
    },
    release: async (_caller, holdId) => {
      if (holdId) holds.delete(holdId);
      released.push(holdId);
    },
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aws-llm-gw-'));
    socketPath = join(dir, 'egress.sock');
    fake = await startFakeLlm();
    claude = await startProvider((_req, _body, write, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': `req_${Date.now()}` });
      write(sse('message_start', { type: 'message_start', message: { id: 'msg_1', model: 'claude-test', usage: { input_tokens: 1000, output_tokens: 1, cache_read_input_tokens: 200 } } }));
      write(sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
      write(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello from Claude' } }));
      write(sse('content_block_stop', { type: 'content_block_stop', index: 0 }));
      write(sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 250 } }));
      write(sse('message_stop', { type: 'message_stop' }));
      res.end();
    });
    // Sends its first chunk, then makes the caller wait before the rest: a model thinking mid-answer.
    slow = await startProvider(async (req, _body, write, res) => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        write(JSON.stringify({ object: 'list', data: [{ id: 'slow-1', object: 'model' }] }));
        return void res.end();
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'slow-1', choices: [{ index: 0, delta: { role: 'assistant', content: 'first' } }] })}\n\n`);
      await new Promise((r) => setTimeout(r, 500));
      write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'slow-1', choices: [{ index: 0, delta: { content: ' and the rest' }, finish_reason: 'stop' }] })}\n\n`);
      write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'slow-1', choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } })}\n\n`);
      write('data: [DONE]\n\n');
      res.end();
    });
    const plain = (name: string) => (_req: IncomingMessage, _b: string, write: (b: string) => void, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      write(`hello from ${name}`);
      res.end();
    };
    silent = await startProvider((_req, _body, write, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      write(`data: ${JSON.stringify({ id: 's1', object: 'chat.completion.chunk', model: 'silent-1', choices: [{ index: 0, delta: { role: 'assistant', content: 'no usage here' }, finish_reason: 'stop' }] })}\n\n`);
      write('data: [DONE]\n\n');
      res.end();
    });
    lingering = await startProvider(async (_req, _body, write, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': `req_linger_${lingering.seen.length}` });
      write(`data: ${JSON.stringify({ id: 'l1', object: 'chat.completion.chunk', model: 'linger-1', choices: [{ index: 0, delta: { role: 'assistant', content: 'first' } }] })}\n\n`);
      await new Promise((r) => setTimeout(r, 2500));
      write(`data: ${JSON.stringify({ id: 'l1', object: 'chat.completion.chunk', model: 'linger-1', choices: [], usage: { prompt_tokens: 40, completion_tokens: 7, total_tokens: 47 } })}\n\n`);
      write('data: [DONE]\n\n');
      res.end();
    });
    denied = await startProvider(plain('denied'));
    allowed = await startProvider(plain('allowed'));
    const parsed = parsePrivateAllow(`127.0.0.1:${allowed.port}`);
    expect(parsed.invalid).toEqual([]);
    privateAllow = parsed.entries;

    const row = (p: Partial<ProviderRow> & Pick<ProviderRow, 'name' | 'kind'>): ProviderRow => ({
      id: `prov-${p.name}`, tenantId: 't1', baseUrl: null, apiKeySealed: null, models: [], enabled: true, createdAt: new Date(), updatedAt: new Date(), ...p,
    });
    const providers: ProviderRow[] = [
      row({ name: 'scripted', kind: 'openai-compatible', baseUrl: `${fake.url}/v1`, apiKeySealed: `sealed:${SCRIPTED_KEY}`, models: [{ id: 'scripted-1', inputCostPerMTok: 2, outputCostPerMTok: 8 }, { id: 'scripted-big' }] }),
      row({ name: 'claude', kind: 'anthropic', baseUrl: `${claude.url}/v1`, apiKeySealed: `sealed:${CLAUDE_KEY}`, models: [{ id: 'claude-test', inputCostPerMTok: 3, outputCostPerMTok: 15 }] }),
      row({ name: 'slow', kind: 'openai-compatible', baseUrl: `${slow.url}/v1`, apiKeySealed: `sealed:${SLOW_KEY}`, models: [{ id: 'slow-1' }] }),
      row({ name: 'silent', kind: 'openai-compatible', baseUrl: `${silent.url}/v1`, models: [{ id: 'silent-1', inputCostPerMTok: 2, outputCostPerMTok: 8, outputLimit: 1000 }] }),
      row({ name: 'lingering', kind: 'openai-compatible', baseUrl: `${lingering.url}/v1`, models: [{ id: 'linger-1', inputCostPerMTok: 2, outputCostPerMTok: 8 }] }),
      // Registered but not part of what was applied to the runtimes.
      row({ name: 'pending', kind: 'openai-compatible', baseUrl: `${fake.url}/v1`, apiKeySealed: `sealed:${SCRIPTED_KEY}`, models: [{ id: 'scripted-1' }] }),
    ];
    const gateway = createLlmGateway({
      providers: async (tenantId) => (tenantId === 't1' ? { applied: { defaultModel: 'scripted/scripted-1', providers: ['scripted', 'claude', 'slow', 'silent', 'lingering'] }, providers } : { applied: null, providers: [] }),
      openKey: (sealed) => sealed.replace(/^sealed:/, ''),
      turnOf: async (_caller, named) => (named ? (turns.get(named) ?? null) : null),
      // The caller's role may not use this one.
      mayUseModel: async (_caller, _turn, ref) => ref !== 'scripted/scripted-big',
      ...spending,
      limitReached: (call) => void limitHits.push(call),
      maxRequestBytes: MAX_BODY,
      drain: { ms: 5000, bytes: 64 * 1024 },
      clock: systemClock,
      log: silentLogger,
    });
    const proxy = createEgressProxy<GatewayCaller>({
      // The denied server's port is open (as AGENTWS_EGRESS_PORTS would open it): the address rule refuses it.
      decide: (_id, host, port) => decideEgress({ host, port, rules: { allow: [], deny: [] }, privateAllow, ports: [denied.port] }),
      gateway: (id, req, res, url) => gateway.handle(id, req, res, url),
      refused: (_id, target) => void refusals.push(target),
      log: silentLogger,
    });
    listener = await proxy.listen(caller, { path: socketPath });
    expect(listener.address).toBe(socketPath);
  });

  afterAll(async () => {
    await listener?.close();
    await Promise.all([fake?.close(), claude?.close(), slow?.close(), silent?.close(), lingering?.close(), denied?.close(), allowed?.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** One request through the proxy's Unix socket, in absolute form as a proxy client sends it. */
  function viaProxy(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer; chunked?: boolean } = {}): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      const headers: Record<string, string | number> = { host: new URL(url).host, ...opts.headers };
      if (opts.body !== undefined && !opts.chunked) headers['content-length'] = Buffer.byteLength(opts.body);
      const req = http.request({ socketPath, method: opts.method ?? (opts.body !== undefined ? 'POST' : 'GET'), path: url, headers, agent: false }, (res) => {
        const chunks: Reply['chunks'] = [];
        res.on('data', (d: Buffer) => chunks.push({ t: performance.now() - t0, data: d }));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks.map((c) => c.data)), chunks, end: performance.now() - t0 }));
        res.on('error', reject);
      });
      req.on('error', reject);
      if (opts.body !== undefined && opts.chunked) {
        // Several writes without a length: the gateway only learns the size by reading.
        const b = Buffer.from(opts.body);
        for (let i = 0; i < b.length; i += 16 * 1024) req.write(b.subarray(i, i + 16 * 1024));
        req.end();
      } else req.end(opts.body);
    });
  }

  const gw = (path: string) => `http://${GATEWAY_HOST}${path}`;
  const chat = (model: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hello.' }], ...extra });
  const bearer = (session?: string) => ({ authorization: `Bearer ${CREDENTIAL}`, 'content-type': 'application/json', ...(session ? { 'x-session-id': session } : {}) });
  const everythingSeen = () => [...claude.seen, ...slow.seen].map((s) => JSON.stringify(s.headers) + s.body).join('\n') + JSON.stringify(fake.requests);

  it('forwards a streaming call with the provider\'s real key, never the runtime\'s credential, and records its usage and cost', async () => {
    fake.script([{ text: 'Hello there from the scripted model.', usage: { prompt: 1200, completion: 300 } }]);
    const before = fake.requests.length;
    turns.set('ses_abc', turn('sess-1'));
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer('ses_abc'), body: chat('scripted-1') });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    const text = r.body.toString('utf8');
    expect(text).toContain('Hello ');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);

    const got = fake.requests.slice(before);
    expect(got).toHaveLength(1);
    expect(got[0].path).toBe('/v1/chat/completions');
    expect(got[0].authorization).toBe(`Bearer ${SCRIPTED_KEY}`);
    expect(got[0].body.stream_options).toEqual({ include_usage: true });

    await expect.poll(() => records.length).toBe(1);
    const rec = records[0];
    expect(rec.caller).toEqual(caller);
    expect(rec.turn).toMatchObject({ sessionId: 'sess-1', channel: 'web', budgetKey: 'session:sess-1' });
    expect(rec.estimated).toBe(false);
    expect(rec.provider).toBe('scripted');
    expect(rec.model).toBe('scripted-1');
    expect(rec.usage).toMatchObject({ input: 1200, output: 300, reasoning: 0, cacheRead: 0, cacheWrite: 0 });
    // 1200 input tokens at $2/MTok + 300 output at $8/MTok
    expect(rec.costUsd).toBeCloseTo((1200 * 2 + 300 * 8) / 1e6, 12);
    expect(rec.callId.startsWith('t1:')).toBe(true);
    expect(everythingSeen()).not.toContain(CREDENTIAL);
  });

  it('streams an Anthropic answer back byte for byte and records its usage (message_start + message_delta)', async () => {
    const before = claude.seen.length;
    const r = await viaProxy(gw('/p/claude/messages'), {
      // The Anthropic SDK sends its key as x-api-key.
      headers: { 'x-api-key': CREDENTIAL, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'x-session-id': 'ses_claude' },
      body: JSON.stringify({ model: 'claude-test', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(r.status).toBe(200);
    const seen = claude.seen[before];
    expect(r.body.equals(Buffer.concat(seen.sent))).toBe(true);
    expect(seen.url).toBe('/v1/messages');
    expect(seen.headers['x-api-key']).toBe(CLAUDE_KEY);
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-session-id']).toBeUndefined();
    expect(JSON.stringify(seen.headers) + seen.body).not.toContain(CREDENTIAL);

    await expect.poll(() => records.length).toBe(1);
    expect(records[0]).toMatchObject({ provider: 'claude', model: 'claude-test', turn: null, usage: { input: 1000, cacheRead: 200, output: 250, cacheWrite: 0, reasoning: 0 } });
    // 1000 input at $3/MTok, 200 read from the cache at a tenth of that (Anthropic's price), 250 output at $15/MTok
    expect(records[0].costUsd).toBeCloseTo((1000 * 3 + 200 * 0.3 + 250 * 15) / 1e6, 12);
  });

  it('holds an Anthropic call\'s input at its worst price: a cache write (1.25x input), the one-hour cache (2x) when the call asks for it', async () => {
    const body = (ttl?: string) =>
      JSON.stringify({ model: 'claude-test', max_tokens: 100, stream: true, system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral', ...(ttl ? { ttl } : {}) } }], messages: [{ role: 'user', content: 'Hi' }] });
    const headers = { 'x-api-key': CREDENTIAL, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
    for (const [ttl, perMTok] of [[undefined, 3.75], ['1h', 6]] as const) {
      const sent = body(ttl);
      expect((await viaProxy(gw('/p/claude/messages'), { headers, body: sent })).status).toBe(200);
      const price = held.at(-1)!.price;
      expect(price.inputUsd).toBeCloseTo((estimateInputTokens(JSON.parse(sent)) * perMTok) / 1e6, 15);
      expect(price.outputUsdPerToken).toBeCloseTo(15 / 1e6, 15);
    }
    // An OpenAI-compatible model's worst input price is its input price.
    fake.script([{ text: 'ok' }]);
    expect((await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: chat('scripted-1') })).status).toBe(200);
    expect(held.at(-1)!.price.inputUsd).toBeCloseTo((estimateInputTokens(JSON.parse(chat('scripted-1'))) * 2) / 1e6, 15);
  });

  it('forwards the first chunk as it arrives, before the provider has finished', async () => {
    const before = slow.seen.length;
    const r = await viaProxy(gw('/p/slow/chat/completions'), { headers: bearer(), body: chat('slow-1') });
    expect(r.status).toBe(200);
    expect(r.body.equals(Buffer.concat(slow.seen[before].sent))).toBe(true);
    expect(slow.seen[before].headers.authorization).toBe(`Bearer ${SLOW_KEY}`);
    expect(r.chunks[0].data.toString()).toContain('"first"');
    expect(r.chunks[0].data.toString()).not.toContain('the rest');
    // The provider holds the rest back 500 ms: the first chunk must not have waited for it.
    expect(r.end).toBeGreaterThan(450);
    expect(r.end - r.chunks[0].t).toBeGreaterThan(350);
    await expect.poll(() => records.length).toBe(1);
    // A model without prices costs nothing, but its tokens are still recorded.
    expect(records[0]).toMatchObject({ provider: 'slow', model: 'slow-1', costUsd: 0, usage: { input: 10, output: 3 } });
  });

  it('refuses a wrong or missing credential (401) without calling the provider', async () => {
    const before = fake.requests.length;
    for (const headers of <Array<Record<string, string>>>[{}, { authorization: 'Bearer not-the-credential' }, { authorization: `Bearer ${CREDENTIAL}x` }, { 'x-api-key': 'nope' }]) {
      const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: { 'content-type': 'application/json', ...headers }, body: chat('scripted-1') });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(JSON.parse(r.body.toString()).error.type).toBe('authentication_error');
    }
    expect(fake.requests.length).toBe(before);
  });

  it('forwards only the model endpoints (403 elsewhere), only applied providers and listed models (404)', async () => {
    const before = fake.requests.length;
    for (const path of ['/p/scripted/files', '/p/scripted/fine_tuning/jobs', '/p/scripted/chat/completions/../../files', '/p/claude/chat/completions']) {
      const r = await viaProxy(gw(path), { headers: bearer(), body: chat('scripted-1') });
      expect(r.status, path).toBe(403);
      expect(JSON.parse(r.body.toString()).error.type).toBe('permission_error');
    }
    for (const path of ['/p/nope/chat/completions', '/p/pending/chat/completions', '/v1/chat/completions']) {
      const r = await viaProxy(gw(path), { headers: bearer(), body: chat('scripted-1') });
      expect(r.status, path).toBe(404);
    }
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: chat('gpt-5-not-listed') });
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body.toString()).error.message).toMatch(/lists no model "gpt-5-not-listed"/);
    // Listed, but not a model the caller's role may use: the agent cannot reach it by calling the gateway itself.
    const big = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: chat('scripted-big') });
    expect(big.status).toBe(403);
    expect(JSON.parse(big.body.toString()).error).toMatchObject({ type: 'permission_error', message: 'agentws: your role may not use the model scripted/scripted-big' });
    expect(fake.requests.length).toBe(before);
    expect(records).toEqual([]);
  });

  it('refuses calls once the monthly limit is spent (402 cost_limit_exceeded) without calling the provider', async () => {
    limits = { monthly: 10 };
    spentMonth = 10;
    const before = fake.requests.length;
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer('ses_abc'), body: chat('scripted-1') });
    expect(r.status).toBe(402);
    const err = JSON.parse(r.body.toString()).error;
    expect(err.type).toBe('cost_limit_exceeded');
    expect(err.message).toMatch(/monthly cost limit/);
    expect(limitHits).toEqual([{ caller, turn: null, limit: 'monthly', limitUsd: 10, spentUsd: 10 }]);
    expect(fake.requests.length).toBe(before);

    // Listing models costs nothing: allowed over the limit.
    const slowBefore = slow.seen.length;
    const models = await viaProxy(gw('/p/slow/models'), { headers: bearer() });
    expect(models.status).toBe(200);
    expect(JSON.parse(models.body.toString()).data[0].id).toBe('slow-1');
    expect(slow.seen.slice(slowBefore).map((s) => `${s.method} ${s.url}`)).toEqual(['GET /v1/models']);

    // Just under the limit: allowed.
    spentMonth = 9.99;
    fake.script([{ text: 'ok' }]);
    expect((await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: chat('scripted-1') })).status).toBe(200);
  });

  it('refuses a call when the current turn has spent its per-request limit (402)', async () => {
    limits = { perRequest: 0.5, monthly: 100 };
    turns.set('ses_spent', turn('sess-2', 0.5));
    turns.set('ses_fresh', turn('sess-3', 0.1));
    const before = fake.requests.length;
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer('ses_spent'), body: chat('scripted-1') });
    expect(r.status).toBe(402);
    expect(JSON.parse(r.body.toString()).error.code).toBe('cost_limit_exceeded');
    expect(limitHits).toEqual([{ caller, turn: turns.get('ses_spent'), limit: 'per_request', limitUsd: 0.5, spentUsd: 0.5 }]);
    expect(fake.requests.length).toBe(before);

    fake.script([{ text: 'ok' }]);
    const ok = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer('ses_fresh'), body: chat('scripted-1') });
    expect(ok.status).toBe(200);
    await expect.poll(() => records.length).toBe(1);
    expect(records[0].turn?.sessionId).toBe('sess-3');
  });

  it('asks the provider for a streamed call\'s usage whatever the client sent, and records it', async () => {
    // The agent's own call: streamed, without stream_options (OpenAI then sends no usage) and without a session.
    fake.script([{ text: 'counted anyway', usage: { prompt: 900, completion: 40 } }]);
    const before = fake.requests.length;
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: JSON.stringify({ model: 'scripted-1', stream: true, messages: [{ role: 'user', content: 'Say hello.' }] }) });
    expect(r.status).toBe(200);
    // The usage chunk reaches the client too (an extra chunk with no choices, as OpenAI sends it).
    expect(r.body.toString()).toMatch(/"usage":\{"prompt_tokens":900/);
    expect(fake.requests.slice(before).map((q) => q.body.stream_options)).toEqual([{ include_usage: true }]);
    await expect.poll(() => records.length).toBe(1);
    expect(records[0]).toMatchObject({ turn: null, estimated: false, usage: { input: 900, output: 40 } });
    expect(records[0].costUsd).toBeCloseTo((900 * 2 + 40 * 8) / 1e6, 12);
  });

  it('refuses a model call that names no model (400), without calling the provider', async () => {
    const before = fake.requests.length;
    const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: JSON.stringify({ stream: true, messages: [{ role: 'user', content: 'default model please' }] }) });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body.toString()).error.message).toMatch(/must name its model/);
    expect(fake.requests.length).toBe(before);
  });

  it('charges an answer without a usage report the estimate: its input as counted and its whole output limit', async () => {
    const body = { model: 'silent-1', stream: true, max_tokens: 300, messages: [{ role: 'user', content: 'x'.repeat(3000) }] };
    const r = await viaProxy(gw('/p/silent/chat/completions'), { headers: bearer(), body: JSON.stringify(body) });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toContain('no usage here');
    await expect.poll(() => records.length).toBe(1);
    const sent = JSON.parse(silent.seen.at(-1)!.body);
    expect(records[0]).toMatchObject({ provider: 'silent', model: 'silent-1', estimated: true, usage: { input: estimateInputTokens(sent), output: 300 } });
    expect(records[0].usage.input).toBeGreaterThanOrEqual(1000); // 3,000 characters of text
    expect(records[0].costUsd).toBeCloseTo((estimateInputTokens(sent) * 2 + 300 * 8) / 1e6, 12);
    // Without max_tokens: the model's output limit as registered (1,000).
    await viaProxy(gw('/p/silent/chat/completions'), { headers: bearer(), body: JSON.stringify({ ...body, max_tokens: undefined }) });
    await expect.poll(() => records.length).toBe(2);
    expect(records[1].usage.output).toBe(1000);
  });

  it('a client that hangs up does not stop the bill: the answer is read to its end and its usage recorded', async () => {
    const before = lingering.seen.length;
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ socketPath, method: 'POST', path: gw('/p/lingering/chat/completions'), headers: { host: GATEWAY_HOST, ...bearer() }, agent: false }, (res) => {
        // Hang up at the first chunk, long before the provider has finished.
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? resolve() : reject(err)));
      req.end(JSON.stringify({ model: 'linger-1', stream: true, messages: [{ role: 'user', content: 'take your time' }] }));
    });
    expect(lingering.seen.length).toBe(before + 1);
    expect(records).toEqual([]);
    await expect.poll(() => records.length, { timeout: 6000 }).toBe(1);
    expect(records[0]).toMatchObject({ provider: 'lingering', estimated: false, usage: { input: 40, output: 7 } });
    expect(records[0].callId).toBe(`t1:req_linger_${before + 1}`);
  });

  it('an answer still running when the client has long gone is cut and charged the estimate', async () => {
    // This gateway reads at most 200 ms after the client left; the provider needs 2.5 s.
    const gateway = createLlmGateway({
      providers: async () => ({ applied: { defaultModel: 'lingering/linger-1', providers: ['lingering'] }, providers: [{ id: 'l', tenantId: 't1', name: 'lingering', kind: 'openai-compatible', baseUrl: `${lingering.url}/v1`, apiKeySealed: null, models: [{ id: 'linger-1', inputCostPerMTok: 2, outputCostPerMTok: 8 }], enabled: true, createdAt: new Date(), updatedAt: new Date() }] }),
      openKey: (x) => x,
      turnOf: async () => null,
      ...spending,
      limitReached: () => {},
      drain: { ms: 200, bytes: 1024 * 1024 },
      clock: systemClock,
      log: silentLogger,
    });
    const proxy = createEgressProxy<GatewayCaller>({ decide: async () => ({ ok: false, reason: 'no' }), gateway: (id, req, res, url) => gateway.handle(id, req, res, url), refused: () => {}, log: silentLogger });
    const own = await proxy.listen(caller, { path: join(dir, 'cut.sock') });
    try {
      const body = { model: 'linger-1', stream: true, max_tokens: 500, messages: [{ role: 'user', content: 'take your time' }] };
      await new Promise<void>((resolve) => {
        const req = http.request({ socketPath: own.address, method: 'POST', path: gw('/p/lingering/chat/completions'), headers: { host: GATEWAY_HOST, ...bearer() }, agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.on('error', () => resolve());
        req.end(JSON.stringify(body));
      });
      await expect.poll(() => records.length, { timeout: 10_000 }).toBe(1);
      expect(records[0]).toMatchObject({ estimated: true, usage: { output: 500 } });
      expect(records[0].usage.input).toBeGreaterThanOrEqual(5);
    } finally {
      await own.close();
    }
  });

  it('an Anthropic answer cut off after message_start keeps Anthropic\'s count of its input: cache reads at their price, never the estimate on top', async () => {
    // message_start (input and cache tokens counted), a first chunk of text, then nothing more for 10 s.
    const stalling = await startProvider(async (_req, _body, write, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      write(sse('message_start', { type: 'message_start', message: { id: 'msg_s', model: 'claude-test', usage: { input_tokens: 12, output_tokens: 1, cache_read_input_tokens: 40_000, cache_creation_input_tokens: 1000 } } }));
      write(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Thinking' } }));
      await new Promise((r) => setTimeout(r, 10_000));
      res.end();
    });
    const gateway = createLlmGateway({
      providers: async () => ({ applied: { defaultModel: 'claude/claude-test', providers: ['claude'] }, providers: [{ id: 'c', tenantId: 't1', name: 'claude', kind: 'anthropic', baseUrl: `${stalling.url}/v1`, apiKeySealed: null, models: [{ id: 'claude-test', inputCostPerMTok: 3, outputCostPerMTok: 15 }], enabled: true, createdAt: new Date(), updatedAt: new Date() }] }),
      openKey: (x) => x,
      turnOf: async () => null,
      ...spending,
      limitReached: () => {},
      drain: { ms: 200, bytes: 1024 * 1024 },
      clock: systemClock,
      log: silentLogger,
    });
    const proxy = createEgressProxy<GatewayCaller>({ decide: async () => ({ ok: false, reason: 'no' }), gateway: (id, req, res, url) => gateway.handle(id, req, res, url), refused: () => {}, log: silentLogger });
    const own = await proxy.listen(caller, { path: join(dir, 'stall.sock') });
    try {
      // A long prompt: the gateway's estimate of its input is far more than the 12 fresh tokens Anthropic counted.
      const body = { model: 'claude-test', max_tokens: 500, stream: true, messages: [{ role: 'user', content: 'x'.repeat(120_000) }] };
      expect(estimateInputTokens(body)).toBeGreaterThan(40_000);
      await new Promise<void>((resolve) => {
        const req = http.request({ socketPath: own.address, method: 'POST', path: gw('/p/claude/messages'), headers: { host: GATEWAY_HOST, 'x-api-key': CREDENTIAL, 'content-type': 'application/json' }, agent: false }, (res) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        });
        req.on('error', () => resolve());
        req.end(JSON.stringify(body));
      });
      await expect.poll(() => records.length, { timeout: 10_000 }).toBe(1);
      expect(records[0]).toMatchObject({ estimated: true, usage: { input: 12, cacheRead: 40_000, cacheWrite: 1000, output: 500 } });
      // 12 x $3 + 40,000 x $0.30 + 1,000 x $3.75 + 500 (the output limit) x $15, per million.
      expect(records[0].costUsd).toBeCloseTo((12 * 3 + 40_000 * 0.3 + 1000 * 3.75 + 500 * 15) / 1e6, 12);
    } finally {
      await own.close();
      await stalling.close();
    }
  });

  it('calls made at the same time cannot together spend past the per-request limit: each is held, cut to fit, or refused', async () => {
    limits = { perRequest: 0.01 };
    turns.set('ses_par', turn('sess-par'));
    // Each answer would use its whole output limit (a provider stops there), its input as big as its text.
    fake.respond((q) => ({ text: 'long answer', usage: { prompt: Math.ceil(JSON.stringify(q.body.messages).length / 4), completion: 100_000 } }));
    try {
      const before = fake.requests.length;
      const replies = await Promise.all(
        Array.from({ length: 12 }, (_, i) => viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer('ses_par'), body: chat('scripted-1', { max_tokens: 4000, messages: [{ role: 'user', content: `call ${i}: ${'words '.repeat(50)}` }] }) })),
      );
      const statuses = replies.map((r) => r.status);
      expect(statuses).toContain(200);
      expect(statuses).toContain(402);
      expect(statuses.every((st) => st === 200 || st === 402)).toBe(true);
      const forwarded = fake.requests.slice(before);
      expect(forwarded).toHaveLength(statuses.filter((st) => st === 200).length);
      // Each call's output limit was lowered to what the budget could pay (4,000 tokens at $8/M = $0.032 > $0.01).
      for (const q of forwarded) expect(q.body.max_tokens).toBeLessThan(4000);
      await expect.poll(() => records.length).toBe(forwarded.length);
      const total = records.reduce((n, c) => n + c.costUsd, 0);
      // What the provider billed is what was recorded, and it stays within the limit.
      const billed = forwarded.reduce((n, q) => n + (q.billed!.prompt * 2 + q.billed!.completion * 8) / 1e6, 0);
      expect(total).toBeCloseTo(billed, 12);
      expect(total).toBeLessThanOrEqual(0.01 + 1e-12);
      expect(holds.size).toBe(0);
      expect(limitHits.length).toBeGreaterThan(0);
      expect(limitHits.every((h) => h.limit === 'per_request')).toBe(true);
    } finally {
      fake.respond(null);
    }
  });

  /** A gateway of its own behind its own listener (for tests that abort or stop it), on the scripted provider. */
  async function ownGateway(sock: string, o: { settle?: GatewayDeps['settle'] } = {}) {
    const gateway = createLlmGateway({
      providers: async () => ({
        applied: { defaultModel: 'scripted/scripted-1', providers: ['scripted'] },
        providers: [{ id: 's', tenantId: 't1', name: 'scripted', kind: 'openai-compatible', baseUrl: `${fake.url}/v1`, apiKeySealed: null, models: [{ id: 'scripted-1', inputCostPerMTok: 2, outputCostPerMTok: 8, outputLimit: 700 }], enabled: true, createdAt: new Date(), updatedAt: new Date() }],
      }),
      openKey: (x) => x,
      turnOf: async () => null,
      ...spending,
      ...(o.settle ? { settle: o.settle } : {}),
      limitReached: () => {},
      clock: systemClock,
      log: silentLogger,
    });
    const proxy = createEgressProxy<GatewayCaller>({ decide: async () => ({ ok: false, reason: 'no' }), gateway: (id, req, res, url) => gateway.handle(id, req, res, url), refused: () => {}, log: silentLogger });
    const listener = await proxy.listen(caller, { path: join(dir, sock) });
    /** A streamed call through it: resolves at its first chunk, with how it ended later. */
    const start = (content: string) =>
      new Promise<{ ended: Promise<string> }>((resolve, reject) => {
        const req = http.request({ socketPath: listener.address, method: 'POST', path: gw('/p/scripted/chat/completions'), headers: { host: GATEWAY_HOST, ...bearer() }, agent: false }, (res) => {
          const ended = new Promise<string>((done) => {
            res.on('end', () => done('end'));
            res.on('error', () => done('cut'));
            res.on('aborted', () => done('cut'));
            res.on('close', () => done(res.complete ? 'end' : 'cut'));
          });
          res.once('data', () => resolve({ ended }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'scripted-1', stream: true, messages: [{ role: 'user', content }] }));
      });
    return { gateway, listener, start };
  }

  it('aborts the calls in flight of a runtime that went away (cutCalls), not a newer one\'s, and charges each the estimate', async () => {
    const own = await ownGateway('cut-calls.sock');
    try {
      fake.respond((req) => (/^slow/.test(req.lastUser) ? { text: 'one two three four five six seven eight nine ten', chunkDelayMs: 300 } : undefined));
      const before = fake.requests.length;
      const call = await own.start('slow please');
      expect(own.gateway.inFlight).toBe(1);
      // Another user's call, and calls started after the loss, are not touched.
      expect(own.gateway.cutCalls({ tenantId: 't1', userId: 'someone-else' })).toBe(0);
      expect(own.gateway.cutCalls(caller, Date.now() - 60_000)).toBe(0);
      expect(own.gateway.cutCalls(caller)).toBe(1);
      expect(await call.ended).toBe('cut');
      // The provider's answer is abandoned at once, not read to its end (~3 s of chunks): it sent few of them.
      await expect.poll(() => fake.requests[before]?.hungUp).toBe(true);
      expect(fake.requests[before].chunks).toBeLessThan(11);
      await expect.poll(() => records.length).toBe(1);
      expect(records[0]).toMatchObject({ estimated: true, provider: 'scripted', usage: { output: 700 } });
      expect(own.gateway.inFlight).toBe(0);
    } finally {
      fake.respond(null);
      await own.listener.close();
    }
  });

  it('a stopping gateway aborts every call in flight and resolves once each is recorded; new calls are refused (503)', async () => {
    // Recording takes its time (a database transaction): stop() waits for it.
    let recorded = 0;
    const own = await ownGateway('stop-calls.sock', {
      settle: async (holdId, call) => {
        await new Promise((r) => setTimeout(r, 200));
        await spending.settle(holdId, call);
        recorded++;
      },
    });
    try {
      fake.respond((req) => (/^slow/.test(req.lastUser) ? { text: 'one two three four five six seven eight nine ten', chunkDelayMs: 300 } : undefined));
      const calls = [await own.start('slow a'), await own.start('slow b')];
      expect(await own.gateway.stop()).toBe(2);
      expect(recorded).toBe(2);
      expect(await Promise.all(calls.map((c) => c.ended))).toEqual(['cut', 'cut']);
      expect(records.map((r) => r.estimated)).toEqual([true, true]);
      const refused = await new Promise<number>((resolve, reject) => {
        const req = http.request({ socketPath: own.listener.address, method: 'POST', path: gw('/p/scripted/chat/completions'), headers: { host: GATEWAY_HOST, ...bearer() }, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end(chat('scripted-1'));
      });
      expect(refused).toBe(503);
    } finally {
      fake.respond(null);
      await own.listener.close();
    }
  });

  it('answers 413 to a request body over the limit, with or without a declared length, and stays usable', async () => {
    const before = fake.requests.length;
    const big = chat('scripted-1', { padding: 'x'.repeat(MAX_BODY * 4) });
    for (const chunked of [false, true]) {
      const r = await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: big, chunked });
      expect(r.status, `chunked: ${chunked}`).toBe(413);
      expect(JSON.parse(r.body.toString()).error.type).toBe('request_too_large');
    }
    expect(fake.requests.length).toBe(before);
    fake.script([{ text: 'still here' }]);
    expect((await viaProxy(gw('/p/scripted/chat/completions'), { headers: bearer(), body: chat('scripted-1') })).status).toBe(200);
  });

  it('holds the provider back while the runtime does not read (the host does not buffer a whole answer)', async () => {
    // A provider streaming 32 MiB as fast as its socket takes it, counting what it got written.
    const TOTAL = 32 * 1024 * 1024;
    let written = 0;
    const big = await startProvider(async (_req, _body, _write, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = Buffer.alloc(64 * 1024, 'a');
      while (written < TOTAL && !res.destroyed) {
        written += chunk.length;
        if (!res.write(chunk)) {
          // Both listeners go once either fires (one left per wait piled up: Node's MaxListeners warning).
          await new Promise<void>((r) => {
            const go = () => {
              res.off('drain', go);
              res.off('close', go);
              r();
            };
            res.once('drain', go).once('close', go);
          });
        }
      }
      res.end();
    });
    const row: ProviderRow = { id: 'big', tenantId: 't1', name: 'big', kind: 'openai-compatible', baseUrl: `${big.url}/v1`, apiKeySealed: null, models: [{ id: 'big-1' }], enabled: true, createdAt: new Date(), updatedAt: new Date() };
    const gateway = createLlmGateway({
      providers: async () => ({ applied: { defaultModel: 'big/big-1', providers: ['big'] }, providers: [row] }),
      openKey: (s) => s, turnOf: async () => null, hold: async (_c, _t, price) => ({ ok: true, holdId: null, maxOutput: price.maxOutput, cut: false, limited: false }),
      settle: async () => {}, release: async () => {}, limitReached: () => {}, clock: systemClock, log: silentLogger,
    });
    const proxy = createEgressProxy<GatewayCaller>({ decide: async () => ({ ok: false, reason: 'no' }), gateway: (id, req, res, url) => gateway.handle(id, req, res, url), refused: () => {}, log: silentLogger });
    const own = await proxy.listen(caller, { path: join(dir, 'big.sock') });
    try {
      let writtenWhilePaused = -1;
      const received = await new Promise<number>((resolve, reject) => {
        const req = http.request({ socketPath: own.address, method: 'POST', path: gw('/p/big/chat/completions'), headers: { host: GATEWAY_HOST, ...bearer() }, agent: false }, (res) => {
          // A slow reader: nothing for a while, then everything.
          res.pause();
          setTimeout(() => {
            writtenWhilePaused = written;
            let n = 0;
            res.on('data', (d: Buffer) => (n += d.length));
            res.on('end', () => resolve(n));
            res.resume();
          }, 500);
        });
        req.on('error', reject);
        req.end(chat('big-1'));
      });
      expect(received).toBe(TOTAL);
      // What socket buffers hold (a few MiB on loopback), not the whole answer.
      expect(writtenWhilePaused).toBeGreaterThan(0);
      expect(writtenWhilePaused).toBeLessThan(TOTAL / 2);
    } finally {
      await own.close();
      await big.close();
    }
  });

  /** CONNECT through the proxy; on 200, one GET over the tunnel. */
  const connect = (target: string) => connectThrough(socketPath, target);

  it('refuses egress to loopback, metadata and private addresses, by CONNECT and by absolute URL, and reports why', async () => {
    const c = await connect(`127.0.0.1:${denied.port}`);
    expect(c.status).toBe(403);
    for (const url of [`http://127.0.0.1:${denied.port}/`, 'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/', `http://localhost:${denied.port}/`]) {
      const r = await viaProxy(url);
      expect(r.status, url).toBe(403);
      expect(r.headers['x-agentws-egress']).toBe('refused');
    }
    expect(denied.seen).toEqual([]);
    expect(refusals.map((r) => `${r.host}:${r.port}`)).toEqual([`127.0.0.1:${denied.port}`, `127.0.0.1:${denied.port}`, '169.254.169.254:80', '10.0.0.1:80', `localhost:${denied.port}`]);
    for (const r of refusals) expect(r.reason).toMatch(/private address/);
    // The gateway host is plain http through the proxy, never a tunnel.
    expect((await connect(`${GATEWAY_HOST}:443`)).status).toBe(403);
  });

  it('lets through a private host the operator allows, by CONNECT and by absolute URL', async () => {
    const c = await connect(`127.0.0.1:${allowed.port}`);
    expect(c.status).toBe(200);
    expect(c.body).toMatch(/^HTTP\/1\.1 200/);
    expect(c.body).toContain('hello from allowed');
    const r = await viaProxy(`http://127.0.0.1:${allowed.port}/some/path?q=1`, { headers: { 'proxy-connection': 'keep-alive' } });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('hello from allowed');
    expect(allowed.seen.map((s) => s.url)).toEqual(['/', '/some/path?q=1']);
    expect(allowed.seen[1].headers['proxy-connection']).toBeUndefined();
    expect(refusals).toEqual([]);
  });
});
