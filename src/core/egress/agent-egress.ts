import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Database, Queryable } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import { ConflictError, RateLimitedError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/logger.js';
import { createLlmGateway } from '../llm-gateway/llm-gateway.js';
import { modelAllowed, type RbacPermissions } from '../../kernel/permissions.js';
import type { AgentMemoriesService } from '../memories/agent-memories.service.js';
import type { MemoryOwner } from '../memories/memory-writes.js';
import { acceptableVersionHeader, handleMcpMessage, MCP_MAX_BODY_BYTES, MEMORY_MCP_PATH, MEMORY_MCP_SERVER, RPC, type McpAnswer, type MemoryToolPort } from '../memories/memory-mcp.js';
import { UNKNOWN_SELF, type AgentIdentity, type RuntimeOwner, type RuntimeSelf } from '../runtime/host/runtime-host.js';
import { mcpToolName } from '../runtime/runtime-tools.js';
import type { ProvidersRepo } from '../providers/providers.repo.js';
import type { RuntimeRepo } from '../runtime/runtime.repo.js';
import type { SessionRow, SessionsRepo } from '../sessions/sessions.repo.js';
import type { TurnsRepo } from '../sessions/turns.repo.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { SpendingService, SpendingTurn } from '../usage/spending.service.js';
import { createEgressDecider } from '../runtime/host/egress-decider.js';
import { parsePrivateAllow, type EgressRules } from '../runtime/host/egress-policy.js';
import { createEgressProxy, GATEWAY_HOST } from '../runtime/host/egress-proxy.js';
import { createGitGateway } from '../connectors/git-gateway.js';
import type { GitHostsService } from '../connectors/git-hosts.service.js';
import { createMcpGateway } from '../connectors/mcp-gateway.js';
import type { McpServersService } from '../connectors/mcp-servers.service.js';
import { createPromiseCache } from '../../lib/promise-cache.js';
import { sendJson } from '../../lib/send-json.js';

/** How long a tenant's egress rules are reused (a change reaches running agents within this). */
const CACHE_MS = 2000;
/** One audit entry per runtime and target in this window (an agent retrying in a loop is one event). */
const DENIAL_AUDIT_WINDOW_MS = 10 * 60_000;
/**
 * Memory tool calls one user's agent may make per minute: plenty for a turn, and a runaway or hostile
 * agent cannot fill the user's memories (each save is a row and an audit entry) or load the database.
 */
const MEMORY_CALLS_PER_MINUTE = { save: 20, search: 120 } as const;

/**
 * The agents' way out, as the appliance wires it: the egress proxy (one listener per runtime) deciding
 * every connection by the tenant's domain lists, the operator's trusted private hosts and the public-
 * address rule, with refusals audited; and the LLM gateway behind the proxy's virtual host, adding the
 * provider keys, recording each call's usage from the provider's own report and holding the cost limits.
 */
export function createAgentEgress(deps: {
  db: Database;
  box: SecretBox;
  audit: AuditService;
  /** Cost limits: what a model call may hold before it runs, and its record when it ends. */
  spending: Pick<SpendingService, 'hold' | 'settle' | 'release' | 'latestTurn'>;
  runtimeRepo: RuntimeRepo;
  providers: Pick<ProvidersRepo, 'list'>;
  sessionsRepo: SessionsRepo;
  turnsRepo: Pick<TurnsRepo, 'turnSpent'>;
  tenantsRepo: TenantsRepo;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  /** What the memory tools (MCP on the gateway host) do, always for the runtime's own user. */
  memories: Pick<AgentMemoriesService, 'searchForAgent' | 'saveFromAgent'>;
  privateAllow: string;
  /** Ports open to every tenant's agents besides 80 and 443 (AGENTWS_EGRESS_PORTS). */
  egressPorts: readonly number[];
  /**
   * Plans (orchestrator): what a plan has spent as a whole (its sessions share the plan's per-request
   * limit), read in a transaction; and a call recorded for one of its sessions.
   */
  plans?: {
    planSpent(q: Queryable, tenantId: string, planId: string): Promise<number>;
    spent(tenantId: string, sessionId: string): Promise<void>;
    /** A call of the plan was refused for its per-request limit: its budget is spent. */
    refused(tenantId: string, planId: string): Promise<void>;
  };
  /** The tenants' git hosts: the git gateway at /git/ on the gateway host (git-gateway.ts). */
  gitHosts?: Pick<GitHostsService, 'forAgent'>;
  /** Puts an event on a session's stream: what a gateway tells the person (their git connection fell back, say). */
  sessionEvents?: (sessionId: string, type: string, properties: Record<string, unknown>) => Promise<void>;
  /** The tenants' MCP connectors: forwarded at /mcp/connectors/<name> on the gateway host (mcp-gateway.ts). */
  mcpServers?: Pick<McpServersService, 'grantOf'>;
  /**
   * Whether a runtime's owner is still an active person (auth/active-users.ts: cached, a boolean when
   * known). Absent: every owner is.
   */
  ownerActive?: (tenantId: string, userId: string) => boolean | Promise<boolean>;
  clock: Clock;
  log: Logger;
}) {
  const { db, log, clock } = deps;
  const decider = createEgressDecider({ privateAllow: parsePrivateAllow(deps.privateAllow).entries, ports: deps.egressPorts });
  const cache = createPromiseCache<unknown>({ ttlMs: CACHE_MS });
  const cached = <T>(key: string, load: () => Promise<T>): Promise<T> => cache.get(key, load) as Promise<T>;
  const audited = new Map<string, number>();
  const systemCtx = (tenantId: string): Ctx => ({ tenantId, actor: { kind: 'system', name: 'agent-egress' }, channel: 'agent', log, requestId: 'agent-egress' });
  const auditOnce = (key: string, tenantId: string, entry: Parameters<AuditService['record']>[2]) => {
    const now = Date.now();
    if ((audited.get(key) ?? 0) > now - DENIAL_AUDIT_WINDOW_MS) return;
    audited.set(key, now);
    if (audited.size > 10_000) audited.clear();
    void db.transaction((tx) => deps.audit.record(tx, systemCtx(tenantId), entry)).catch((err) => log.error({ err: (err as Error).message }, 'could not audit an egress event'));
  };

  const tenantRules = (tenantId: string) =>
    cached(`rules:${tenantId}`, async (): Promise<EgressRules> => {
      const t = await deps.tenantsRepo.findById(db, tenantId);
      const e = (t?.settings as { egress?: Partial<EgressRules> } | undefined)?.egress;
      return { allow: e?.allow ?? [], deny: e?.deny ?? [], ports: e?.ports ?? [] };
    });

  const monthStart = () => {
    const now = clock.now();
    return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  };

  /**
   * The turn a model call counts against. The runtime names the session in `x-session-id`, but the agent
   * can call the gateway itself with any header or none: the name is believed only for a session in which
   * the caller's runtime runs a turn now (its own status events); any other call counts against the
   * user's latest turn (a process the agent left running after its turn spends that turn's budget, not a
   * fresh one).
   */
  async function turnOf(caller: RuntimeOwner, named: string | null, self: RuntimeSelf = UNKNOWN_SELF): Promise<SpendingTurn | null> {
    const { tenantId, userId } = caller;
    let s: SessionRow | null = null;
    if (named && self.runningSessions().has(named)) {
      const found = await deps.sessionsRepo.byUpstreamId(db, named);
      if (found && found.tenantId === tenantId && found.ownerId === userId) s = found;
    }
    if (!s) {
      const latest = await deps.spending.latestTurn(tenantId, userId);
      s = latest ? await deps.sessionsRepo.byId(db, tenantId, latest.sessionId) : null;
    }
    if (!s) return null;
    const session = s;
    const planId = deps.plans ? session.planId : null;
    return {
      sessionId: session.id,
      channel: session.channel,
      budgetKey: planId ? `plan:${planId}` : `session:${session.id}`,
      recorded: (q) => (planId ? deps.plans!.planSpent(q, tenantId, planId) : deps.turnsRepo.turnSpent(q, tenantId, session.id)),
      models: session.model ? [session.model] : [],
    };
  }

  const gateway = createLlmGateway<AgentIdentity>({
    // Read for every call (not cached): a key rotated or a base URL moved applies to the very next call.
    providers: async (tenantId) => {
      const [providers, settings] = await Promise.all([deps.providers.list(db, tenantId), deps.runtimeRepo.settings(db, tenantId)]);
      return { applied: settings?.applied ?? null, providers };
    },
    openKey: (sealed) => deps.box.open(sealed),
    turnOf: (caller, named) => turnOf(caller, named, caller.self),
    // The role's allow-list, as where turns start: the admins' choices (the tenant's default, the
    // session's template's model) always; the owner's roles' models.allowed otherwise.
    mayUseModel: async (caller, turn, ref) => {
      if (modelAllowed(await deps.permissionsOf(caller.tenantId, caller.userId), ref)) return true;
      if (turn?.models?.includes(ref)) return true;
      return (await deps.runtimeRepo.settings(db, caller.tenantId))?.applied?.defaultModel === ref;
    },
    hold: (caller, turn, price, call) => deps.spending.hold(caller, turn, price, call),
    release: (caller, holdId) => deps.spending.release(caller.tenantId, holdId),
    settle: async (holdId, { caller, turn, provider, model, usage, costUsd, callId, estimated }) => {
      await deps.spending.settle(holdId, {
        tenantId: caller.tenantId,
        userId: caller.userId,
        sessionId: turn?.sessionId ?? null,
        messageId: callId,
        model,
        provider,
        tokens: { input: usage.input, output: usage.output, reasoning: usage.reasoning, cacheRead: usage.cacheRead, cacheWrite: usage.cacheWrite },
        costUsd,
        channel: turn?.channel ?? 'agent',
        estimated,
      });
      if (turn && deps.plans) void deps.plans.spent(caller.tenantId, turn.sessionId).catch((err) => log.error({ err: (err as Error).message }, 'could not check a plan\'s budget'));
    },
    limitReached: ({ caller, turn, limit, limitUsd, spentUsd }) => {
      const planId = limit === 'per_request' && turn?.budgetKey.startsWith('plan:') ? turn.budgetKey.slice('plan:'.length) : null;
      if (planId && deps.plans) void deps.plans.refused(caller.tenantId, planId).catch((err) => log.error({ err: (err as Error).message }, 'could not stop a plan at its budget'));
      auditOnce(`limit:${caller.userId}:${limit}:${limit === 'monthly' ? monthStart().toISOString() : turn?.budgetKey}`, caller.tenantId, {
        action: 'cost.limit_reached',
        target: turn ? `session:${turn.sessionId}` : `user:${caller.userId}`,
        sessionId: turn?.sessionId,
        userId: caller.userId,
        details: { limit, limitUsd, costUsd: Math.round(spentUsd * 1e6) / 1e6 },
      });
    },
    clock,
    log,
  });

  /** Sliding one-minute windows of memory tool calls, per user and tool. */
  const memoryCalls = new Map<string, number[]>();
  const withinRate = (userId: string, tool: keyof typeof MEMORY_CALLS_PER_MINUTE): boolean => {
    const key = `${userId}:${tool}`;
    const now = clock.now().getTime();
    const recent = (memoryCalls.get(key) ?? []).filter((t) => t > now - 60_000);
    if (recent.length >= MEMORY_CALLS_PER_MINUTE[tool]) return false;
    recent.push(now);
    memoryCalls.set(key, recent);
    if (memoryCalls.size > 10_000) memoryCalls.clear();
    return true;
  };

  const tooManyCalls = (tool: keyof typeof MEMORY_CALLS_PER_MINUTE) => new RateLimitedError(`too many memory ${tool} calls: at most ${MEMORY_CALLS_PER_MINUTE[tool]} a minute`);

  /** The memory tools bound to the runtime's user: nothing the agent sends can name another owner. */
  const memoryTools = (identity: AgentIdentity): MemoryToolPort => {
    const owner: MemoryOwner = { tenantId: identity.tenantId, userId: identity.userId };
    return {
      async search(input) {
        if (!withinRate(owner.userId, 'search')) throw tooManyCalls('search');
        return deps.memories.searchForAgent(owner, input);
      },
      async save(input) {
        if (!withinRate(owner.userId, 'save')) throw tooManyCalls('save');
        // Provenance: the turn making the call, as the runtime itself shows it (see runtime-tool-calls.ts).
        const origin = await identity.self.toolCallOrigin({ tool: mcpToolName(MEMORY_MCP_SERVER, 'save'), input: { kind: input.kind, content: input.content } });
        // A save no running turn made (a background process after the turn ended, say) has no provenance.
        if (!origin) throw new ConflictError('memories can only be saved during a running turn of your session (this call could not be matched to one)');
        return deps.memories.saveFromAgent(owner, { ...input, sessionId: origin.upstreamSessionId, messageId: origin.messageId });
      },
    };
  };

  const rpcError = (code: number, message: string) => ({ jsonrpc: '2.0', id: null, error: { code, message: `agentws: ${message}` } });

  /**
   * The memory MCP server (Streamable HTTP, JSON answers only) on the gateway host. Who is asking is the
   * proxy listener the request arrived on (the identity), and the request must also carry that runtime's
   * own credential, as model calls do: a credential of another runtime, or none, is refused.
   */
  async function serveMemoryMcp(identity: AgentIdentity, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const given = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!given || !identity.credential || !sameSecret(given, identity.credential)) {
      req.resume();
      return sendJson(res, 401, rpcError(RPC.invalidRequest, "this credential is not the runtime's"));
    }
    // Browsers are the DNS-rebinding risk the spec's Origin rule is about; a runtime sends none, or ours.
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${GATEWAY_HOST}`) {
      req.resume();
      return sendJson(res, 403, rpcError(RPC.invalidRequest, 'cross-origin requests are refused'));
    }
    // No server-to-client stream (GET) and no protocol sessions to end (DELETE): POST only, as the spec allows.
    if (req.method !== 'POST') {
      req.resume();
      return sendJson(res, 405, rpcError(RPC.invalidRequest, 'POST JSON-RPC messages here'), { allow: 'POST' });
    }
    if (!acceptableVersionHeader(req.headers['mcp-protocol-version'])) {
      req.resume();
      return sendJson(res, 400, rpcError(RPC.invalidRequest, `unsupported MCP-Protocol-Version ${String(req.headers['mcp-protocol-version'])}`));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MCP_MAX_BODY_BYTES) return sendJson(res, 413, rpcError(RPC.invalidRequest, `a message is at most ${MCP_MAX_BODY_BYTES} bytes`), { connection: 'close' });
      chunks.push(c as Buffer);
    }
    let message: unknown;
    try {
      message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return sendJson(res, 400, rpcError(RPC.parseError, 'the body is not JSON'));
    }
    const answer: McpAnswer = await handleMcpMessage(message, memoryTools(identity), log);
    if (answer.status === 202) return sendJson(res, 202);
    return sendJson(res, answer.status, answer.body);
  }

  const gitGateway = deps.gitHosts
    ? createGitGateway({
        hosts: deps.gitHosts,
        record: (tenantId, entry) => db.transaction((tx) => deps.audit.record(tx, systemCtx(tenantId), entry)).then(() => undefined),
        sessionOf: (owner) => turnOf(owner, null).then((t) => t?.sessionId ?? null),
        tell: deps.sessionEvents,
        log: log.child({ part: 'git-gateway' }),
      })
    : null;

  const mcpGateway = deps.mcpServers
    ? createMcpGateway({
        grantOf: (tenantId, userId, name) => deps.mcpServers!.grantOf(tenantId, userId, name),
        // A runtime session of this very user (the runtime reports its own ids; ours are in the audit log).
        sessionOf: async (owner, upstream) => {
          const s = await deps.sessionsRepo.byUpstreamId(db, upstream);
          return s && s.tenantId === owner.tenantId && s.ownerId === owner.userId ? s.id : null;
        },
        audit: (tenantId, entry) => void db.transaction((tx) => deps.audit.record(tx, systemCtx(tenantId), entry)).catch((err) => log.error({ err: (err as Error).message }, 'could not audit an MCP tool call')),
        auditOnce,
        log: log.child({ part: 'mcp-gateway' }),
      })
    : null;

  /** The gateway host: model calls, the memory tools at MEMORY_MCP_PATH, the git gateway at /git/, MCP connectors at /mcp/connectors/. */
  const dispatch = (identity: AgentIdentity, req: IncomingMessage, res: ServerResponse, url: URL) => {
    if (gitGateway?.owns(url)) return gitGateway.handle(identity, req, res, url);
    if (mcpGateway?.owns(url.pathname)) return mcpGateway.handle(identity, req, res, url);
    if (url.pathname !== MEMORY_MCP_PATH) return gateway.handle(identity, req, res, url);
    serveMemoryMcp(identity, req, res).catch((err) => {
      log.error({ err: (err as Error).message }, 'memory MCP server failed');
      sendJson(res, 500, rpcError(RPC.internal, 'the memory server failed'));
    });
  };
  /**
   * A runtime whose person was deactivated or removed gets nothing from the gateway host: no
   * model call, memory, git or MCP request in their name. Their runtime is stopped once the deactivation
   * commits; this holds meanwhile, and for a runtime that could not be stopped (a runner out of reach).
   * Refused in each gateway's own terms, so the agent's client shows why.
   */
  const INACTIVE = 'the person this agent works for was deactivated or removed: it may no longer use the model, memories, git or MCP connectors';
  const refuseInactive = (req: IncomingMessage, res: ServerResponse, url: URL) => {
    req.resume();
    if (gitGateway?.owns(url)) {
      const body = `agentws git gateway: ${INACTIVE}\n`;
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(Buffer.byteLength(body)) });
      return void res.end(body);
    }
    if (url.pathname === MEMORY_MCP_PATH || mcpGateway?.owns(url.pathname)) return sendJson(res, 403, rpcError(RPC.invalidRequest, INACTIVE));
    return sendJson(res, 403, { type: 'error', error: { type: 'permission_error', code: 'user_deactivated', message: `agentws: ${INACTIVE}` } }, { 'x-agentws-gateway': 'refused' });
  };
  const gatewayHost = (identity: AgentIdentity, req: IncomingMessage, res: ServerResponse, url: URL) => {
    const active = deps.ownerActive ? deps.ownerActive(identity.tenantId, identity.userId) : true;
    // Known (the usual case, a map lookup): on at once, without a promise on the hot path.
    if (active === true) return dispatch(identity, req, res, url);
    if (active === false) return refuseInactive(req, res, url);
    active.then(
      (ok) => (ok ? dispatch(identity, req, res, url) : refuseInactive(req, res, url)),
      (err) => {
        log.error({ err: (err as Error).message }, 'could not tell whether a runtime\'s person is active');
        req.resume();
        sendJson(res, 503, rpcError(RPC.internal, 'the gateway cannot check this agent\'s person now; try again'));
      },
    );
  };
  const refused = (identity: RuntimeOwner, target: { host: string; port: number; reason: string }) =>
    auditOnce(`egress:${identity.userId}:${target.host}:${target.port}`, identity.tenantId, {
      action: 'egress.denied',
      target: `${target.host}:${target.port}`,
      userId: identity.userId,
      details: { reason: target.reason },
    });

  const proxy = createEgressProxy<AgentIdentity>({
    decide: async (identity, host, port) => {
      if (deps.ownerActive && !(await deps.ownerActive(identity.tenantId, identity.userId))) return { ok: false, reason: 'the person this agent works for was deactivated or removed' };
      return decider.decide(host, port, await tenantRules(identity.tenantId));
    },
    gateway: gatewayHost,
    refused,
    log,
  });

  return {
    listen: proxy.listen,
    /**
     * The model calls in flight through this process's gateway: those of a runtime that went away are
     * aborted (cut), and all of them when the service stops (stop), each charged what it may have cost.
     */
    modelCalls: { cut: gateway.cutCalls, stop: gateway.stop, resume: gateway.resume, get inFlight() { return gateway.inFlight; } },
    /**
     * What a runner's proxy asks of the control plane for its runtimes (runner-fleet.ts): the gateway host,
     * the tenant's rules with the operator's settings, and a refusal to audit.
     */
    forRunners: {
      gateway: gatewayHost,
      refused,
      rules: async (tenantId: string) => ({ rules: await tenantRules(tenantId), privateAllow: deps.privateAllow, ports: [...deps.egressPorts] }),
    },
  };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
