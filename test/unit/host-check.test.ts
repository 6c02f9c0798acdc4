import { describe, expect, it } from 'vitest';
import { isOwnHost } from '../../src/http/host-check.js';

describe('isOwnHost: the Host check of local demo mode', () => {
  const local = new URL('http://localhost:8080');
  const behindProxy = new URL('https://agents.example.com');

  it('takes the loopback names with the port the request arrived on (a missing port is 80)', () => {
    for (const host of ['localhost:8080', 'LOCALHOST:8080', '127.0.0.1:8080', '[::1]:8080']) expect(isOwnHost(host, 8080, behindProxy), host).toBe(true);
    for (const host of ['localhost', '127.0.0.1:8081', '[::1]:80', 'localhost:08080x']) expect(isOwnHost(host, 8080, behindProxy), host).toBe(false);
    expect(isOwnHost('localhost', 80, behindProxy)).toBe(true);
  });

  it("takes the public URL's host with its port, the scheme's default when the Host has none", () => {
    expect(isOwnHost('agents.example.com', 9999, behindProxy)).toBe(true);
    expect(isOwnHost('agents.example.com:443', 9999, behindProxy)).toBe(true);
    expect(isOwnHost('agents.example.com:80', 9999, behindProxy)).toBe(false);
    expect(isOwnHost('localhost:8080', 1234, local)).toBe(true);
    expect(isOwnHost('localhost', 1234, local)).toBe(false);
    expect(isOwnHost('[::1]:8443', 1, new URL('https://[::1]:8443'))).toBe(true);
  });

  it('refuses everything else: other names, look-alikes, a missing or malformed Host', () => {
    const bad = [undefined, '', 'attacker.example', 'attacker.example:8080', 'localhost.:8080', 'localhost.attacker.example:8080', 'evil.localhost:8080', '127.0.0.2:8080', '0.0.0.0:8080', '[::]:8080', 'user@localhost:8080', 'localhost:8080:8080', 'agents.example.com.evil:443', '[::1'];
    for (const host of bad) expect(isOwnHost(host, 8080, behindProxy), String(host)).toBe(false);
  });
});
