import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { SecretBox } from '../../lib/secret-box.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../context.js';
import type { Logger } from '../logger.js';
import { createLlmGateway } from '../llm-gateway/llm-gateway.js';
import type { RbacPermissions } from '../rbac/permissions.js';
import type { RuntimeIdentity } from '../runtime/runtime-pool.js';
import type { RuntimeRepo } from '../runtime/runtime.repo.js';
import type { SessionsRepo } from '../sessions/sessions.repo.js';
import type { TenantsRepo } from '../tenants/tenants.repo.js';
import type { UsageService } from '../usage/usage.service.js';
import { decideEgress, parsePrivateAllow, type EgressRules } from './egress-policy.js';
import { createEgressProxy } from './egress-proxy.js';

/** How long a tenant's egress rules are reused (a change reaches running agents within this). */
const CACHE_MS = 2000;
/** One audit entry per runtime and target in this window (an agent retrying in a loop is one event). */
const DENIAL_AUDIT_WINDOW_MS = 10 * 60_000;

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
  usage: UsageService;
  runtimeRepo: RuntimeRepo;
  sessionsRepo: SessionsRepo;
  tenantsRepo: TenantsRepo;
  permissionsOf: (tenantId: string, userId: string) => Promise<RbacPermissions>;
  privateAllow: string;
  clock: Clock;
  log: Logger;
}) {
  const { db, log, clock } = deps;
  const privateAllow = parsePrivateAllow(deps.privateAllow).entries;
  const cache = new Map<string, { at: number; value: Promise<unknown> }>();
  const cached = <T>(key: string, load: () => Promise<T>): Promise<T> => {
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value as Promise<T>;
    const value = load();
    cache.set(key, { at: Date.now(), value });
    value.catch(() => cache.delete(key));
    if (cache.size > 10_000) cache.clear();
    return value;
  };
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
      return { allow: e?.allow ?? [], deny: e?.deny ?? [] };
    });

  const monthStart = () => {
    const now = clock.now();
    return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  };

  const gateway = createLlmGateway({
    // Read for every call (not cached): a key rotated or a base URL moved applies to the very next call.
    providers: async (tenantId) => {
      const [providers, settings] = await Promise.all([deps.runtimeRepo.listProviders(db, tenantId), deps.runtimeRepo.settings(db, tenantId)]);
      return { applied: settings?.applied ?? null, providers };
    },
    openKey: (sealed) => deps.box.open(sealed),
    limits: async (tenantId, userId) => {
      const cost = (await deps.permissionsOf(tenantId, userId)).cost;
      return { monthly: cost.monthly_limit_usd, perRequest: cost.per_request_limit_usd };
    },
    spentThisMonth: (tenantId, userId) => deps.sessionsRepo.spentSince(db, tenantId, userId, monthStart()),
    turnOf: async (tenantId, userId, upstreamSessionId) => {
      const s = await deps.sessionsRepo.byUpstreamId(db, upstreamSessionId);
      // Only the runtime owner's own sessions count (the header is the runtime's say-so).
      if (!s || s.tenantId !== tenantId || s.ownerId !== userId) return null;
      return { sessionId: s.id, channel: s.channel, spent: await deps.sessionsRepo.turnSpent(db, tenantId, s.id) };
    },
    record: async ({ caller, turn, provider, model, usage, costUsd, callId }) => {
      await deps.usage.record(db, {
        tenantId: caller.tenantId,
        userId: caller.userId,
        sessionId: turn?.sessionId ?? null,
        messageId: callId,
        model,
        provider,
        tokens: { input: usage.input, output: usage.output, reasoning: usage.reasoning, cacheRead: usage.cacheRead, cacheWrite: usage.cacheWrite },
        costUsd,
        channel: turn?.channel ?? 'agent',
      });
    },
    limitReached: ({ caller, turn, limit, limitUsd, spentUsd }) =>
      auditOnce(`limit:${caller.userId}:${limit}:${limit === 'monthly' ? monthStart().toISOString() : turn?.sessionId}`, caller.tenantId, {
        action: 'cost.limit_reached',
        target: turn ? `session:${turn.sessionId}` : `user:${caller.userId}`,
        sessionId: turn?.sessionId,
        userId: caller.userId,
        details: { limit, limitUsd, costUsd: Math.round(spentUsd * 1e6) / 1e6 },
      }),
    clock,
    log,
  });

  const proxy = createEgressProxy<RuntimeIdentity>({
    decide: async (identity, host, port) => decideEgress({ host, port, rules: await tenantRules(identity.tenantId), privateAllow }),
    gateway: (identity, req, res, url) => gateway.handle(identity, req, res, url),
    refused: (identity, target) =>
      auditOnce(`egress:${identity.userId}:${target.host}:${target.port}`, identity.tenantId, {
        action: 'egress.denied',
        target: `${target.host}:${target.port}`,
        userId: identity.userId,
        details: { reason: target.reason },
      }),
    log,
  });

  return { listen: proxy.listen };
}

export type AgentEgress = ReturnType<typeof createAgentEgress>;
