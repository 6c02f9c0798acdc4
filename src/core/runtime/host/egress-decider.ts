import { lookup } from 'node:dns/promises';
import { networkInterfaces } from 'node:os';
import { addressMatches, resolveAddresses, systemResolve } from '../../../lib/url-guard.js';
import { decideEgress, deniedNames, type EgressDecision, type EgressRules, type PrivateAllowEntry } from './egress-policy.js';
import { createPromiseCache } from '../../../lib/promise-cache.js';

/**
 * How long the host's interface addresses are reused: an address added later (DHCP, a cloud's secondary
 * IP) is private to the agents within this.
 */
const HOST_ADDRESSES_MS = 30_000;
/**
 * How long a denied name's addresses are reused. Short: a name behind a CDN moves, and what it resolves to
 * now is what an agent would reach by address; long enough that a deny list costs no lookup per connection.
 */
const DENIED_LOOKUP_MS = 60_000;
/** Denied names remembered at once (a deny list holds at most 500 per tenant). */
const MAX_CACHED_NAMES = 10_000;

/**
 * The egress decision with what it needs from the host looked up and cached: every address of the host's
 * interfaces (re-read now and then) and the addresses the tenant's denied names resolve to. Used by the
 * agents' proxy (agent-egress.ts) and the containment probes, so both decide alike.
 */
export function createEgressDecider(deps: {
  privateAllow: PrivateAllowEntry[];
  /** Ports the operator opens beyond 80 and 443 (AGENTWS_EGRESS_PORTS). */
  ports: readonly number[];
  /**
   * Addresses no agent reaches whatever the rules say, and why (on a runner host: the control plane's,
   * which its runtimes reach only through the gateway host, and which an operator's private allow list
   * for the internal network may well cover).
   */
  forbidden?: { addresses: () => Promise<string[]>; reason: string };
  resolve?: (host: string) => Promise<string[]>;
  interfaces?: () => ReturnType<typeof networkInterfaces>;
  now?: () => number;
}) {
  const resolve = deps.resolve ?? systemResolve;
  const interfaces = deps.interfaces ?? networkInterfaces;
  const now = deps.now ?? Date.now;

  let own: { at: number; addresses: string[] } | null = null;
  /** Every address of the host's interfaces, loopback and link-local included (they are private anyway). */
  function hostAddresses(): string[] {
    if (own && now() - own.at < HOST_ADDRESSES_MS) return own.addresses;
    let addresses: string[] = own?.addresses ?? [];
    try {
      addresses = Object.values(interfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    } catch {
      // Keep the last list: an interface read that fails must not open the host's addresses.
    }
    own = { at: now(), addresses };
    return addresses;
  }

  // resolveAddresses never rejects: a name that does not resolve has no address to deny.
  const lookups = createPromiseCache<string[]>({ ttlMs: DENIED_LOOKUP_MS, max: MAX_CACHED_NAMES, now });
  const addressesOf = (name: string): Promise<string[]> => lookups.get(name, () => resolveAddresses(name, resolve));

  return {
    hostAddresses,
    /** Decides one connection of a tenant's agent. */
    async decide(host: string, port: number, rules: EgressRules): Promise<EgressDecision> {
      const deniedAddresses = (await Promise.all(deniedNames(rules).map(addressesOf))).flat();
      const d = await decideEgress({ host, port, rules, privateAllow: deps.privateAllow, ports: deps.ports, hostAddresses: hostAddresses(), deniedAddresses }, resolve);
      if (d.ok && deps.forbidden && (await deps.forbidden.addresses()).some((a) => addressMatches(d.address, a))) return { ok: false, reason: deps.forbidden.reason };
      return d;
    },
  };
}

/**
 * The control plane's addresses as a runner's agents must never reach them (the `forbidden` of
 * createEgressDecider): its URL's host resolved, again every minute (a fail-over may move it); the last
 * answer is kept when a lookup fails, so a DNS hiccup cannot open it.
 */
export function controlPlaneForbidden(controlUrl: string, o: { resolve?: (host: string) => Promise<string[]>; now?: () => number } = {}): NonNullable<Parameters<typeof createEgressDecider>[0]['forbidden']> {
  const host = new URL(controlUrl).hostname.replace(/^\[(.*)\]$/, '$1');
  const resolve = o.resolve ?? ((h: string) => lookup(h, { all: true }).then((a) => a.map((x) => x.address)));
  const now = o.now ?? Date.now;
  let known: string[] = [];
  let fresh: { at: number; value: Promise<string[]> } | null = null;
  return {
    reason: 'the control plane is reached only through the gateway host',
    addresses() {
      if (!fresh || now() - fresh.at > 60_000) {
        fresh = {
          at: now(),
          value: resolve(host).then(
            (a) => (known = [...new Set([...a, ...known])]),
            () => known,
          ),
        };
      }
      return fresh.value;
    },
  };
}

export type EgressDecider = ReturnType<typeof createEgressDecider>;
