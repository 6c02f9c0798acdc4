import { isIP } from 'node:net';
import { addressInCidr } from './url-guard.js';

/**
 * The syntax of the network lists operators and admins write: host names, addresses and CIDR ranges,
 * ports, the operator's private allow list. Read by the configuration and by the egress rules
 * (src/core/runtime/host/egress-policy.ts), which decide with them.
 */

export interface PrivateAllowEntry {
  host?: string;
  cidr?: string;
  port?: number;
}

const NAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** Lower-case, without brackets or a trailing dot; null when it is neither an address nor a host name. */
export function normaliseHost(raw: string): string | null {
  const h = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
  if (isIP(h)) return h;
  return NAME.test(h) ? h : null;
}


/** An address or CIDR range (`10.0.0.0/8`, `2001:db8::/32`), as a list entry may be; null when it is neither. */
export function parseAddressEntry(raw: string): string | null {
  const t = raw.trim().toLowerCase().replace(/^\[([^\]]+)\]/, '$1');
  if (isIP(t)) return t;
  const m = /^([^/]+)\/(\d{1,3})$/.exec(t);
  return m && isIP(m[1]) && addressInCidr(m[1], t) ? t : null;
}

/**
 * One entry of a tenant's `egress.allow` or `egress.deny`, normalised: a domain (lower-case, `*.` and
 * `.` dropped) or an address or CIDR range. Null when it is none of these.
 */
export function normaliseListEntry(raw: string): string | null {
  const address = parseAddressEntry(raw);
  if (address) return address;
  const host = normaliseHost(raw.replace(/^\*?\./, ''));
  return host && !isIP(host) ? host : null;
}

/** A port list (AGENTWS_EGRESS_PORTS: `25,587,2222`); returns the ports and the items it could not read. */
export function parsePorts(raw: string): { ports: number[]; invalid: string[] } {
  const ports: number[] = [];
  const invalid: string[] = [];
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const n = /^\d{1,5}$/.test(item) ? Number(item) : NaN;
    if (n >= 1 && n <= 65535) ports.push(n);
    else invalid.push(item);
  }
  return { ports: [...new Set(ports)], invalid };
}

/** Parses AGENTWS_EGRESS_PRIVATE_ALLOW; returns the entries and the items it could not read. */
export function parsePrivateAllow(raw: string): { entries: PrivateAllowEntry[]; invalid: string[] } {
  const entries: PrivateAllowEntry[] = [];
  const invalid: string[] = [];
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (item.includes('/')) {
      // A range, optionally with one port: 10.1.2.0/24 or 10.1.2.0/24:5432.
      const m = /^(.+\/\d{1,3})(?::(\d{1,5}))?$/.exec(item);
      const cidr = m ? parseAddressEntry(m[1]) : null;
      const port = m?.[2] !== undefined ? Number(m[2]) : undefined;
      if (!cidr || !cidr.includes('/') || (port !== undefined && (port < 1 || port > 65535))) invalid.push(item);
      else entries.push({ cidr, ...(port !== undefined ? { port } : {}) });
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
