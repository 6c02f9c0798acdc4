import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AuditInput } from '../audit/audit.service.js';
import type { Logger } from '../../kernel/logger.js';
import { GATEWAY_HOST, MCP_CONNECTOR_PATH_PREFIX } from '../runtime/host/agent-endpoints.js';
import type { RuntimeIdentity, RuntimeOwner, RuntimeSelf } from '../runtime/host/runtime-host.js';
import { mcpToolName } from '../runtime/runtime-tools.js';
import {
  classifyRequest,
  connectorNameOfPath,
  createSseSplitter,
  forwardedRequestHeaders,
  refusalOf,
  returnedResponseHeaders,
  screenAnswer,
  sseEvent,
  toolCallOutcome,
  type ClassifiedRequest,
} from './mcp-fns.js';
import type { McpServerGrant } from './mcp-servers.service.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { sendJson } from '../../lib/send-json.js';

/** One JSON-RPC message from the agent: a tool call's arguments, not a file upload. */
const MCP_CONNECTOR_MAX_BODY_BYTES = 1024 * 1024;
/** One answer (a JSON body, or one event of a stream) the gateway holds to screen it. */
const MCP_CONNECTOR_MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** How long a server may stay silent (no bytes) before the call is given up. */
const IDLE_TIMEOUT_MS = 5 * 60_000;
/** Requests of one user's agent in flight at once through the connectors: a turn needs a few. */
const MAX_IN_FLIGHT_PER_USER = 16;
/** How long a user's grant of a server is reused (a role or access change applies within this). */
const GRANT_CACHE_MS = 2000;

const RPC = { parseError: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602, internal: -32603 } as const;

/**
 * The audit entry a forwarded request gets once it ended: every tool call, resource read and prompt get
 * (what an agent did with the organisation's server), by what it named; null for the rest (lists, pings).
 * What it named is cut short: the agent chooses it (up to a whole message), and it goes into the audit
 * log and into the keys of the refusals remembered for a window.
 */
function auditedAs(request: ClassifiedRequest): { action: string; noun: string; key: string; details: Record<string, string> } | null {
  switch (request.kind) {
    case 'tool_call': {
      const tool = request.tool.slice(0, 128);
      return { action: 'mcp.tool_call', noun: 'tool', key: tool, details: { tool } };
    }
    case 'resource_read': {
      const uri = request.uri.slice(0, 500);
      return { action: 'mcp.resource_read', noun: 'resource', key: uri, details: { uri } };
    }
    case 'prompt_get': {
      const prompt = request.prompt.slice(0, 128);
      return { action: 'mcp.prompt_get', noun: 'prompt', key: prompt, details: { prompt } };
    }
    default:
      return null;
  }
}

/**
 * Who calls: the runtime's identity, and its self-view where the gateway host has one (the control plane's
 * always does): with one turn running, a tool call is that turn's; with several, the runtime is asked.
 */
type McpCaller = RuntimeIdentity & { self?: RuntimeSelf };

/**
 * The MCP connectors on the gateway host: `POST /mcp/connectors/<name>` from a runtime is
 * checked and forwarded to the tenant's real server with the server's credential added. The agent is
 * treated as hostile: it must present its runtime's own credential; its roles must grant the server
 * (every request) and, for tools/call, resources/read and prompts/get (and completions of a prompt or a
 * resource template), what they name; only the methods MCP defines, spelled exactly, are forwarded
 * (mcp-fns.ts MCP_FORWARDED_REQUESTS); only the transport's own headers are passed on (never its
 * Authorization or cookies); the body is bounded and forwarded as the gateway parsed it (no second
 * reading of an ambiguous document by the server); the URL comes from the database, never from the
 * request. The server is not trusted either: redirects are not followed, only responses and
 * notifications come back (no server-made requests), the tools, resources, templates and prompts it
 * lists are cut to the granted ones, and only the answer's type and session id headers are returned.
 */
