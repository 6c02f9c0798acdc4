import { isIP } from 'node:net';
import { normaliseHost, parseAddressEntry, type PrivateAllowEntry } from '../../../lib/net-lists.js';
import { addressMatches, isPublicAddress, resolveAddresses, systemResolve } from '../../../lib/url-guard.js';

// The lists' syntax is the lib's (the configuration reads it too); the rules over them are here.
export { normaliseHost, normaliseListEntry, parsePorts, parsePrivateAllow, type PrivateAllowEntry } from '../../../lib/net-lists.js';

/**
 * Where an agent may connect to, through the egress proxy (the only way out of its sandbox). The same
 * rule as the webhook URL guard: every address the host resolves to must be public unicast (one private
 * answer among public ones is what DNS rebinding uses), and the connection then goes to the address that
 * was checked, never to a second lookup. On top of it, per tenant, domains an admin denies or, when an
 * allow list is set, the only domains allowed; and per appliance, internal hosts the operator trusts
 * (`AGENTWS_EGRESS_PRIVATE_ALLOW`: a package mirror, an internal git server) may be private.
 *
 * The agent chooses every connection it asks for, so each rule must hold however the target is spelt:
 * only the web's ports are open unless an operator or tenant opens more (a public SMTP or SSH server is
 * as much a way out as a web page); a deny list is matched on the addresses too (an IP literal, or any
 * other name for the same address, is the denied host); and the host's own addresses are private whatever
 * their range (a cloud VM's public address reaches the services listening on it).
 */

/** Ports open by default: the web's. Others (mail, SSH, databases) take an operator or tenant setting. */
const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443];

/**
 * The tenant's lists (tenant settings `egress`). A domain `example.com` also covers its subdomains; an
 * address or CIDR entry matches the addresses a target resolves to. `ports`: opened beyond the defaults.
 */
export interface EgressRules {
  allow: string[];
  deny: string[];
  ports?: number[];
}

/** One operator entry: a host name or address (optionally with a port), or a CIDR range. */

export type EgressDecision = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

/** What decides a connection besides the target and the tenant's lists (the caller looks these up). */
export interface EgressInput {
  host: string;
  port: number;
  rules: EgressRules;
  privateAllow: PrivateAllowEntry[];
  /** Ports the operator opens beyond DEFAULT_EGRESS_PORTS (AGENTWS_EGRESS_PORTS). */
  ports?: readonly number[];
  /** Every address of the host's own interfaces: refused like private ones, whatever their range. */
  hostAddresses?: readonly string[];
  /** The addresses the names on the tenant's deny list resolve to. */
  deniedAddresses?: readonly string[];
}

/** A domain rule `example.com` (or `.example.com`, `*.example.com`) matches the name and its subdomains. */
export function domainMatches(host: string, rule: string): boolean {
  const r = rule.trim().toLowerCase().replace(/^\*?\./, '').replace(/\.+$/, '');
  return r !== '' && (host === r || host.endsWith(`.${r}`));
}

/** Whether an operator entry names this target (by host name, by address, or by a range holding it). */
function entryMatches(e: PrivateAllowEntry, host: string, address: string): boolean {
  if (e.cidr) return addressMatches(address, e.cidr);
  return e.host === host || (e.host !== undefined && isIP(e.host) !== 0 && addressMatches(address, e.host));
}

/** Whether the operator trusts this target with private addresses. */
function privatelyAllowed(entries: PrivateAllowEntry[], host: string, address: string, port: number): boolean {
  return entries.some((e) => (e.port === undefined || e.port === port) && entryMatches(e, host, address));
}

/** Domain entries of a list (what names match); the rest are addresses and ranges (what addresses match). */
function splitList(list: string[]): { domains: string[]; addresses: string[] } {
  const domains: string[] = [];
  const addresses: string[] = [];
  for (const item of list) {
    const a = parseAddressEntry(item);
    if (a) addresses.push(a);
    else domains.push(item);
  }
  return { domains, addresses };
}

