import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, captureLogs, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The HTTP edge as an attacker or a sloppy client meets it (issue 11): unreadable credentials, input
 * checked before anything reads it, and nothing that answers 500 or fills the log.
 */
describe(`HTTP edge hardening (${DB_MODE})`, () => {
  let t: TestApp;
  const logs = captureLogs();
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    t = await startTestApp({ logger: logs.logger });
    acme = await seedTenant(t, 'acme', [{ handle: 'mia', roles: ['member'] }]);
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.member = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('a malformed cookie (finding 8)', () => {
    it('is a wrong credential: 401 with the envelope, and nothing is logged at error level', async () => {
      const before = logs.lines.length;
      for (const path of ['/v1/auth/me', '/v1/sessions', '/v1/admin/providers']) {
        const r = await api(t, 'GET', path, { headers: { cookie: 'agentws_access=%E0%A4%A' } });
        expect(r.status, r.text).toBe(401);
        expect(r.json).toEqual({ error: 'unauthenticated', message: 'invalid token', hint: expect.any(String), requestId: r.headers.get('x-request-id') });
      }
      // The refresh cookie is read the same way: an unreadable one is an invalid token.
      const refresh = await api(t, 'POST', '/v1/auth/refresh', { body: {}, headers: { cookie: 'agentws_refresh=%E0%A4%A' } });
      expect(refresh.status).toBe(401);
      const errors = logs.lines.slice(before).filter((l) => l.level === 'error' || l.level === 'fatal');
      expect(errors).toEqual([]);
    });
  });
});
