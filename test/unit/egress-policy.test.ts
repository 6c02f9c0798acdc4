import { describe, expect, it } from 'vitest';
import { checkDomainRules, decideEgress, domainMatches, normaliseHost, normaliseListEntry, parsePorts, parsePrivateAllow } from '../../src/core/runtime/host/egress-policy.js';
import { addressInCidr } from '../../src/lib/url-guard.js';

const none = { allow: [], deny: [] };
const dnsOf = (table: Record<string, string[]>) => async (host: string) => {
  if (!(host in table)) throw new Error('ENOTFOUND');
  return table[host];
};

describe('egress policy', () => {
  it('normalises hosts and matches domains with their subdomains', () => {
    expect(normaliseHost('Example.COM.')).toBe('example.com');
    expect(normaliseHost('[::1]')).toBe('::1');
    expect(normaliseHost('bad host')).toBeNull();
    expect(normaliseHost('a'.repeat(64) + '.com')).toBeNull();
    expect(domainMatches('api.github.com', 'github.com')).toBe(true);
    expect(domainMatches('github.com', '*.github.com')).toBe(true);
    expect(domainMatches('evilgithub.com', 'github.com')).toBe(false);
    expect(domainMatches('github.com.evil.example', 'github.com')).toBe(false);
  });

  it('applies the tenant deny list first, then the allow list when one is set', () => {
    expect(checkDomainRules('pypi.org', { allow: [], deny: [] })).toBeNull();
    expect(checkDomainRules('files.pastebin.com', { allow: [], deny: ['pastebin.com'] })).toMatch(/deny list/);
    expect(checkDomainRules('registry.npmjs.org', { allow: ['npmjs.org', 'github.com'], deny: [] })).toBeNull();
    expect(checkDomainRules('example.com', { allow: ['npmjs.org'], deny: [] })).toMatch(/not on the tenant's allow list/);
    expect(checkDomainRules('evil.npmjs.org', { allow: ['npmjs.org'], deny: ['evil.npmjs.org'] })).toMatch(/deny list/);
  });

  it('refuses every private, loopback, link-local, CGNAT and metadata target, by literal or by name', async () => {
    const resolve = dnsOf({ 'rebind.example': ['93.184.216.34', '127.0.0.1'], 'meta.example': ['169.254.169.254'], 'ok.example': ['93.184.216.34'] });
    for (const host of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '100.64.0.1', '169.254.169.254', '::1', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', '0.0.0.0', 'localhost', 'db.localhost', 'rebind.example', 'meta.example', 'nowhere.example']) {
      const d = await decideEgress({ host, port: 443, rules: none, privateAllow: [] }, resolve);
      expect(d.ok, host).toBe(false);
    }
    expect(await decideEgress({ host: 'ok.example', port: 443, rules: none, privateAllow: [] }, resolve)).toEqual({ ok: true, address: '93.184.216.34', family: 4 });
    expect(await decideEgress({ host: '2606:4700::1', port: 443, rules: none, privateAllow: [] }, resolve)).toEqual({ ok: true, address: '2606:4700::1', family: 6 });
  });

  it('lets the operator trust named internal hosts, addresses with a port, and ranges', async () => {
    const { entries, invalid } = parsePrivateAllow('git.corp.example, 127.0.0.1:8080, 10.20.0.0/16, [fd00::5]:443, nope:99999, 10.0.0.0/99');
    expect(invalid).toEqual(['nope:99999', '10.0.0.0/99']);
    const resolve = dnsOf({ 'git.corp.example': ['10.9.9.9'], 'mirror.corp.example': ['10.20.3.4'] });
    const ok = async (host: string, port: number) => (await decideEgress({ host, port, rules: none, privateAllow: entries }, resolve)).ok;
    expect(await ok('git.corp.example', 443)).toBe(true);
    expect(await ok('127.0.0.1', 8080)).toBe(true);
    expect(await ok('127.0.0.1', 5432)).toBe(false);
    expect(await ok('mirror.corp.example', 443)).toBe(true);
    expect(await ok('10.21.0.1', 443)).toBe(false);
    expect(await ok('fd00::5', 443)).toBe(true);
    expect(await ok('fd00::5', 80)).toBe(false);
  });

  it('opens only ports 80 and 443 unless the operator or the tenant opens more; an operator entry naming a port opens it for that host only', async () => {
    const resolve = dnsOf({ 'mail.example': ['93.184.216.34'], 'smtp.partner.example': ['93.184.216.35'], 'other.example': ['93.184.216.36'], 'db.corp.example': ['10.20.3.4'] });
    const decide = (host: string, port: number, more: { ports?: number[]; tenant?: number[]; privateAllow?: string } = {}) =>
      decideEgress({ host, port, rules: { ...none, ports: more.tenant }, privateAllow: parsePrivateAllow(more.privateAllow ?? '').entries, ports: more.ports }, resolve);
    // SMTP, SSH and a database port of a public address: each is a way out the web's ports are not.
    for (const port of [25, 22, 5432, 8080]) {
      expect(await decide('93.184.216.34', port), String(port)).toEqual({ ok: false, reason: `port ${port} is not open for egress (open: 80, 443)` });
      expect((await decide('mail.example', port)).ok, String(port)).toBe(false);
    }
    expect((await decide('mail.example', 443)).ok).toBe(true);
    expect((await decide('mail.example', 80)).ok).toBe(true);
    // The operator's AGENTWS_EGRESS_PORTS and the tenant's egress.ports add to them.
    expect((await decide('mail.example', 587, { ports: [587] })).ok).toBe(true);
    expect((await decide('mail.example', 2222, { tenant: [2222] })).ok).toBe(true);
    expect(await decide('mail.example', 25, { ports: [587], tenant: [2222] })).toMatchObject({ ok: false, reason: 'port 25 is not open for egress (open: 80, 443, 587, 2222)' });
    // An operator entry with a port: that port, for that host (by name, address or range), and no other.
    const privateAllow = 'smtp.partner.example:587, 10.20.0.0/16:5432, 93.184.216.36:2525';
    expect((await decide('smtp.partner.example', 587, { privateAllow })).ok).toBe(true);
    expect((await decide('93.184.216.35', 587, { privateAllow })).ok).toBe(false);
    expect((await decide('other.example', 587, { privateAllow })).ok).toBe(false);
    expect((await decide('other.example', 2525, { privateAllow })).ok).toBe(true);
    expect((await decide('smtp.partner.example', 25, { privateAllow })).ok).toBe(false);
    expect((await decide('db.corp.example', 5432, { privateAllow })).ok).toBe(true);
    expect((await decide('db.corp.example', 443, { privateAllow })).ok).toBe(false);
    // An entry without a port trusts a private host on the open ports only.
    expect((await decide('db.corp.example', 443, { privateAllow: 'db.corp.example' })).ok).toBe(true);
    expect((await decide('db.corp.example', 5432, { privateAllow: 'db.corp.example' })).ok).toBe(false);
  });

  it('reads AGENTWS_EGRESS_PORTS, ranges with a port in AGENTWS_EGRESS_PRIVATE_ALLOW, and list entries that are addresses or ranges', () => {
    expect(parsePorts(' 22, 587,22 ,, 65535')).toEqual({ ports: [22, 587, 65535], invalid: [] });
    expect(parsePorts('0, 65536, smtp, 25-30, 443')).toEqual({ ports: [443], invalid: ['0', '65536', 'smtp', '25-30'] });
    expect(parsePrivateAllow('10.1.2.0/24:5432, fd00::/64:443, 10.1.2.0/24:0, 10.0.0.0/8:x')).toEqual({
      entries: [{ cidr: '10.1.2.0/24', port: 5432 }, { cidr: 'fd00::/64', port: 443 }],
      invalid: ['10.1.2.0/24:0', '10.0.0.0/8:x'],
    });
    expect(['Pastebin.COM.', '*.evil.example', '104.20.1.2', '[2606:4700::1]', '8.8.8.0/24', '2606:4700::/32'].map(normaliseListEntry)).toEqual([
      'pastebin.com', 'evil.example', '104.20.1.2', '2606:4700::1', '8.8.8.0/24', '2606:4700::/32',
    ]);
    for (const bad of ['bad host', '10.0.0.0/33', 'http://x.example', '']) expect(normaliseListEntry(bad), bad).toBeNull();
  });

  it('matches the deny list on addresses: an IP literal, another name for the address, and address or range entries, however spelt', async () => {
    const resolve = dnsOf({ 'paste-mirror.example': ['104.20.1.2'], 'dns.example': ['1.1.1.1', '8.8.8.8'], 'fine.example': ['93.184.216.34'], 'gh.example': ['140.82.113.3'] });
    const deny = (host: string, rules: { deny: string[]; allow?: string[] }, deniedAddresses: string[] = []) =>
      decideEgress({ host, port: 443, rules: { allow: rules.allow ?? [], deny: rules.deny }, privateAllow: [], deniedAddresses }, resolve);
    // pastebin.com is denied and resolves to 104.20.1.2 (looked up by the caller): every other way to that address is too.
    const byName = { deny: ['pastebin.com'] };
    for (const host of ['pastebin.com', 'www.pastebin.com', '104.20.1.2', 'paste-mirror.example', '::ffff:104.20.1.2', '[::ffff:6814:102]', '64:ff9b::6814:102']) {
      expect(await deny(host, byName, ['104.20.1.2']), host).toMatchObject({ ok: false, reason: expect.stringMatching(/deny list/) });
    }
    expect(await deny('paste-mirror.example', byName, ['104.20.1.2'])).toEqual({ ok: false, reason: "paste-mirror.example (104.20.1.2) is an address of a name on the tenant's deny list" });
    expect((await deny('fine.example', byName, ['104.20.1.2'])).ok).toBe(true);
    // Address and range entries.
    const byAddress = { deny: ['8.8.8.0/24', '2606:4700::/32', '93.184.216.34'] };
    expect(await deny('8.8.8.8', byAddress)).toEqual({ ok: false, reason: "8.8.8.8 is on the tenant's deny list" });
    expect(await deny('dns.example', byAddress)).toEqual({ ok: false, reason: "dns.example (8.8.8.8) is on the tenant's deny list" });
    expect((await deny('2606:4700::1111', byAddress)).ok).toBe(false);
    expect((await deny('::ffff:93.184.216.34', byAddress)).ok).toBe(false);
    expect((await deny('fine.example', byAddress)).ok).toBe(false);
    expect((await deny('1.1.1.1', byAddress)).ok).toBe(true);
    // An allow list with a range lets in its addresses, by literal or by a name that resolves only there.
    const allow = { deny: [], allow: ['github.com', '140.82.112.0/20'] };
    expect((await deny('140.82.113.3', allow)).ok).toBe(true);
    expect((await deny('gh.example', allow)).ok).toBe(true);
    expect(await deny('1.1.1.1', allow)).toEqual({ ok: false, reason: "1.1.1.1 is not on the tenant's allow list" });
    expect((await deny('dns.example', allow)).ok).toBe(false);
    // A name allowed by domain is still refused at an address the deny list holds.
    expect((await deny('gh.example', { allow: ['gh.example'], deny: ['140.82.113.0/24'] })).ok).toBe(false);
  });

  it("treats every address of the host's own interfaces as private, however spelt, unless the operator trusts it", async () => {
    const resolve = dnsOf({ 'me.example': ['34.1.2.3'], 'v6.me.example': ['2a05:d014:1:2::5'], 'neighbour.example': ['34.1.2.4'] });
    const hostAddresses = ['127.0.0.1', '::1', '34.1.2.3', '2a05:d014:1:2::5', 'fe80::1'];
    const decide = (host: string, port = 443, privateAllow = '') => decideEgress({ host, port, rules: none, privateAllow: parsePrivateAllow(privateAllow).entries, hostAddresses }, resolve);
    expect(await decide('34.1.2.3')).toEqual({ ok: false, reason: "34.1.2.3 is one of this host's own addresses" });
    expect(await decide('me.example')).toEqual({ ok: false, reason: "me.example resolves to one of this host's own addresses (34.1.2.3)" });
    for (const host of ['::ffff:34.1.2.3', '64:ff9b::2201:203', '2002:2201:203::1', 'v6.me.example', '2a05:d014:1:2:0:0:0:5']) expect((await decide(host)).ok, host).toBe(false);
    expect((await decide('neighbour.example')).ok).toBe(true);
    expect((await decide('34.1.2.3', 443, '34.1.2.3')).ok).toBe(true);
  });

  it('addressInCidr', () => {
    expect(addressInCidr('10.20.3.4', '10.20.0.0/16')).toBe(true);
    expect(addressInCidr('10.21.3.4', '10.20.0.0/16')).toBe(false);
    expect(addressInCidr('fd00::5', 'fd00::/8')).toBe(true);
    expect(addressInCidr('10.0.0.1', 'fd00::/8')).toBe(false);
    expect(addressInCidr('1.2.3.4', '1.2.3.4')).toBe(true);
  });
});
