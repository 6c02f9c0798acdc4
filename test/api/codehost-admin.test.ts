import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB } from '../../src/core/codehost/codehost-contract.js';
import { ensureQueues } from '../../src/jobs/boss.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { githubDelivery } from '../fixtures/code-host-deliveries.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';

/**
 * A git host's webhook through the admin API: the secret comes back once and is stored
 * sealed, settings are checked, only admins of the host's tenant reach it, and the deliveries log reads
 * what the intake recorded.
 */
describe("a git host's webhook, admin API", () => {
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  const tok: Record<string, string> = {};
  const hook = (host = 'github') => `/v1/admin/connectors/git/${host}/webhook`;

  beforeAll(async () => {
    t = await startTestApp();
    // The queues the intake sends to (made at start-up for the handlers the core registers; idempotent).
    await ensureQueues(t.opened.boss, [CODE_HOST_RUN_JOB, CODE_HOST_REPLY_JOB]);
    acme = await seedTenant(t, 'acme-hooks', [{ handle: 'mia', roles: ['member'] }, { handle: 'ada', roles: ['admin'] }]);
    const beta = await seedTenant(t, 'beta-hooks');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.member = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
    for (const [name, token] of [['github', tok.owner], ['forge', tok.owner], ['github', tok.beta]] as const) {
      const r = await api(t, 'POST', '/v1/admin/connectors/git', { token, body: { name, baseUrl: `https://${name}.example.com`, token: 'ghp-service', access: [{ who: '*', repos: ['acme/*'] }] } });
      expect(r.status).toBe(201);
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  it('shows the secret once, sealed at rest; a rotation keeps the URL and changes the secret', async () => {
    const before = await api(t, 'GET', hook(), { token: tok.admin });
    expect(before.status).toBe(200);
    expect(before.json).toEqual({ host: 'github', kind: null, webhookUrl: null, enabled: false, secretSet: false, mention: '@agent', label: 'agent', repos: [] });

    // The first time needs the kind (how the host signs).
    expect((await api(t, 'POST', `${hook()}/secret`, { token: tok.admin, body: {} })).json).toMatchObject({ error: 'validation_failed', details: { field: 'kind' } });
    const made = await api(t, 'POST', `${hook()}/secret`, { token: tok.admin, body: { kind: 'github' } });
    expect(made.status).toBe(201);
    expect(made.headers.get('cache-control')).toBe('no-store');
    expect(made.json).toMatchObject({ kind: 'github', enabled: true, secretSet: true, webhookUrl: expect.stringMatching(new RegExp(`^${t.url}/v1/codehost/webhooks/[A-Za-z0-9_-]{24}$`)) });
    expect(made.json.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const after = await api(t, 'GET', hook(), { token: tok.admin });
    expect(after.json).toEqual({ host: 'github', kind: 'github', webhookUrl: made.json.webhookUrl, enabled: true, secretSet: true, mention: '@agent', label: 'agent', repos: [] });
    expect(JSON.stringify(after.json)).not.toContain(made.json.secret);
    const row = (await t.opened.db.query(`select webhook_secret_sealed as sealed, webhook_id as id from git_hosts where tenant_id = $1 and name = 'github'`, [acme.tenantId])).rows[0];
    expect(row.sealed).not.toContain(made.json.secret);
    expect(createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]).open(row.sealed)).toBe(made.json.secret);
    // The id names neither the tenant nor the host.
    expect(made.json.webhookUrl.endsWith(`/${row.id}`)).toBe(true);

    const rotated = await api(t, 'POST', `${hook()}/secret`, { token: tok.owner, body: {} });
    expect(rotated.status).toBe(201);
    expect(rotated.json.webhookUrl).toBe(made.json.webhookUrl);
    expect(rotated.json.secret).not.toBe(made.json.secret);
    const audit = (await t.opened.db.query(`select action, details from audit_log where tenant_id = $1 and action like 'codehost.%' order by ts`, [acme.tenantId])).rows;
    expect(audit.map((a) => [a.action, a.details.rotated])).toEqual([
      ['codehost.webhook_secret', false],
      ['codehost.webhook_secret', true],
    ]);
    expect(JSON.stringify(audit)).not.toContain(made.json.secret);
    expect(JSON.stringify(audit)).not.toContain(rotated.json.secret);
  });

  it('checks the mention, label and repositories; changes only what is given; audits it', async () => {
    const bad = async (body: unknown) => (await api(t, 'PUT', hook(), { token: tok.admin, body })).json;
    expect(await bad({ mention: 'agent' })).toMatchObject({ error: 'validation_failed', details: { field: 'mention' } });
    expect(await bad({ mention: '@a b' })).toMatchObject({ details: { field: 'mention' } });
    expect(await bad({ label: ' agent' })).toMatchObject({ details: { field: 'label' } });
    expect(await bad({ label: 'a\u0007' })).toMatchObject({ details: { field: 'label' } });
    expect(await bad({ repos: ['acme/../etc'] })).toMatchObject({ details: { field: 'repos' } });
    expect(await bad({ kind: 'bitbucket' })).toMatchObject({ error: 'validation_failed' });
    expect(await bad({ secret: 'mine' })).toMatchObject({ error: 'validation_failed' });
    expect(await bad({})).toMatchObject({ details: { field: 'body' } });

    const ok = await api(t, 'PUT', hook(), { token: tok.admin, body: { mention: '@acme-bot', repos: ['acme/*', 'Acme/API.git'] } });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ mention: '@acme-bot', label: 'agent', repos: ['acme/*', 'Acme/API'], enabled: true });
    const off = await api(t, 'PUT', hook(), { token: tok.admin, body: { enabled: false, label: 'ai fix' } });
    expect(off.json).toMatchObject({ enabled: false, label: 'ai fix', mention: '@acme-bot' });
    const last = (await t.opened.db.query(`select details from audit_log where tenant_id = $1 and action = 'codehost.webhook_update' order by ts desc limit 1`, [acme.tenantId])).rows[0];
    expect(last.details).toMatchObject({ enabled: false, label: 'ai fix' });
    expect(last.details.mention).toBeUndefined();

    // Turned on before a secret exists: refused, the host would only get 404s.
    const early = await api(t, 'PUT', hook('forge'), { token: tok.admin, body: { enabled: true } });
    expect(early.status).toBe(409);
    expect(early.json).toMatchObject({ error: 'webhook_no_secret' });
    // A test delivery needs the webhook on (off: the intake answers 404).
    expect((await api(t, 'POST', `${hook()}/test`, { token: tok.admin })).json).toMatchObject({ error: 'webhook_off' });
    expect((await api(t, 'POST', `${hook('forge')}/test`, { token: tok.admin })).json).toMatchObject({ error: 'webhook_no_secret' });
    expect((await api(t, 'PUT', hook(), { token: tok.admin, body: { enabled: true } })).json.enabled).toBe(true);
  });

  it("is the host's admins' only: a member 403, another tenant's host 404", async () => {
    for (const [method, path] of [['GET', hook()], ['PUT', hook()], ['POST', `${hook()}/secret`], ['GET', `${hook()}/deliveries`], ['POST', `${hook()}/test`]] as const) {
      const r = await api(t, method, path, { token: tok.member, body: method === 'GET' ? undefined : method === 'PUT' ? { mention: '@mine' } : {} });
      expect(r.status, `${method} ${path}`).toBe(403);
    }
    expect((await api(t, 'GET', hook('nowhere'), { token: tok.admin })).status).toBe(404);
    // beta has a host named github too: acme's admin never reaches it, nor beta's acme's.
    const theirs = await api(t, 'GET', hook(), { token: tok.beta });
    expect(theirs.json).toMatchObject({ host: 'github', secretSet: false, webhookUrl: null });
    expect((await api(t, 'GET', hook('forge'), { token: tok.beta })).status).toBe(404);
    expect((await api(t, 'POST', `${hook('forge')}/secret`, { token: tok.beta, body: { kind: 'gitea' } })).status).toBe(404);
    expect((await api(t, 'GET', `${hook('forge')}/deliveries`, { token: tok.beta })).status).toBe(404);
  });

  it("lists the host's deliveries newest first, with the person an actor mapped to; never another host's", async () => {
    const hostId = async (tenantId: string, name: string) => (await t.opened.db.query(`select id from git_hosts where tenant_id = $1 and name = $2`, [tenantId, name])).rows[0].id as string;
    const github = await hostId(acme.tenantId, 'github');
    const forge = await hostId(acme.tenantId, 'forge');
    const insert = (host: string, d: { id: string; outcome: string; reason?: string; user?: string; at: string }) =>
      t.opened.db.query(
        `insert into code_host_deliveries (tenant_id, host_id, delivery_id, event, outcome, reason, repo, target_type, target_number, target_url, actor_login, user_id, received_at)
         values ($1, $2, $3, 'issue_comment', $4, $5, 'acme/api', 'issue', 12, 'https://github.example.com/acme/api/issues/12', 'octo', $6, $7)`,
        [acme.tenantId, host, d.id, d.outcome, d.reason ?? null, d.user ?? null, d.at],
      );
    await insert(github, { id: 'd-1', outcome: 'refused', reason: 'unmapped', at: '2026-11-29 01:00:00+00' });
    await insert(github, { id: 'd-2', outcome: 'queued', user: acme.ids.mia, at: '2026-11-29 01:00:05+00' });
    await insert(forge, { id: 'd-3', outcome: 'ignored', at: '2026-11-29 01:00:10+00' });
    const r = await api(t, 'GET', `${hook()}/deliveries`, { token: tok.admin });
    expect(r.status).toBe(200);
    expect(r.json.deliveries.map((d: any) => [d.deliveryId, d.outcome, d.reason, d.handle])).toEqual([
      ['d-2', 'queued', null, 'mia'],
      ['d-1', 'refused', 'unmapped', null],
    ]);
    expect(r.json.deliveries[0]).toMatchObject({ event: 'issue_comment', repo: 'acme/api', targetType: 'issue', targetNumber: 12, actorLogin: 'octo', replays: 0, receivedAt: '2026-11-29T01:00:05.000Z' });
    expect((await api(t, 'GET', `${hook()}/deliveries?limit=1`, { token: tok.admin })).json.deliveries).toHaveLength(1);
    expect((await api(t, 'GET', `${hook()}/deliveries?limit=0`, { token: tok.admin })).status).toBe(400);
  });

  it('a rotation takes effect at the intake at once: the old secret 401, the new one verifies; a test delivery goes through it', async () => {
    const first = await api(t, 'POST', `${hook('forge')}/secret`, { token: tok.admin, body: { kind: 'github' } });
    await api(t, 'PUT', hook('forge'), { token: tok.admin, body: { repos: ['acme/*'] } });
    const send = (secret: string) => {
      const d = githubDelivery({ secret, repo: 'acme/api', actor: { login: 'stranger', id: 7 } });
      return fetch(first.json.webhookUrl, { method: 'POST', headers: d.headers, body: d.body }).then((r) => r.status);
    };
    // The intake has this host cached (by its hook id) after the first delivery.
    expect(await send(first.json.secret)).toBe(202);
    const second = await api(t, 'POST', `${hook('forge')}/secret`, { token: tok.admin, body: {} });
    expect(await send(first.json.secret)).toBe(401);
    expect(await send(second.json.secret)).toBe(202);
    // Turned off: the intake answers 404 at once; on again, it verifies again.
    await api(t, 'PUT', hook('forge'), { token: tok.admin, body: { enabled: false } });
    expect(await send(second.json.secret)).toBe(404);
    await api(t, 'PUT', hook('forge'), { token: tok.admin, body: { enabled: true } });

    const test = await api(t, 'POST', `${hook('forge')}/test`, { token: tok.admin });
    expect(test.status).toBe(200);
    expect(test.json).toMatchObject({ outcome: 'test', deliveryId: expect.any(String) });
    const list = (await api(t, 'GET', `${hook('forge')}/deliveries`, { token: tok.admin })).json.deliveries;
    // Newest first: the test's ping, the two deliveries that verified (the one with the old secret left no row), the earlier test's row.
    expect(list.map((d: any) => [d.event, d.outcome, d.reason, d.deliveryId === 'd-3'])).toEqual([
      ['ping', 'test', null, false],
      ['issue_comment', 'refused', 'unmapped', false],
      ['issue_comment', 'refused', 'unmapped', false],
      ['issue_comment', 'ignored', null, true],
    ]);
    const audit = (await t.opened.db.query(`select details from audit_log where tenant_id = $1 and action = 'codehost.webhook_test'`, [acme.tenantId])).rows;
    expect(audit).toEqual([{ details: expect.objectContaining({ outcome: 'test', deliveryId: test.json.deliveryId }) }]);
  });
});
