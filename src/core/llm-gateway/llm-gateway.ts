import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { ProviderRow } from '../providers/providers.repo.js';
import type { AppliedState } from '../runtime/runtime.repo.js';
import type { CallPrice } from '../usage/spending-fns.js';
import type { HeldCall, HoldResult, SpendingTurn } from '../usage/spending.service.js';
import { asksLongCache, callFormat, chargeCall, estimateInputTokens, maxOutputTokens, withMaxOutput, withUsageReport, worstInputPerMTok, type CallEstimate } from './model-call-fns.js';
import { isModelPath, modelPrice, providerAuthHeaders, providerBaseUrl } from './provider-endpoint.js';
import { createUsageTap, totalTokens, type CallUsage } from './usage-tap.js';

/**
 * The LLM gateway: provider API keys never enter a runtime. A runtime's provider configuration points at
 * `http://llm.agentws.internal/p/<provider>` (reached through its egress proxy) with a credential made
 * for that runtime when it started; the gateway checks it, adds the tenant's real key, forwards the call
 * to the provider and streams the answer back, chunk by chunk as it arrives. On the way it reads the
 * provider's own usage report (usage-tap.ts) and records tokens and cost of the call.
 *
 * The agent can read its runtime's configuration, so it can call the gateway itself: with its own
 * credential, for the model endpoints below only (never files, fine-tuning or anything else a provider
 * key could do), and with whatever body and headers it likes. So every call that reaches a provider is
 * counted and capped, whatever the client sends or does (model-call-fns.ts has the wire rules):
 * - a streamed OpenAI-style call is asked for its usage report; an answer without one is charged an
 *   estimate; a client that hangs up does not end the bill: the answer is read on (bounded, DRAIN);
 * - before it is forwarded, a call holds its worst case against its user's limits (spending.service.ts),
 *   its output limit lowered when only that fits, or is refused (402); the hold is settled with the record;
 * - a call whose runtime went away (its turn lost: cutCalls) or that is still running when the service
 *   stops (stop) is aborted at once and charged the estimate; one whose process dies first is recorded
 *   from its hold when the service comes back (spending.service.ts settleOrphans).
 */
export interface GatewayCaller {
  tenantId: string;
  userId: string;
  /** The credential this runtime was started with (revoked when it stops). */
  credential: string;
}

