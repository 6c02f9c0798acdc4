import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import { ValidationError } from '../kernel/errors.js';
import { withTimeout } from './with-timeout.js';

/**
 * SSRF guard for webhook URLs a caller asks us to register with a chat platform. The URL is parsed the
 * WHATWG way (as fetch and the platforms read it), so `https://2130706433`, `0x7f.1`, `0177.0.0.1` and
 * `127.1` all arrive here as `127.0.0.1` and are judged as such. A name is rejected when ANY address it
 * resolves to is not public: one private answer among public ones is exactly what DNS rebinding uses.
 *
 * This is a check at registration time; it cannot stop a name from being re-pointed afterwards, which is
 * why the platform (not this service) is the one that calls the URL.
 */

/** Longer URLs are not webhooks anyone types; the cap keeps them out of the database and the logs. */
const MAX_URL_LENGTH = 2048;
/** getaddrinfo cannot be cancelled, but the request waiting on it must not hang. */
const RESOLVE_TIMEOUT_MS = 5000;

export interface CheckWebhookUrlOptions {
  /** Resolves a host name to every address it has (tests inject one; default: the system resolver). */
  resolve?: (hostname: string) => Promise<string[]>;
}

/** Parses and vets a webhook URL: https, no credentials, and only public unicast addresses behind its host. */
export async function checkWebhookUrl(raw: string, options: CheckWebhookUrlOptions = {}): Promise<URL> {
  if (typeof raw !== 'string' || raw.trim() === '') throw new ValidationError('webhookUrl is required');
  if (raw.length > MAX_URL_LENGTH) throw new ValidationError(`webhookUrl is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError('webhookUrl is not a valid URL');
  }
  if (url.protocol !== 'https:') throw new ValidationError('webhookUrl must use https');
  if (url.username !== '' || url.password !== '') throw new ValidationError('webhookUrl must not contain a user name or password');

  // A trailing dot only marks the name as absolute; `localhost.` is still localhost.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname.replace(/\.+$/, '');
  if (host === '') throw new ValidationError('webhookUrl must have a host');

  if (isIP(host) !== 0) {
    if (!isPublicAddress(host)) throw new ValidationError(`webhookUrl points to a private address (${host})`);
    return url;
  }
  // RFC 6761: these names are loopback by definition, whatever a resolver might say.
  if (host === 'localhost' || host.endsWith('.localhost')) throw new ValidationError(`webhookUrl points to a private address (${host})`);

  const addresses = await resolveHost(host, options.resolve ?? systemResolve);
  const bad = addresses.find((a) => !isPublicAddress(a));
  if (bad !== undefined) throw new ValidationError(`webhookUrl host ${host} resolves to a private address (${bad})`);
  return url;
}

/** The system resolver (getaddrinfo): every address of a host name, as the connection would use them. */
export async function systemResolve(hostname: string): Promise<string[]> {
  const answers = await dns.lookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/**
 * A host name's addresses, or none when it does not resolve within RESOLVE_TIMEOUT_MS, fails, or answers
 * nothing: callers refuse such a host like a private one (fail closed).
 */
export async function resolveAddresses(host: string, resolve: (hostname: string) => Promise<string[]> = systemResolve): Promise<string[]> {
  try {
    const addresses = await withTimeout(resolve(host), RESOLVE_TIMEOUT_MS, () => []);
    return Array.isArray(addresses) ? addresses : [];
  } catch {
    return [];
  }
}

async function resolveHost(host: string, resolve: (hostname: string) => Promise<string[]>): Promise<string[]> {
  const addresses = await resolveAddresses(host, resolve);
  if (addresses.length > 0) return addresses;
  throw new ValidationError(`webhookUrl host does not resolve (${host})`);
}

/** IPv4 ranges that are not public unicast (IANA special-purpose registry, plus multicast and reserved). */
const IPV4_BLOCKED = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '255.255.255.255/32',
].map((cidr) => parseCidr(cidr, ipv4ToBigInt, 32));

/**
 * IPv6 ranges refused outright. `::/96` (IPv4-compatible, deprecated) also covers `::` and `::1`.
 * Teredo (2001::/32) sits inside 2001::/23; 64:ff9b:1::/48 is the local-use NAT64 prefix (RFC 8215);
 * 3fff::/20 is the newer documentation prefix (RFC 9637).
 */
const IPV6_BLOCKED = [
  '::/96',
  '64:ff9b:1::/48',
  '100::/64',
  '2001::/23',
  '2001:db8::/32',
  '3fff::/20',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
].map((cidr) => parseCidr(cidr, ipv6ToBigInt, 128));

/** Prefixes whose addresses carry an IPv4 address; they are as public as the address they embed. */
const IPV4_MAPPED = parseCidr('::ffff:0:0/96', ipv6ToBigInt, 128);
const NAT64 = parseCidr('64:ff9b::/96', ipv6ToBigInt, 128);
const SIX_TO_FOUR = parseCidr('2002::/16', ipv6ToBigInt, 128);
/** IANA allocates global unicast only from 2000::/3; everything else is reserved, so not public. */
const GLOBAL_UNICAST = parseCidr('2000::/3', ipv6ToBigInt, 128);

/** True only for a public unicast IPv4 or IPv6 address; anything else (including a non-address) is false. */
export function isPublicAddress(ip: string): boolean {
  // Resolvers report link-local answers with a zone (`fe80::1%eth0`); the zone does not change the range.
  const bare = ip.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return isPublicV4(ipv4ToBigInt(bare));
  if (family !== 6) return false;
  const value = ipv6ToBigInt(bare);
  const low32 = value & 0xffff_ffffn;
  if (inRange(value, IPV4_MAPPED) || inRange(value, NAT64)) return isPublicV4(low32);
  if (inRange(value, SIX_TO_FOUR)) return isPublicV4((value >> 80n) & 0xffff_ffffn);
  if (IPV6_BLOCKED.some((r) => inRange(value, r))) return false;
  return inRange(value, GLOBAL_UNICAST);
}

function isPublicV4(value: bigint): boolean {
  return !IPV4_BLOCKED.some((r) => inRange(value, r));
}

interface Range {
  base: bigint;
  shift: bigint;
}

function parseCidr(cidr: string, parse: (ip: string) => bigint, bits: number): Range {
  const [ip, prefix] = cidr.split('/');
  const shift = BigInt(bits - Number(prefix));
  return { base: parse(ip) >> shift, shift };
}

function inRange(value: bigint, range: Range): boolean {
  return value >> range.shift === range.base;
}

/** Expects the dotted-decimal form `isIP` accepts. */
function ipv4ToBigInt(ip: string): bigint {
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

/** Expects a form `isIP` accepts: `::` compression and a dotted IPv4 tail are expanded here. */
function ipv6ToBigInt(ip: string): bigint {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = ipv4ToBigInt(tail);
    text = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, rest] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const restGroups = rest === undefined ? [] : rest ? rest.split(':') : [];
  const zeros = rest === undefined ? [] : Array<string>(8 - headGroups.length - restGroups.length).fill('0');
  return [...headGroups, ...zeros, ...restGroups].reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one a connection would end up at: IPv4-mapped
 * (`::ffff:a.b.c.d`, which a dual-stack socket dials as IPv4), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`,
 * the relay's endpoint). Null otherwise (and for anything that is not an IPv6 address).
 */
export function embeddedIPv4(ip: string): string | null {
  const bare = ip.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  if (isIP(bare) !== 6) return null;
  const value = ipv6ToBigInt(bare);
  let v4: bigint;
  if (inRange(value, IPV4_MAPPED) || inRange(value, NAT64)) v4 = value & 0xffff_ffffn;
  else if (inRange(value, SIX_TO_FOUR)) v4 = (value >> 80n) & 0xffff_ffffn;
  else return null;
  return [24n, 16n, 8n, 0n].map((s) => String((v4 >> s) & 0xffn)).join('.');
}

/**
 * True when `ip` is `entry` (an address) or lies in it (a CIDR), however either is spelt: `::ffff:10.0.0.1`,
 * `64:ff9b::a00:1` and `10.0.0.1` are one destination, so a rule written for one must hold for the others.
 */
export function addressMatches(ip: string, entry: string): boolean {
  const forms = [ip, embeddedIPv4(ip)].filter((f): f is string => f !== null);
  const entries = [entry];
  if (!entry.includes('/')) {
    const v4 = embeddedIPv4(entry);
    if (v4) entries.push(v4);
  }
  return forms.some((f) => entries.some((e) => addressInCidr(f, e)));
}

/** True when `ip` lies in `cidr` (`10.0.0.0/8`, `fd00::/8`; a bare address is a /32 or /128); false for other families. */
export function addressInCidr(ip: string, cidr: string): boolean {
  const bare = ip.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const [net, prefix] = cidr.replace(/^\[(.*)\]/, '$1').split('/');
  const family = isIP(bare);
  if (family === 0 || family !== isIP(net)) return false;
  const bits = family === 4 ? 32 : 128;
  const parse = family === 4 ? ipv4ToBigInt : ipv6ToBigInt;
  const n = prefix === undefined ? bits : Number(prefix);
  if (!Number.isInteger(n) || n < 0 || n > bits) return false;
  return inRange(parse(bare), parseCidr(`${net}/${n}`, parse, bits));
}