/**
 * The tenant's lists, before anything is resolved: a domain denied by name is never looked up; a target
 * the allow list can only let in by its addresses (it has address or range entries) waits for them.
 */
export function checkDomainRules(host: string, rules: EgressRules): string | null {
  const deny = splitList(rules.deny);
  const allow = splitList(rules.allow);
  if (deny.domains.some((d) => domainMatches(host, d))) return `${host} is on the tenant's deny list`;
  if (rules.allow.length > 0 && allow.addresses.length === 0 && !allow.domains.some((d) => domainMatches(host, d))) return `${host} is not on the tenant's allow list`;
  return null;
}

/** The names on a deny list whose addresses the caller must look up (`deniedAddresses`). */
export function deniedNames(rules: EgressRules): string[] {
  return splitList(rules.deny).domains;
}

/** The ports a connection may use: the defaults, the operator's and the tenant's. */
function openPorts(operator: readonly number[] = [], tenant: readonly number[] = []): number[] {
  return [...new Set([...DEFAULT_EGRESS_PORTS, ...operator, ...tenant])].sort((a, b) => a - b);
}

/**
 * Decides one connection: the port, the tenant's lists (by name, then by address), then every resolved
 * address public and not the host's own (or trusted by the operator). Returns the address to connect to.
 */
export async function decideEgress(input: EgressInput, resolve: (host: string) => Promise<string[]> = systemResolve): Promise<EgressDecision> {
  const host = normaliseHost(input.host);
  if (!host) return { ok: false, reason: 'not a host name' };
  const { port } = input;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { ok: false, reason: 'not a port' };
  const open = openPorts(input.ports, input.rules.ports);
  // An operator entry that names a port opens that port for its host only (checked once resolved).
  const portNamed = input.privateAllow.filter((e) => e.port === port);
  const closed = `port ${port} is not open for egress (open: ${open.join(', ')})`;
  if (!open.includes(port) && portNamed.length === 0) return { ok: false, reason: closed };
  const listed = checkDomainRules(host, input.rules);
  if (listed) return { ok: false, reason: listed };
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else if (host === 'localhost' || host.endsWith('.localhost')) addresses = ['127.0.0.1'];
  else {
    addresses = await resolveAddresses(host, resolve);
    if (!addresses.length) return { ok: false, reason: `${host} does not resolve` };
  }
  const as = (a: string) => (a === host ? host : `${host} (${a})`);
  const deny = splitList(input.rules.deny).addresses;
  const denied = addresses.find((a) => deny.some((e) => addressMatches(a, e)));
  if (denied !== undefined) return { ok: false, reason: `${as(denied)} is on the tenant's deny list` };
  const sameAs = addresses.find((a) => (input.deniedAddresses ?? []).some((d) => addressMatches(a, d)));
  if (sameAs !== undefined) return { ok: false, reason: `${as(sameAs)} is an address of a name on the tenant's deny list` };
  const allow = splitList(input.rules.allow);
  if (input.rules.allow.length > 0 && !allow.domains.some((d) => domainMatches(host, d)) && !addresses.every((a) => allow.addresses.some((e) => addressMatches(a, e)))) {
    return { ok: false, reason: `${host} is not on the tenant's allow list` };
  }
  const own = (a: string) => (input.hostAddresses ?? []).some((h) => addressMatches(a, h));
  const bad = addresses.find((a) => (!isPublicAddress(a) || own(a)) && !privatelyAllowed(input.privateAllow, host, a, port));
  if (bad !== undefined) {
    const what = isPublicAddress(bad) ? "one of this host's own addresses" : 'a private address';
    return { ok: false, reason: bad === host ? `${host} is ${what}` : `${host} resolves to ${what} (${bad})` };
  }
  if (!open.includes(port) && !addresses.every((a) => portNamed.some((e) => entryMatches(e, host, a)))) return { ok: false, reason: closed };
  const address = addresses[0];
  return { ok: true, address, family: isIP(address) as 4 | 6 };
}
