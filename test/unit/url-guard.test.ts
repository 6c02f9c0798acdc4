import { describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../../src/kernel/errors.js';
import { addressMatches, checkWebhookUrl, embeddedIPv4, isPublicAddress } from '../../src/lib/url-guard.js';

// A fake DNS: the tests never touch the network, and each name stands for one way to sneak inward.
const zone: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.example': ['10.0.0.5'],
  'rebind.example': ['93.184.216.34', '127.0.0.1'],
  'v6.example': ['fd00::1'],
  'mapped.example': ['::ffff:10.0.0.1'],
  'metadata.example': ['169.254.169.254'],
  'linklocal.example': ['fe80::1%eth0'],
  'garbage.example': ['not-an-address'],
  'empty.example': [],
};
const resolve = vi.fn(async (hostname: string) => {
  const answer = zone[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
});

const rejection = async (url: string) => {
  const err = await checkWebhookUrl(url, { resolve }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, `${url} should be rejected`).toBeInstanceOf(ValidationError);
  expect((err as ValidationError).status).toBe(400);
  return (err as ValidationError).message;
};

describe('checkWebhookUrl', () => {
  // [url, what the message must say]
  const hostile: Array<[string, RegExp]> = [
    ['https://127.0.0.1/hook', /private address \(127\.0\.0\.1\)/],
    ['https://2130706433/hook', /private address \(127\.0\.0\.1\)/],
    ['https://0x7f.1/hook', /private address \(127\.0\.0\.1\)/],
    ['https://0177.0.0.1/hook', /private address \(127\.0\.0\.1\)/],
    ['https://127.1/hook', /private address \(127\.0\.0\.1\)/],
    ['https://0x7f000001/hook', /private address \(127\.0\.0\.1\)/],
    ['https://017700000001/hook', /private address \(127\.0\.0\.1\)/],
    ['https://127.0.0.1./hook', /private address \(127\.0\.0\.1\)/],
    ['https://%31%32%37.0.0.1/hook', /private address \(127\.0\.0\.1\)/],
    ['https://\uff11\uff12\uff17.0.0.1/hook', /private address \(127\.0\.0\.1\)/], // full-width digits
    ['https:\\\\127.0.0.1\\hook', /private address \(127\.0\.0\.1\)/],
    ['https://0/hook', /private address \(0\.0\.0\.0\)/],
    ['https://localhost/hook', /private address \(localhost\)/],
    ['https://localhost./hook', /private address \(localhost\)/],
    ['https://LOCALHOST:8443/hook', /private address \(localhost\)/],
    ['https://api.localhost/hook', /private address \(api\.localhost\)/],
    ['https://10.0.0.1/hook', /private address \(10\.0\.0\.1\)/],
    ['https://172.16.5.4/hook', /private address/],
    ['https://172.31.255.255/hook', /private address/],
    ['https://192.168.1.1/hook', /private address/],
    ['https://169.254.169.254/latest/meta-data/', /private address \(169\.254\.169\.254\)/],
    ['https://100.64.0.1/hook', /private address/],
    ['https://198.18.0.1/hook', /private address/],
    ['https://192.0.2.10/hook', /private address/],
    ['https://224.0.0.1/hook', /private address/],
    ['https://240.1.2.3/hook', /private address/],
    ['https://255.255.255.255/hook', /private address/],
    ['https://[::1]/hook', /private address \(::1\)/],
    ['https://[::]/hook', /private address \(::\)/],
    ['https://[::ffff:127.0.0.1]/hook', /private address \(::ffff:7f00:1\)/],
    ['https://[::ffff:a9fe:a9fe]/hook', /private address/], // 169.254.169.254, IPv4-mapped
    ['https://[::127.0.0.1]/hook', /private address/], // IPv4-compatible
    ['https://[::8.8.8.8]/hook', /private address/], // IPv4-compatible is refused even for a public v4
    ['https://[64:ff9b::10.0.0.1]/hook', /private address/], // NAT64
    ['https://[2002:c0a8:101::1]/hook', /private address/], // 6to4 of 192.168.1.1
    ['https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook', /private address/], // Teredo
    ['https://[2001:db8::1]/hook', /private address/],
    ['https://[100::1]/hook', /private address/],
    ['https://[fd00::1]/hook', /private address/],
    ['https://[fe80::1]/hook', /private address/],
    ['https://[fec0::1]/hook', /private address/],
    ['https://[ff02::1]/hook', /private address/],
    ['https://internal.example/hook', /internal\.example resolves to a private address \(10\.0\.0\.5\)/],
    ['https://rebind.example/hook', /resolves to a private address \(127\.0\.0\.1\)/],
    ['https://v6.example/hook', /resolves to a private address \(fd00::1\)/],
    ['https://mapped.example/hook', /resolves to a private address \(::ffff:10\.0\.0\.1\)/],
    ['https://metadata.example/hook', /resolves to a private address \(169\.254\.169\.254\)/],
    ['https://linklocal.example/hook', /resolves to a private address \(fe80::1%eth0\)/],
    ['https://garbage.example/hook', /resolves to a private address \(not-an-address\)/],
    ['https://nowhere.example/hook', /does not resolve \(nowhere\.example\)/],
    ['https://empty.example/hook', /does not resolve \(empty\.example\)/],
  ];

  it.each(hostile)('rejects %s', async (url, message) => {
    expect(await rejection(url)).toMatch(message);
  });

  it('has a table of at least 25 hostile URLs', () => {
    expect(hostile.length).toBeGreaterThanOrEqual(25);
  });

  it('rejects anything but https', async () => {
    for (const url of ['http://8.8.8.8/hook', 'HTTP://hooks.example.com/x', 'ftp://hooks.example.com/x', 'file:///etc/passwd', 'javascript:alert(1)', 'wss://hooks.example.com/x']) {
      expect(await rejection(url)).toBe('webhookUrl must use https');
    }
  });

  it('rejects user names and passwords', async () => {
    for (const url of ['https://a@b/', 'https://a@hooks.example.com/x', 'https://:secret@hooks.example.com/x', 'https://user:pass@8.8.8.8/']) {
      expect(await rejection(url)).toBe('webhookUrl must not contain a user name or password');
    }
  });

  it('rejects empty, hostless and unparsable input', async () => {
    expect(await rejection('')).toBe('webhookUrl is required');
    expect(await rejection('   ')).toBe('webhookUrl is required');
    expect(await rejection('https://')).toBe('webhookUrl is not a valid URL');
    expect(await rejection('https://:443/x')).toBe('webhookUrl is not a valid URL');
    expect(await rejection('hooks.example.com/x')).toBe('webhookUrl is not a valid URL');
    expect(await rejection('https://[fe80::1%25eth0]/')).toBe('webhookUrl is not a valid URL');
    expect(await rejection('https://./x')).toBe('webhookUrl must have a host');
    expect(await rejection(`https://hooks.example.com/${'a'.repeat(2100)}`)).toMatch(/longer than 2048/);
  });

  it('never asks the resolver about literal addresses or localhost names', async () => {
    resolve.mockClear();
    await rejection('https://localhost./x');
    await rejection('https://x.localhost/x');
    await rejection('https://10.1.2.3/x');
    await checkWebhookUrl('https://8.8.8.8/x', { resolve });
    expect(resolve).not.toHaveBeenCalled();
  });

  it('accepts public https URLs and returns them parsed', async () => {
    const a = await checkWebhookUrl('https://8.8.8.8/hook', { resolve });
    expect(a).toBeInstanceOf(URL);
    expect(a.href).toBe('https://8.8.8.8/hook');
    expect((await checkWebhookUrl('https://hooks.example.com/x?team=1', { resolve })).href).toBe('https://hooks.example.com/x?team=1');
    expect((await checkWebhookUrl('https://[2606:4700:4700::1111]/h', { resolve })).hostname).toBe('[2606:4700:4700::1111]');
    expect((await checkWebhookUrl('https://hooks.example.com:8443/x', { resolve })).port).toBe('8443');
    // Embedded public IPv4 addresses are as good as the address itself.
    await checkWebhookUrl('https://[::ffff:8.8.8.8]/h', { resolve });
    await checkWebhookUrl('https://[2002:808:808::1]/h', { resolve });
    await checkWebhookUrl('https://[64:ff9b::8.8.8.8]/h', { resolve });
  });

  it('resolves a trailing-dot name without the dot', async () => {
    resolve.mockClear();
    await checkWebhookUrl('https://hooks.example.com./x', { resolve });
    expect(resolve).toHaveBeenCalledWith('hooks.example.com');
  });
});

describe('isPublicAddress', () => {
  it.each([
    ['8.8.8.8', true],
    ['1.1.1.1', true],
    ['9.255.255.255', true],
    ['11.0.0.0', true],
    ['100.63.255.255', true],
    ['100.64.0.0', false],
    ['100.127.255.255', false],
    ['100.128.0.0', true],
    ['126.255.255.255', true],
    ['128.0.0.0', true],
    ['169.253.255.255', true],
    ['169.254.0.1', false],
    ['172.15.255.255', true],
    ['172.16.0.0', false],
    ['172.32.0.0', true],
    ['192.0.0.8', false],
    ['192.0.1.1', true],
    ['192.88.99.1', false],
    ['192.167.255.255', true],
    ['192.169.0.0', true],
    ['198.17.255.255', true],
    ['198.19.255.255', false],
    ['198.20.0.0', true],
    ['198.51.100.7', false],
    ['203.0.113.7', false],
    ['223.255.255.255', true],
    ['224.0.0.0', false],
    ['2606:4700:4700::1111', true],
    ['2a00:1450:4001:81c::200e', true],
    ['2001:200::1', true], // just past 2001::/23
    ['2001:1ff:ffff::1', false],
    ['2001::1', false], // Teredo
    ['2001:db8:ffff::1', false],
    ['2002:808:808::1', true],
    ['2002:a00:1::1', false], // 6to4 of 10.0.0.1
    ['64:ff9b::808:808', true],
    ['64:ff9b::7f00:1', false],
    ['64:ff9b:1::808:808', false], // local-use NAT64
    ['::ffff:8.8.8.8', true],
    ['::ffff:192.168.0.1', false],
    ['::ffff:0:808:808', false], // IPv4-translated (SIIT), not global unicast
    ['3fff::1', false],
    ['fbff::1', false], // outside 2000::/3
    ['fe80::1%eth0', false],
    ['[2606:4700:4700::1111]', true],
    ['127.1', false], // not an address in canonical form: refuse rather than guess
    ['localhost', false],
    ['', false],
    ['1.2.3.4.5', false],
  ])('%s → %s', (ip, expected) => {
    expect(isPublicAddress(ip)).toBe(expected);
  });
});

describe('addressMatches (one destination, every spelling)', () => {
  it('finds the IPv4 address an IPv6 one stands for: mapped, NAT64, 6to4', () => {
    expect(embeddedIPv4('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(embeddedIPv4('[::ffff:a00:1]')).toBe('10.0.0.1');
    expect(embeddedIPv4('64:ff9b::808:808')).toBe('8.8.8.8');
    expect(embeddedIPv4('2002:808:808::1')).toBe('8.8.8.8');
    for (const ip of ['2606:4700::1', '8.8.8.8', 'not-an-address', 'fe80::1%eth0']) expect(embeddedIPv4(ip), ip).toBeNull();
  });

  it('matches an address or range entry whichever way either side is spelt', () => {
    expect(addressMatches('8.8.8.8', '8.8.8.0/24')).toBe(true);
    expect(addressMatches('::ffff:8.8.8.8', '8.8.8.0/24')).toBe(true);
    expect(addressMatches('64:ff9b::808:808', '8.8.8.8')).toBe(true);
    expect(addressMatches('8.8.8.8', '::ffff:8.8.8.8')).toBe(true);
    expect(addressMatches('2606:4700:0:0::1', '2606:4700::1')).toBe(true);
    expect(addressMatches('2606:4700::2', '2606:4700::1')).toBe(false);
    expect(addressMatches('8.8.4.4', '8.8.8.0/24')).toBe(false);
    expect(addressMatches('8.8.8.8', '2606:4700::/32')).toBe(false);
  });
});
