import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../logger.js';
import type { AppliedState, ProviderRow } from '../runtime/runtime.repo.js';
import { isModelPath, modelPrice, providerAuthHeaders, providerBaseUrl } from './provider-endpoint.js';
import { callCost, createUsageTap, totalTokens, type CallUsage } from './usage-tap.js';

/**
 * The LLM gateway: provider API keys never enter a runtime. A runtime's provider configuration points at
 * `http://llm.agentws.internal/p/<provider>` (reached through its egress proxy) with a credential made
 * for that runtime when it started; the gateway checks it, adds the tenant's real key, forwards the call
 * to the provider and streams the answer back unchanged, chunk by chunk as it arrives. On the way it
 * reads the provider's own usage report (usage-tap.ts), records tokens and cost of the call, and refuses
 * calls once the user's monthly limit is spent or the current turn has spent its per-request limit.
 *
 * The agent can read its runtime's configuration, so it can call the gateway itself: with its own
 * credential, on its own user's budget, for the model endpoints below only (never files, fine-tuning or
 * anything else a provider key could do).
 */
export interface GatewayCaller {
  tenantId: string;
  userId: string;
  /** The credential this runtime was started with (revoked when it stops). */
  credential: string;
}

// Provider URLs, key headers and prices: provider-endpoint.ts (shared with the embeddings service).
export { OFFICIAL_BASE_URL } from './provider-endpoint.js';
/** Request headers passed on to the provider (everything else, credentials included, stays here). */
const FORWARDED_HEADERS = ['content-type', 'accept', 'user-agent', 'anthropic-version', 'anthropic-beta', 'openai-beta', 'openai-organization', 'openai-project'];
const RESPONSE_DROPPED = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'proxy-connection'];
/** A model call's request body (images included) is at most this big. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;

export interface GatewayTurn {
  sessionId: string;
  channel: string;
  /** USD the current turn of the session has spent so far. */
  spent: number;
}

