import { describe, expect, it } from 'vitest';
import { checkDomainRules, decideEgress, domainMatches, normaliseHost, parsePrivateAllow } from '../../src/core/egress/egress-policy.js';
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

  it('addressInCidr', () => {
    expect(addressInCidr('10.20.3.4', '10.20.0.0/16')).toBe(true);
    expect(addressInCidr('10.21.3.4', '10.20.0.0/16')).toBe(false);
    expect(addressInCidr('fd00::5', 'fd00::/8')).toBe(true);
    expect(addressInCidr('10.0.0.1', 'fd00::/8')).toBe(false);
    expect(addressInCidr('1.2.3.4', '1.2.3.4')).toBe(true);
  });
});
