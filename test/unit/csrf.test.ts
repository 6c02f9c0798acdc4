import { describe, expect, it } from 'vitest';
import { CSRF_HEADER, csrfRefusal, ownOrigins } from '../../src/http/csrf.js';

const own = ownOrigins('https://agents.example.com', 'http://127.0.0.1:8080');
const req = (method: string, headers: Record<string, string> = {}) => ({ method, headers });

describe('csrfRefusal', () => {
  it('lets reads through whatever their origin', () => {
    expect(csrfRefusal(req('GET', { origin: 'https://evil.example' }), 'cookie', own)).toBeNull();
    expect(csrfRefusal(req('HEAD'), 'none', own)).toBeNull();
  });

  it('never refuses a bearer token: browsers do not send one on their own', () => {
    expect(csrfRefusal(req('POST', { origin: 'https://evil.example' }), 'bearer', own)).toBeNull();
  });

  it('asks a cookie-authenticated mutation for the custom header', () => {
    expect(csrfRefusal(req('POST'), 'cookie', own)).toMatch(CSRF_HEADER);
    expect(csrfRefusal(req('DELETE', { [CSRF_HEADER]: '1' }), 'cookie', own)).toBeNull();
    expect(csrfRefusal(req('POST', { [CSRF_HEADER]: '1', origin: 'https://agents.example.com' }), 'cookie', own)).toBeNull();
    expect(csrfRefusal(req('PATCH', { [CSRF_HEADER]: '1', origin: 'HTTP://127.0.0.1:8080' }), 'cookie', own)).toBeNull();
  });

  it('refuses a mutation a browser marks as coming from elsewhere, with or without a cookie', () => {
    for (const credential of ['cookie', 'none'] as const) {
      expect(csrfRefusal(req('POST', { [CSRF_HEADER]: '1', origin: 'https://evil.example' }), credential, own)).toMatch(/another origin/);
      // Another port of the same host is another origin, though the same site.
      expect(csrfRefusal(req('POST', { origin: 'http://127.0.0.1:9999' }), credential, own)).toMatch(/another origin/);
      expect(csrfRefusal(req('POST', { origin: 'null' }), credential, own)).toMatch(/opaque/);
      expect(csrfRefusal(req('POST', { 'sec-fetch-site': 'same-site' }), credential, own)).toMatch(/another site/);
      expect(csrfRefusal(req('POST', { 'sec-fetch-site': 'cross-site' }), credential, own)).toMatch(/another site/);
    }
  });

  it('lets demo-mode scripts without an Origin act (curl, the CLI)', () => {
    expect(csrfRefusal(req('POST'), 'none', own)).toBeNull();
    expect(csrfRefusal(req('POST', { 'sec-fetch-site': 'same-origin' }), 'none', own)).toBeNull();
  });
});