export interface GatewayDeps {
  /** The tenant's providers and what was applied (cached briefly by the caller). */
  providers(tenantId: string): Promise<{ applied: AppliedState | null; providers: ProviderRow[] }>;
  openKey(sealed: string): string;
  /** The user's cost limits, from their current roles. */
  limits(tenantId: string, userId: string): Promise<{ monthly?: number; perRequest?: number }>;
  /** USD the user spent this calendar month (UTC). */
  spentThisMonth(tenantId: string, userId: string): Promise<number>;
  /** Our session of the runtime's session id, with what its current turn has spent; null when unknown. */
  turnOf(tenantId: string, userId: string, upstreamSessionId: string): Promise<GatewayTurn | null>;
  /** Records one answered call (usage_records). */
  record(call: { caller: GatewayCaller; turn: GatewayTurn | null; provider: string; model: string; usage: CallUsage; costUsd: number; callId: string }): Promise<void>;
  /** A call refused for a cost limit (audited once per turn or month by the caller). */
  limitReached(call: { caller: GatewayCaller; turn: GatewayTurn | null; limit: 'monthly' | 'per_request'; limitUsd: number; spentUsd: number }): void;
  /** The largest request body accepted, in bytes (MAX_REQUEST_BYTES unless given). */
  maxRequestBytes?: number;
  clock: Clock;
  log: Logger;
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** An error the runtime's SDK understands (OpenAI- and Anthropic-shaped at once). */
function answer(res: ServerResponse, status: number, type: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ type: 'error', error: { type, code: type, message: `agentws: ${message}` } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-agentws-gateway': 'refused' });
  res.end(body);
}

export function createLlmGateway(deps: GatewayDeps) {
  const { log } = deps;
  const maxBytes = deps.maxRequestBytes ?? MAX_REQUEST_BYTES;

  async function readBody(req: IncomingMessage): Promise<Buffer | null> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > maxBytes) return null;
      chunks.push(c as Buffer);
    }
    return Buffer.concat(chunks);
  }

  /** Checks the cost limits before a call: refused when the month's or the turn's spending reached its limit. */
  async function overLimit(caller: GatewayCaller, turn: GatewayTurn | null): Promise<string | null> {
    const limits = await deps.limits(caller.tenantId, caller.userId);
    if (limits.perRequest !== undefined && turn && turn.spent >= limits.perRequest) {
      deps.limitReached({ caller, turn, limit: 'per_request', limitUsd: limits.perRequest, spentUsd: turn.spent });
      return `this turn has spent $${turn.spent.toFixed(4)}, your per-request limit is $${limits.perRequest}`;
    }
    if (limits.perRequest !== undefined && limits.perRequest <= 0) return 'your role allows no spending per request';
    if (limits.monthly !== undefined) {
      const spent = await deps.spentThisMonth(caller.tenantId, caller.userId);
      if (spent >= limits.monthly) {
        deps.limitReached({ caller, turn, limit: 'monthly', limitUsd: limits.monthly, spentUsd: spent });
        return `your monthly cost limit is reached: $${spent.toFixed(2)} of $${limits.monthly} spent this month`;
      }
    }
    return null;
  }

  async function handle(caller: GatewayCaller, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const m = /^\/p\/([a-z0-9][a-z0-9-]{0,39})(\/.*)$/.exec(url.pathname);
    const given = (req.headers['x-api-key'] as string | undefined) ?? /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!given || !sameSecret(given, caller.credential)) {
      req.resume();
      return answer(res, 401, 'authentication_error', 'this credential is not the runtime\'s');
    }
    if (!m) {
      req.resume();
      return answer(res, 404, 'not_found_error', 'unknown gateway path');
    }
    const [, name, rest] = m;
    const { applied, providers } = await deps.providers(caller.tenantId);
    const provider = providers.find((p) => p.name === name);
    if (!provider || !provider.enabled || !applied?.providers.includes(name)) {
      req.resume();
      return answer(res, 404, 'not_found_error', `no applied provider "${name}"`);
    }
    if (!isModelPath(provider.kind, rest)) {
      req.resume();
      return answer(res, 403, 'permission_error', `${rest} is not a model endpoint this gateway forwards`);
    }
    const body = req.method === 'GET' || req.method === 'HEAD' ? Buffer.alloc(0) : await readBody(req);
    if (!body) return answer(res, 413, 'request_too_large', `a model call is at most ${maxBytes} bytes`);
    let model = '';
    if (body.length) {
      try {
        model = String(JSON.parse(body.toString('utf8')).model ?? '');
      } catch {
        return answer(res, 400, 'invalid_request_error', 'the request body is not JSON');
      }
      if (model && !provider.models.some((x) => x.id === model)) return answer(res, 404, 'not_found_error', `provider "${name}" lists no model "${model}"`);
    }
    const upstreamSession = req.headers['x-session-id'];
    const turn = typeof upstreamSession === 'string' && upstreamSession ? await deps.turnOf(caller.tenantId, caller.userId, upstreamSession) : null;
    if (rest !== '/models') {
      const refusal = await overLimit(caller, turn);
      // 402, not 429: the runtime's SDK retries a 429 (rate limit) forever; a spent budget is final for
      // this turn (or month), and the runtime reports it to the user as the turn's error.
      if (refusal) return answer(res, 402, 'cost_limit_exceeded', refusal);
    }

    const base = providerBaseUrl(provider);
    if (!base) return answer(res, 502, 'api_error', `provider "${name}" has no base URL`);
    const target = new URL(`${base}${rest}${url.search}`);
    const headers: http.OutgoingHttpHeaders = {};
    for (const h of FORWARDED_HEADERS) if (req.headers[h] !== undefined) headers[h] = req.headers[h];
    // The usage report is read from the stream: it must not be compressed.
    headers['accept-encoding'] = 'identity';
    if (body.length) headers['content-length'] = body.length;
    Object.assign(headers, providerAuthHeaders(provider.kind, provider.apiKeySealed ? deps.openKey(provider.apiKeySealed) : ''));
    const lib = target.protocol === 'https:' ? https : http;
    const upstream = lib.request(target, { method: req.method, headers, agent: target.protocol === 'https:' ? agents.https : agents.http });
    const tap = createUsageTap();
    upstream.on('response', (up) => {
      const back: http.OutgoingHttpHeaders = { ...up.headers };
      for (const h of RESPONSE_DROPPED) delete back[h];
      res.writeHead(up.statusCode ?? 502, back);
      res.flushHeaders();
      up.on('data', (chunk: Buffer) => {
        // Forwarded as it arrives; the tap only reads a copy. When the runtime reads slower than the
        // provider writes, the provider waits: otherwise the host would buffer the whole answer.
        if (!res.write(chunk)) {
          up.pause();
          res.once('drain', () => up.resume());
        }
        tap.push(chunk);
      });
      up.on('end', () => {
        res.end();
        const usage = tap.end();
        if (!usage || (up.statusCode ?? 500) >= 400) return;
        const modelId = model || usage.model || '';
        const costUsd = callCost(usage, modelPrice(provider, modelId, usage.model));
        const callId = `${caller.tenantId}:${String(up.headers['x-request-id'] ?? up.headers['request-id'] ?? crypto.randomUUID())}`;
        deps.record({ caller, turn, provider: name, model: modelId, usage, costUsd, callId }).catch((err) =>
          log.error({ err: (err as Error).message, provider: name, tokens: totalTokens(usage) }, 'could not record a model call\'s usage'),
        );
      });
      up.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => answer(res, 502, 'api_error', `provider "${name}" cannot be reached: ${err.message}`));
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    upstream.end(body);
  }

  return {
    /** Handles one request for the gateway host from a runtime (identified by its proxy listener). */
    handle(caller: GatewayCaller, req: IncomingMessage, res: ServerResponse, url: URL): void {
      handle(caller, req, res, url).catch((err) => {
        log.error({ err: (err as Error).message }, 'LLM gateway failed');
        answer(res, 500, 'api_error', 'the gateway failed');
      });
    },
  };
}

export type LlmGateway = ReturnType<typeof createLlmGateway>;
