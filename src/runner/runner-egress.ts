import { controlPlaneForbidden, createEgressDecider, type EgressDecider } from '../core/runtime/host/egress-decider.js';
import { parsePrivateAllow, type EgressRules } from '../core/runtime/host/egress-policy.js';
import { createEgressProxy } from '../core/runtime/host/egress-proxy.js';
import { RUNNER_PATHS } from '../core/runtime/host/runner-protocol.js';
import type { RuntimeIdentity, RuntimeOwner } from '../core/runtime/host/runtime-host.js';
import type { Logger } from '../kernel/logger.js';
import type { ControlClient } from './control-client.js';
import { relayGateway } from './gateway-relay.js';

const RULES_CACHE_MS = 2000;

/**
 * The runner's egress proxy: what it decides by are the tenant's lists and the operator's settings, from
 * the control plane; and never the control plane itself (the agent reaches it only through its gateway).
 */
export function createRunnerEgress(c: ControlClient, log: Logger) {
  const rulesCache = new Map<string, { at: number; value: Promise<{ rules: EgressRules; decider: EgressDecider }> }>();
  const deciders = new Map<string, EgressDecider>();
  const forbidden = controlPlaneForbidden(c.control.toString());
  function rulesOf(owner: RuntimeOwner) {
    const { tenantId } = owner;
    const hit = rulesCache.get(tenantId);
    if (hit && Date.now() - hit.at < RULES_CACHE_MS) return hit.value;
    const value = c.call<{ rules: EgressRules; privateAllow: string; ports: number[] }>('GET', `${RUNNER_PATHS.egress}?tenantId=${encodeURIComponent(tenantId)}`, undefined, owner).then((r) => {
      const key = `${r.privateAllow}|${r.ports.join(',')}`;
      let decider = deciders.get(key);
      if (!decider) deciders.set(key, (decider = createEgressDecider({ privateAllow: parsePrivateAllow(r.privateAllow).entries, ports: r.ports, forbidden })));
      return { rules: r.rules, decider };
    });
    rulesCache.set(tenantId, { at: Date.now(), value });
    value.catch(() => rulesCache.delete(tenantId));
    return value;
  }

  return createEgressProxy<RuntimeIdentity>({
    decide: async (identity, host, port) => {
      const { rules, decider } = await rulesOf(identity);
      return decider.decide(host, port, rules);
    },
    gateway: (identity, req, res, url) => relayGateway(c, identity, req, res, url),
    refused: (identity, target) => void c.call('POST', RUNNER_PATHS.refused, target, identity).catch(() => {}),
    log,
  });
}
