import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * The runner admin routes: runners serve every tenant, so only the appliance's operator (an
 * owner of the operator's tenant, or the API key) sees and drains them; any other tenant's owner gets 403.
 */
describe(`runner admin routes (${DB_MODE})`, () => {
  let t: TestApp;
  const tok: Record<string, string> = {};
  let runnerId = '';

  beforeAll(async () => {
    t = await startTestApp({ vars: { AGENTWS_OPERATOR_EMAIL: 'owner@acme.example', AGENTWS_OPERATOR_TENANT: 'acme' } });
    const acme = await seedTenant(t, 'acme', [{ handle: 'ada', roles: ['admin'] }]);
    const beta = await seedTenant(t, 'beta');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
    tok.key = t.env.vars.AGENTWS_API_KEY;
    const { runners } = t.opened.core;
    const created = await runners.createToken(systemCtx(silentLogger), { name: 'r1' });
    const r = await runners.register(created.id, { name: 'r1', address: '10.0.0.9', capacity: 6, labels: { zone: 'a' }, version: '0.1.0', sharedStorage: false, serveId: 's', relayUrl: 'http://10.0.0.1:1' });
    runnerId = r.id;
  });
  afterAll(() => t?.close());

  it('GET /v1/admin/runners: the operator\'s owners and the API key see every runner, without internals', async () => {
    for (const who of ['owner', 'key']) {
      const res = await api(t, 'GET', '/v1/admin/runners', { token: tok[who] });
      expect(res.status, res.text).toBe(200);
      expect(res.json.runners).toEqual([
        expect.objectContaining({ id: runnerId, name: 'r1', kind: 'remote', state: 'active', healthy: true, capacity: 6, reportedCapacity: 6, maxCapacity: 100, resident: 0, busy: 0, users: 0, labels: { zone: 'a' }, version: '0.1.0', connected: true }),
      ]);
      expect(res.json.runners[0].heartbeat).toMatch(/s ago$/);
      expect(res.text).not.toMatch(/relayUrl|serveId|tokenId|10\.0\.0\.1:1/);
    }
  });

  it('anyone else is refused: an admin of the operator\'s tenant, another tenant\'s owner, no credential', async () => {
    for (const who of ['admin', 'beta']) {
      for (const [method, path] of [['GET', '/v1/admin/runners'], ['POST', '/v1/admin/runners/r1/drain'], ['POST', '/v1/admin/runners/r1/resume']]) {
        const res = await api(t, method, path, { token: tok[who] });
        expect(res.status, `${who} ${method} ${path}`).toBe(403);
        expect(res.text).not.toContain('r1"');
      }
    }
    expect((await api(t, 'GET', '/v1/admin/runners')).status).toBe(401);
    const { rows } = await t.opened.db.query(`select state from runners where id = $1`, [runnerId]);
    expect(rows[0].state).toBe('active');
  });

  it('drain and resume (audited with the caller); unknown 404, bad name 400, a lost runner 409', async () => {
    const d = await api(t, 'POST', '/v1/admin/runners/r1/drain', { token: tok.owner });
    expect(d.status, d.text).toBe(200);
    expect(d.json).toEqual({ runner: expect.objectContaining({ name: 'r1', state: 'draining' }), users: 0 });
    const { rows } = await t.opened.db.query(`select actor, channel from audit_log where action = 'runner.drain' and target = $1`, [`runner:${runnerId}`]);
    expect(rows).toEqual([{ actor: expect.stringMatching(/^user:/), channel: 'web' }]);
    const r = await api(t, 'POST', '/v1/admin/runners/r1/resume', { token: tok.key });
    expect(r.status, r.text).toBe(200);
    expect(r.json.runner).toMatchObject({ name: 'r1', state: 'active' });

    expect((await api(t, 'POST', '/v1/admin/runners/nope/drain', { token: tok.owner })).status).toBe(404);
    expect((await api(t, 'POST', '/v1/admin/runners/Not%20Valid/drain', { token: tok.owner })).status).toBe(400);
    await t.opened.db.query(`update runners set state = 'lost' where id = $1`, [runnerId]);
    const lost = await api(t, 'POST', '/v1/admin/runners/r1/drain', { token: tok.owner });
    expect(lost.status).toBe(409);
    expect(lost.json.error).toBe('conflict');
  });

  it('runner tokens have no route (CLI only)', async () => {
    expect((await api(t, 'GET', '/v1/admin/runner-tokens', { token: tok.key })).status).toBe(404);
    expect((await api(t, 'POST', '/v1/admin/runners/tokens', { token: tok.key, body: { name: 'x' } })).status).toBe(404);
  });
});
