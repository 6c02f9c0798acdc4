import { isIP } from 'node:net';
import { addressInCidr, isPublicAddress, resolveAddresses, systemResolve } from '../../lib/url-guard.js';

/**
 * Where an agent may connect to, through the egress proxy (the only way out of its sandbox). The same
 * rule as the webhook URL guard: every address the host resolves to must be public unicast (one private
 * answer among public ones is what DNS rebinding uses), and the connection then goes to the address that
 * was checked, never to a second lookup. On top of it, per tenant, domains an admin denies or, when an
 * allow list is set, the only domains allowed; and per appliance, internal hosts the operator trusts
 * (`AGENTWS_EGRESS_PRIVATE_ALLOW`: a package mirror, an internal git server) may be private.
 */

/** The tenant's domain lists (tenant settings `egress`): `example.com` also covers its subdomains. */
export interface EgressRules {
  allow: string[];
  deny: string[];
}

/** One operator entry: a host name or address (optionally with a port), or a CIDR range. */
export interface PrivateAllowEntry {
  host?: string;
  cidr?: string;
  port?: number;
}

export type EgressDecision = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

const NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** Lower-case, without brackets or a trailing dot; null when it is neither an address nor a host name. */
export function normaliseHost(raw: string): string | null {
  const h = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
  if (isIP(h)) return h;
  return NAME.test(h) ? h : null;
}

/** A domain rule `example.com` (or `.example.com`, `*.example.com`) matches the name and its subdomains. */
export function domainMatches(host: string, rule: string): boolean {
  const r = rule.trim().toLowerCase().replace(/^\*?\./, '').replace(/\.+$/, '');
  return r !== '' && (host === r || host.endsWith(`.${r}`));
}

/** Parses AGENTWS_EGRESS_PRIVATE_ALLOW; returns the entries and the items it could not read. */
export function parsePrivateAllow(raw: string): { entries: PrivateAllowEntry[]; invalid: string[] } {
  const entries: PrivateAllowEntry[] = [];
  const invalid: string[] = [];
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (item.includes('/')) {
      const [net, bits] = item.split('/');
      if (isIP(net) && /^\d{1,3}$/.test(bits) && addressInCidr(net, item)) entries.push({ cidr: item });
      else invalid.push(item);
      continue;
    }
    // host, host:port, [v6]:port, or a bare IPv6 address
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(item) ?? (isIP(item) === 6 ? [item, item, undefined] : /^([^:]+)(?::(\d+))?$/.exec(item));
    const host = m ? normaliseHost(m[1]) : null;
    const port = m?.[2] !== undefined ? Number(m[2]) : undefined;
    if (!host || (port !== undefined && (port < 1 || port > 65535))) invalid.push(item);
    else entries.push({ host, ...(port !== undefined ? { port } : {}) });
  }
  return { entries, invalid };
}

/** Whether the operator trusts this target with private addresses. */
function privatelyAllowed(entries: PrivateAllowEntry[], host: string, address: string, port: number): boolean {
  return entries.some((e) => {
    if (e.port !== undefined && e.port !== port) return false;
    if (e.cidr) return addressInCidr(address, e.cidr);
    return e.host === host || e.host === address;
  });
}

/** The tenant's lists, before anything is resolved: a denied domain is never looked up. */
export function checkDomainRules(host: string, rules: EgressRules): string | null {
  if (rules.deny.some((d) => domainMatches(host, d))) return `${host} is on the tenant's deny list`;
  if (rules.allow.length > 0 && !rules.allow.some((d) => domainMatches(host, d))) return `${host} is not on the tenant's allow list`;
  return null;
}

/**
 * Decides one connection: the tenant's lists, then every resolved address public (or trusted by the
 * operator). Returns the checked address to connect to.
 */
export async function decideEgress(
  input: { host: string; port: number; rules: EgressRules; privateAllow: PrivateAllowEntry[] },
  resolve: (host: string) => Promise<string[]> = systemResolve,
): Promise<EgressDecision> {
  const host = normaliseHost(input.host);
  if (!host) return { ok: false, reason: 'not a host name' };
  if (!Number.isInteger(input.port) || input.port < 1 || input.port > 65535) return { ok: false, reason: 'not a port' };
  const listed = checkDomainRules(host, input.rules);
  if (listed) return { ok: false, reason: listed };
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else if (host === 'localhost' || host.endsWith('.localhost')) addresses = ['127.0.0.1'];
  else {
    addresses = await resolveAddresses(host, resolve);
    if (!addresses.length) return { ok: false, reason: `${host} does not resolve` };
  }
  const bad = addresses.find((a) => !isPublicAddress(a) && !privatelyAllowed(input.privateAllow, host, a, input.port));
  if (bad !== undefined) return { ok: false, reason: bad === host ? `${host} is a private address` : `${host} resolves to a private address (${bad})` };
  const address = addresses[0];
  return { ok: true, address, family: isIP(address) as 4 | 6 };
}