/** Request headers passed on to the provider (everything else, credentials included, stays here). */
const FORWARDED_HEADERS = ['content-type', 'accept', 'user-agent', 'anthropic-version', 'anthropic-beta', 'openai-beta', 'openai-organization', 'openai-project'];
const RESPONSE_DROPPED = ['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'proxy-connection'];
/** A model call's request body (images included) is at most this big. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;

/** The turn (or plan) a call counts against for the per-request limit (spending.service.ts). */
export type GatewayTurn = SpendingTurn;

/** A call's usage as recorded: the provider's report, or the gateway's estimate when it gave none. */
export interface SettledCall<C extends GatewayCaller = GatewayCaller> {
  caller: C;
  turn: GatewayTurn | null;
  provider: string;
  model: string;
  usage: CallUsage;
  costUsd: number;
  callId: string;
  /** The provider reported no usage (or the answer was cut off): charged the gateway's estimate. */
  estimated: boolean;
}

/** The deps of a gateway whose callers are C (the control plane's carry their runtime's self-view). */
export interface GatewayDeps<C extends GatewayCaller = GatewayCaller> {
  /** The tenant's providers and what was applied (cached briefly by the caller). */
  providers(tenantId: string): Promise<{ applied: AppliedState | null; providers: ProviderRow[] }>;
  openKey(sealed: string): string;
  /**
   * The turn a call counts against: the session the call names (`x-session-id`, the runtime's say-so)
   * only when a turn of the caller runs in it, else the caller's latest turn; null when they have none.
   */
  turnOf(caller: C, namedSession: string | null): Promise<GatewayTurn | null>;
  /**
   * Whether the caller may have a call run on this model ("<provider>/<model id>"): the agent can
   * call the gateway itself and name any model of an applied provider, so the role's allow-list is held
   * here too, not only where turns start. Absent: every listed model.
   */
  mayUseModel?(caller: C, turn: GatewayTurn | null, ref: string): Promise<boolean>;
  /**
   * Holds the most a call may cost against the caller's limits before it is forwarded (or refuses it),
   * with what its record needs should this process die before it settles.
   */
  hold(caller: C, turn: GatewayTurn | null, price: CallPrice, call: HeldCall): Promise<HoldResult>;
  /** Records a call that reached a provider, and drops its hold. */
  settle(holdId: string | null, call: SettledCall<C>): Promise<void>;
  /** Drops the hold of a call that cost nothing (the provider refused it, or it never reached the provider). */
  release(caller: C, holdId: string | null): Promise<void>;
  /** A call refused for a cost limit (audited once per turn or month by the caller). */
  limitReached(call: { caller: C; turn: GatewayTurn | null; limit: 'monthly' | 'per_request'; limitUsd: number; spentUsd: number }): void;
  /** The largest request body accepted, in bytes (MAX_REQUEST_BYTES unless given). */
  maxRequestBytes?: number;
  /** How long and how much of an answer is still read after the client hung up (DRAIN unless given). */
  drain?: { ms: number; bytes: number };
  clock: Clock;
  log: Logger;
}

/**
 * After the client hangs up, the answer is still read to its end (the provider bills it whether or not
 * anyone listens, and its usage report comes last), for at most this long and this much; beyond that the
 * call is cut and charged the gateway's estimate.
 */
const DRAIN = { ms: 120_000, bytes: 16 * 1024 * 1024 };

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

/** A call forwarded and not yet settled: whose it is, when it started, and how to abort it now. */
interface InFlight {
  caller: GatewayCaller;
  startedAt: number;
  /** Aborts the provider call and charges it as cut (the estimate, or what the provider reported if more). */
  cut(): void;
}

export function createLlmGateway<C extends GatewayCaller = GatewayCaller>(deps: GatewayDeps<C>) {
  const { log } = deps;
  const maxBytes = deps.maxRequestBytes ?? MAX_REQUEST_BYTES;
  const inFlight = new Set<InFlight>();
  /** Records and releases on their way to the database: a stopping service waits for them. */
  const writing = new Set<Promise<unknown>>();
  let stopped = false;
  const track = (p: Promise<void>): Promise<void> => {
    writing.add(p);
    void p.finally(() => writing.delete(p));
    return p;
  };

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

  /** The refusal a runtime shows its user when a limit stops a call. */
  function refusalText(r: Extract<HoldResult, { ok: false }>): string {
    const usd = (n: number) => `$${n < 1 ? n.toFixed(4) : n.toFixed(2)}`;
    const left = Math.max(0, r.limitUsd - r.spentUsd);
    if (r.limit === 'per_request') {
      if (r.limitUsd <= 0) return 'your role allows no spending per request';
      if (left <= 0) return `this turn has spent ${usd(r.spentUsd)}, your per-request limit is $${r.limitUsd}`;
      return `this call could cost up to ${usd(r.needUsd)}, more than the ${usd(left)} your per-request limit ($${r.limitUsd}) leaves this turn`;
    }
    if (left <= 0) return `your monthly cost limit is reached: ${usd(r.spentUsd)} of $${r.limitUsd} spent this month`;
    return `this call could cost up to ${usd(r.needUsd)}, more than the ${usd(left)} your monthly cost limit ($${r.limitUsd}) leaves`;
  }

  async function handle(caller: C, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (stopped) {
      req.resume();
      return answer(res, 503, 'api_error', 'the service is stopping; try again in a moment');
    }
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
    let body = req.method === 'GET' || req.method === 'HEAD' ? Buffer.alloc(0) : await readBody(req);
    if (!body) return answer(res, 413, 'request_too_large', `a model call is at most ${maxBytes} bytes`);
    const format = callFormat(provider.kind, rest);
    let json: Record<string, unknown> | null = null;
    if (body.length) {
      try {
        const parsed: unknown = JSON.parse(body.toString('utf8'));
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed as Record<string, unknown>;
      } catch {
        // answered below
      }
      if (!json) return answer(res, 400, 'invalid_request_error', 'the request body is not a JSON object');
    }
    const model = typeof json?.model === 'string' ? json.model : '';
    if (model && !provider.models.some((x) => x.id === model)) return answer(res, 404, 'not_found_error', `provider "${name}" lists no model "${model}"`);

    // A model answer is billed: it is counted, held against the caller's limits and recorded. The model
    // must be named (a call without one would run on the provider's default, at a price nobody set).
    let billing: { turn: GatewayTurn | null; holdId: string | null; limited: boolean; estimate: CallEstimate } | null = null;
    if (format !== 'free') {
      if (!json || !model) return answer(res, 400, 'invalid_request_error', 'a model call must name its model ("model")');
      const named = req.headers['x-session-id'];
      const turn = await deps.turnOf(caller, typeof named === 'string' && named ? named : null);
      if (deps.mayUseModel && !(await deps.mayUseModel(caller, turn, `${name}/${model}`))) {
        return answer(res, 403, 'permission_error', `your role may not use the model ${name}/${model}`);
      }
      let call = withUsageReport(format, json);
      const price = modelPrice(provider, model);
      const input = estimateInputTokens(call);
      const longCache = asksLongCache(format, call);
      const maxOutput = maxOutputTokens(format, call, provider.models.find((x) => x.id === model)?.outputLimit);
      // How the provider will serve the input (plain, from its cache, into it) is known only after: its worst case is held.
      const held = await deps.hold(caller, turn, { inputUsd: (input * worstInputPerMTok(price, longCache)) / 1e6, outputUsdPerToken: price.outputPerMTok / 1e6, maxOutput }, { provider: name, model, inputTokens: input });
      if (!held.ok) {
        deps.limitReached({ caller, turn, limit: held.limit, limitUsd: held.limitUsd, spentUsd: held.spentUsd });
        // 402, not 429: the runtime's SDK retries a 429 (rate limit) forever; a spent budget is final for
        // this turn (or month), and the runtime reports it to the user as the turn's error.
        return answer(res, 402, 'cost_limit_exceeded', refusalText(held));
      }
      // What the caller may still spend pays for less than the call asked: its output limit is lowered to fit.
      if (held.cut) call = withMaxOutput(format, call, held.maxOutput);
      if (call !== json) body = Buffer.from(JSON.stringify(call));
      billing = { turn, holdId: held.holdId, limited: held.limited, estimate: { input, output: held.maxOutput, longCache } };
    }

    const base = providerBaseUrl(provider);
    if (!base) {
      await deps.release(caller, billing?.holdId ?? null);
      return answer(res, 502, 'api_error', `provider "${name}" has no base URL`);
    }
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

    /** Once per call: recorded with the provider's usage (or the estimate), or released when it cost nothing. */
    let settled = false;
    const settle = (outcome: 'answered' | 'cut' | 'free', requestId?: string): Promise<void> => {
      inFlight.delete(entry);
      if (settled || !billing) return Promise.resolve();
      settled = true;
      const b = billing;
      if (outcome === 'free') {
        return track(deps.release(caller, b.holdId).catch((err) => log.error({ err: (err as Error).message }, 'could not release a model call\'s hold')));
      }
      const reported = tap.end();
      // What the provider reported, each kind of token at its price; cut off or unreported, the estimate (model-call-fns.ts).
      const { usage, costUsd, estimated } = chargeCall(outcome, reported, b.estimate, modelPrice(provider, model, reported?.model));
      const callId = `${caller.tenantId}:${requestId ?? crypto.randomUUID()}`;
      return track(
        deps.settle(b.holdId, { caller, turn: b.turn, provider: name, model: model || usage.model || '', usage, costUsd, callId, estimated }).catch((err) =>
          log.error({ err: (err as Error).message, provider: name, tokens: totalTokens(usage) }, 'could not record a model call\'s usage'),
        ),
      );
    };

    // The client (the runtime, or the agent calling the gateway itself) may hang up at any moment; the
    // provider has the request and bills it regardless: read on, bounded, and charge what it reports.
    let clientGone = false;
    let drained = 0;
    let drainTimer: NodeJS.Timeout | null = null;
    const drain = deps.drain ?? DRAIN;
    const cut = () => {
      upstream.destroy();
      settle('cut');
    };
    const entry: InFlight = {
      caller,
      startedAt: Date.now(),
      cut: () => {
        if (drainTimer) clearTimeout(drainTimer);
        cut();
        if (!clientGone) res.destroy();
      },
    };
    inFlight.add(entry);
    res.on('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      if (!billing) return void upstream.destroy();
      drainTimer = setTimeout(cut, drain.ms);
      drainTimer.unref();
    });

    upstream.on('response', (up) => {
      const status = up.statusCode ?? 502;
      const requestId = String(up.headers['x-request-id'] ?? up.headers['request-id'] ?? '') || undefined;
      // Providers do not bill a refused call.
      if (status >= 400) settle('free');
      if (!clientGone) {
        const back: http.OutgoingHttpHeaders = { ...up.headers };
        for (const h of RESPONSE_DROPPED) delete back[h];
        res.writeHead(status, back);
        res.flushHeaders();
      }
      up.on('data', (chunk: Buffer) => {
        tap.push(chunk);
        if (clientGone) {
          drained += chunk.length;
          if (drained > drain.bytes) cut();
          return;
        }
        // Forwarded as it arrives; the tap only reads a copy. When the runtime reads slower than the
        // provider writes, the provider waits: otherwise the host would buffer the whole answer.
        if (!res.write(chunk)) {
          up.pause();
          const resume = () => {
            res.off('close', resume);
            res.off('drain', resume);
            up.resume();
          };
          res.once('drain', resume);
          res.once('close', resume);
        }
      });
      up.on('end', () => {
        if (drainTimer) clearTimeout(drainTimer);
        // A call held against a limit ends for its client once it is recorded: the runtime's next call
        // (its next step, at once) is then measured against what this one cost, not against its worst
        // case still held, which could refuse it near the limit. Other calls end first, recorded after.
        if (billing?.limited && !settled) {
          void settle('answered', requestId).finally(() => {
            if (!clientGone) res.end();
          });
          return;
        }
        if (!clientGone) res.end();
        void settle('answered', requestId);
      });
      up.on('error', () => {
        if (drainTimer) clearTimeout(drainTimer);
        res.destroy();
        settle('cut');
      });
    });
    upstream.on('error', (err) => {
      inFlight.delete(entry);
      if (drainTimer) clearTimeout(drainTimer);
      // Nothing came back: the call did not reach the provider, or it reached it and failed before answering.
      if (!settled && billing) settle(clientGone ? 'cut' : 'free');
      if (!clientGone) answer(res, 502, 'api_error', `provider "${name}" cannot be reached: ${err.message}`);
    });
    upstream.end(body);
  }

  return {
    /** Handles one request for the gateway host from a runtime (identified by its proxy listener). */
    handle(caller: C, req: IncomingMessage, res: ServerResponse, url: URL): void {
      handle(caller, req, res, url).catch((err) => {
        log.error({ err: (err as Error).message }, 'LLM gateway failed');
        answer(res, 500, 'api_error', 'the gateway failed');
      });
    },

    /**
     * The user's runtime went away mid-turn (it died, its runner was lost): nobody will read the answers of
     * its calls still in flight, which the provider bills as long as they run. Those that started before
     * `before` (not a restarted runtime's) are aborted now and charged the estimate; how many.
     */
    cutCalls(owner: { tenantId: string; userId: string }, before = Date.now()): number {
      let n = 0;
      for (const c of [...inFlight]) {
        if (c.caller.tenantId !== owner.tenantId || c.caller.userId !== owner.userId || c.startedAt > before) continue;
        c.cut();
        n++;
      }
      if (n) log.warn({ userId: owner.userId, calls: n }, 'model calls of a runtime that went away were aborted and charged the estimate');
      return n;
    },

    /** Calls in flight now. */
    get inFlight(): number {
      return inFlight.size;
    },

    /**
     * The service stops: new calls are refused (503, which the runtime retries), every call in flight is
     * aborted and charged the estimate, and this resolves once each is recorded. How many were cut.
     */
    async stop(): Promise<number> {
      stopped = true;
      const n = inFlight.size;
      for (const c of [...inFlight]) c.cut();
      await Promise.allSettled([...writing]);
      return n;
    },

    /** Takes calls again after stop() (the runtimes are served again in this process). */
    resume(): void {
      stopped = false;
    },
  };
}