export function createMcpGateway(deps: {
  grantOf: (tenantId: string, userId: string, name: string) => Promise<McpServerGrant | null>;
  /** The service's id of a runtime session of this user, or null. */
  sessionOf?: (owner: RuntimeOwner, upstreamSessionId: string) => Promise<string | null>;
  /** Writes one audit entry for the user's agent (its own transaction). */
  audit: (tenantId: string, entry: AuditInput) => void;
  /** The same, at most once per key in a window (refusals an agent could repeat in a loop). */
  auditOnce: (key: string, tenantId: string, entry: AuditInput) => void;
  log: Logger;
}) {
  const { log } = deps;
  const inFlight = new Map<string, number>();
  const grants = createPromiseCache<McpServerGrant | null>({ ttlMs: GRANT_CACHE_MS });
  const grantOf = (owner: RuntimeOwner, name: string) => grants.get(`${owner.tenantId}:${owner.userId}:${name}`, () => deps.grantOf(owner.tenantId, owner.userId, name));

  const rpcError = (id: string | number | null, code: number, message: string) => ({ jsonrpc: '2.0', id, error: { code, message: `agentws: ${message}` } });

  /** The audit entry of one tool call, resource read or prompt get, once it ended (the session is looked up meanwhile). */
  function auditCall(identity: McpCaller, server: string, what: NonNullable<ReturnType<typeof auditedAs>>, origin: Promise<string | null>, outcome: { ok: boolean; error?: string } | null, durationMs: number) {
    const owner = { tenantId: identity.tenantId, userId: identity.userId };
    void origin
      .catch(() => null)
      .then(async (upstream) => (upstream && deps.sessionOf ? deps.sessionOf(owner, upstream) : null))
      .catch(() => null)
      .then((sessionId) =>
        deps.audit(identity.tenantId, {
          action: what.action,
          target: `mcp:${server}`,
          userId: identity.userId,
          sessionId,
          durationMs,
          details: { server, ...what.details, outcome: outcome === null ? 'unknown' : outcome.ok ? 'ok' : 'error', ...(outcome?.error ? { error: outcome.error } : {}) },
        }),
      );
  }

  /** A refusal at the gateway, audited once per user, server and what it named in a window (an agent may retry in a loop). */
  const refused = (identity: McpCaller, server: string, what: { action: string; key: string; details: Record<string, string> }, reason: string) =>
    deps.auditOnce(`mcp:${identity.userId}:${server}:${what.action}:${what.key}`, identity.tenantId, {
      action: what.action,
      target: `mcp:${server}`,
      userId: identity.userId,
      details: { server, ...what.details, outcome: 'refused', reason },
    });

  async function serve(identity: McpCaller, name: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const given = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!given || !identity.credential || !sameSecret(given, identity.credential)) {
      req.resume();
      return sendJson(res, 401, rpcError(null, RPC.invalidRequest, "this credential is not the runtime's"));
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${GATEWAY_HOST}`) {
      req.resume();
      return sendJson(res, 403, rpcError(null, RPC.invalidRequest, 'cross-origin requests are refused'));
    }
    // No server-to-client stream (GET): through the gateway a server answers requests, it does not call the agent.
    if (req.method !== 'POST' && req.method !== 'DELETE') {
      req.resume();
      return sendJson(res, 405, rpcError(null, RPC.invalidRequest, 'POST JSON-RPC messages here'), { allow: 'POST, DELETE' });
    }
    const grant = await grantOf(identity, name);
    if (!grant) {
      req.resume();
      return sendJson(res, 403, rpcError(null, RPC.invalidRequest, `the MCP server "${name}" is not available to you (your roles do not include it, or it is not registered)`));
    }
    if (req.method === 'DELETE') {
      req.resume();
      return forward(identity, grant, req, res, null, { kind: 'other', id: null, method: 'DELETE' });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MCP_CONNECTOR_MAX_BODY_BYTES) return sendJson(res, 413, rpcError(null, RPC.invalidRequest, `a message is at most ${MCP_CONNECTOR_MAX_BODY_BYTES} bytes`), { connection: 'close' });
      chunks.push(c as Buffer);
    }
    let message: unknown;
    try {
      message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return sendJson(res, 400, rpcError(null, RPC.parseError, 'the body is not JSON'));
    }
    const request = classifyRequest(message);
    if (request.kind === 'invalid') return sendJson(res, 400, rpcError(null, RPC.invalidRequest, request.problem));
    if (request.kind === 'unknown_method') {
      // Never forwarded: a server reading method names loosely (`Tools/Call`, a trailing space) would run what was never checked.
      const method = request.method.slice(0, 100);
      refused(identity, name, { action: 'mcp.request_refused', key: method, details: { method } }, 'method not forwarded');
      const what = `the method "${method}" is not forwarded by the gateway (only MCP's own methods, spelled exactly)`;
      return request.id === null ? sendJson(res, 400, rpcError(null, RPC.methodNotFound, what)) : sendJson(res, 200, rpcError(request.id, RPC.methodNotFound, what));
    }
    const refusal = refusalOf(request, grant, name);
    if (refusal) {
      const what = auditedAs(request);
      if (what) refused(identity, name, what, `${what.noun} not allowed`);
      return sendJson(res, 200, rpcError('id' in request ? request.id : null, RPC.invalidParams, refusal));
    }
    // Re-serialised: the server reads exactly the document the gateway checked (a duplicate key, say,
    // cannot name one tool to the gateway and another to a server whose parser keeps the first).
    return forward(identity, grant, req, res, Buffer.from(JSON.stringify(message)), request);
  }

  function forward(identity: McpCaller, grant: McpServerGrant, req: IncomingMessage, res: ServerResponse, body: Buffer | null, request: ClassifiedRequest): Promise<void> {
    const started = performance.now();
    const audited = auditedAs(request);
    const call = request.kind === 'tool_call' ? request : null;
    // The turn making the call: the user's only running turn (known at once, no wait on the answer),
    // else, for a tool call, the runtime's running tool part with these arguments, looked for while the
    // tool runs (a resource read or a prompt is the runtime's own doing, not a tool part's).
    const self = identity.self;
    const running = audited && self ? [...self.runningSessions()] : [];
    const origin: Promise<string | null> = !audited || !self
      ? Promise.resolve(null)
      : running.length === 1
        ? Promise.resolve(running[0])
        : call
          ? self
              .toolCallOrigin({ tool: mcpToolName(grant.name, call.tool), input: Object.fromEntries(Object.entries(call.args).filter(([, v]) => v === null || typeof v !== 'object')) })
              .then((o) => o?.upstreamSessionId ?? null)
          : Promise.resolve(null);
    const requestId = audited && 'id' in request ? request.id : undefined;
    let outcome: { ok: boolean; error?: string } | null = null;
    const note = (m: unknown) => {
      if (audited && outcome === null && (m as { id?: unknown })?.id === requestId) outcome = toolCallOutcome(m);
    };
    let ended = false;
    const end = (why?: string) => {
      if (ended) return;
      ended = true;
      if (why && !outcome) outcome = { ok: false, error: why };
      if (audited) auditCall(identity, grant.name, audited, origin, outcome, Math.round(performance.now() - started));
    };

    return new Promise<void>((resolve) => {
      const target = new URL(grant.url);
      const headers = forwardedRequestHeaders(req.headers, grant.credential);
      if (body) headers['content-length'] = String(body.length);
      const client = target.protocol === 'https:' ? https : http;
      const up = client.request(target, { method: req.method, headers, timeout: IDLE_TIMEOUT_MS });
      const fail = (status: number, message: string) => {
        end(message);
        sendJson(res, status, rpcError('id' in request ? request.id : null, RPC.internal, message));
        resolve();
      };
      res.on('close', () => {
        if (!res.writableFinished) {
          up.destroy();
          end('the agent went away before the answer');
          resolve();
        }
      });
      up.on('timeout', () => up.destroy(new Error('the server stayed silent too long')));
      up.on('error', (err) => {
        log.warn({ err: err.message, server: grant.name }, 'an MCP connector call failed');
        if (res.headersSent) {
          end(err.message);
          res.destroy();
          return resolve();
        }
        fail(502, `the MCP server "${grant.name}" cannot be reached`);
      });
      up.on('response', (answer) => {
        const status = answer.statusCode ?? 502;
        // Never followed: a redirect would take the credential to wherever the server points.
        if (status >= 300 && status < 400) {
          answer.resume();
          return fail(502, `the MCP server "${grant.name}" answered with a redirect, which the gateway does not follow`);
        }
        if (status === 401 || status === 403 || status === 407) {
          answer.resume();
          return fail(502, `the MCP server "${grant.name}" refused the connector's credential: an admin must update it`);
        }
        if (status >= 500) {
          answer.resume();
          return fail(502, `the MCP server "${grant.name}" failed (HTTP ${status})`);
        }
        const back = returnedResponseHeaders(answer.headers);
        const type = (back['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (type === 'text/event-stream') return streamEvents(answer, status, back);
        if (type === 'application/json') return screenJson(answer, status, back);
        answer.resume();
        if (!type && (status === 202 || status === 204 || Number(answer.headers['content-length'] ?? 0) === 0)) {
          sendJson(res, status, undefined, back);
          end();
          return resolve();
        }
        fail(502, `the MCP server "${grant.name}" answered ${type || 'without a content type'}, not JSON or an event stream`);
      });

      /** A stream, passed on event by event as it arrives (no buffering beyond the event being read). */
      function streamEvents(answer: IncomingMessage, status: number, back: Record<string, string>) {
        res.writeHead(status, { ...back, 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
        res.flushHeaders();
        const splitter = createSseSplitter(MCP_CONNECTOR_MAX_ANSWER_BYTES);
        answer.setEncoding('utf8');
        answer.on('data', (chunk: string) => {
          let out = '';
          try {
            for (const ev of splitter.push(chunk)) {
              let screened: unknown | null = null;
              if (ev.data !== null) {
                let m: unknown;
                try {
                  m = JSON.parse(ev.data);
                } catch {
                  continue; // not a JSON-RPC message: nothing the agent's client could use
                }
                screened = screenAnswer(m, request, grant);
                note(screened);
              }
              out += sseEvent(ev.fields, screened);
            }
          } catch (err) {
            answer.destroy();
            end((err as Error).message);
            res.destroy();
            return resolve();
          }
          if (out) res.write(out);
        });
        answer.on('end', () => {
          end();
          res.end();
          resolve();
        });
        answer.on('error', () => {
          end('the server broke off its answer');
          res.destroy();
          resolve();
        });
      }

      /** One JSON answer: held whole (it is one message) to be screened, then sent. */
      function screenJson(answer: IncomingMessage, status: number, back: Record<string, string>) {
        const parts: Buffer[] = [];
        let got = 0;
        answer.on('data', (c: Buffer) => {
          got += c.length;
          if (got > MCP_CONNECTOR_MAX_ANSWER_BYTES) {
            answer.destroy();
            return fail(502, `the MCP server "${grant.name}" answered more than ${MCP_CONNECTOR_MAX_ANSWER_BYTES} bytes`);
          }
          parts.push(c);
        });
        answer.on('end', () => {
          if (got > MCP_CONNECTOR_MAX_ANSWER_BYTES) return;
          let m: unknown;
          try {
            m = JSON.parse(Buffer.concat(parts).toString('utf8'));
          } catch {
            return fail(502, `the MCP server "${grant.name}" answered malformed JSON`);
          }
          // A JSON answer is the response; an array (a batch's answers) is not asked for.
          const screened = screenAnswer(m, request, grant);
          note(screened);
          if (screened === null) return fail(502, `the MCP server "${grant.name}" answered something other than a response`);
          sendJson(res, status, screened, back);
          end();
          resolve();
        });
        answer.on('error', () => fail(502, `the MCP server "${grant.name}" broke off its answer`));
      }

      up.end(body ?? undefined);
    });
  }

  return {
    /** Whether a gateway-host path is the connectors' (the caller hands such requests to `handle`). */
    owns: (pathname: string) => pathname.startsWith(MCP_CONNECTOR_PATH_PREFIX),
    /** Serves one request of a runtime on the gateway host. */
    handle(identity: McpCaller, req: IncomingMessage, res: ServerResponse, url: URL): void {
      const name = connectorNameOfPath(url.pathname);
      if (!name) {
        req.resume();
        return sendJson(res, 404, rpcError(null, RPC.invalidRequest, 'no such MCP connector: the path is /mcp/connectors/<name>'));
      }
      const n = inFlight.get(identity.userId) ?? 0;
      if (n >= MAX_IN_FLIGHT_PER_USER) {
        req.resume();
        return sendJson(res, 429, rpcError(null, RPC.invalidRequest, `at most ${MAX_IN_FLIGHT_PER_USER} MCP connector requests at once`));
      }
      inFlight.set(identity.userId, n + 1);
      serve(identity, name, req, res)
        .catch((err) => {
          log.error({ err: (err as Error).message, server: name }, 'MCP connector gateway failed');
          sendJson(res, 500, rpcError(null, RPC.internal, 'the connector gateway failed'));
        })
        .finally(() => {
          const left = (inFlight.get(identity.userId) ?? 1) - 1;
          if (left > 0) inFlight.set(identity.userId, left);
          else inFlight.delete(identity.userId);
        });
    },
  };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
