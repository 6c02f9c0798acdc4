import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGitConnectionsRepo } from '../../src/core/connectors/git-connections.repo.js';
import { createGitCredentials } from '../../src/core/connectors/git-credentials.js';
import { createGitHostsRepo } from '../../src/core/connectors/git-hosts.repo.js';
import { UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';
import { ACCESS_COOKIE } from '../../src/http/cookies.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { systemClock } from '../../src/lib/clock.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { createGitServer } from '../fixtures/git-server.js';
import { startGitHostApi } from '../fixtures/git-host-api.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { seedPeople } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

const run = promisify(execFile);

/**
 * Per-user git connections whose tokens are refreshed, on both databases: the refresh calls the
 * host (up to 15 s) with no database transaction or lock held meanwhile (on the embedded database an open
 * transaction stops every other query; on PostgreSQL a row lock held the person's own disconnect), still
 * one refresh at a time per connection across processes (hosts rotate refresh tokens), and a refresh
 * that fails in optional mode lets the service credential stand in, said to the person (their
 * Connections, the audit; the session stream in git-connections.runtime.test.ts, with a real agent).
 * The stand-in host (test/fixtures/git-host-api.ts) holds its refresh answers as long as a test needs.
 */
describe(`git connections: refreshing a person's token (${DB_MODE})`, { timeout: 120_000 }, () => {
  const SERVICE = `ghp_service${Math.random().toString(36).slice(2)}`;
  const CLIENT_SECRET = `oauth-secret-${Math.random().toString(36).slice(2)}`;
  const CREDENTIAL = 'agws_refresh-credential';
  let host: Awaited<ReturnType<typeof startGitHostApi>>;
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let root: string;
  let server: http.Server;
  const owner = () => ({ tenantId: acme.tenantId, userId: acme.ids.mia });
  const refreshes = () => host.state.grants.filter((g) => g.grant === 'refresh_token').length;
  /** Whether some work finishes while the host still holds a refresh (10 s: a query, not a host call). */
  const finishes = (work: Promise<unknown>) => Promise.race([work.then(() => 'finished'), sleep(10_000).then(() => 'held up')]);

  beforeAll(async () => {
    host = await startGitHostApi({ clientId: 'Iv1.refresh', clientSecret: CLIENT_SECRET });
    root = mkdtempSync(join(tmpdir(), 'agentws-gitr-'));
    await run('git', ['init', '-q', '--bare', '-b', 'main', join(root, 'org', 'private.git')]);
    server = createGitServer({
      root,
      authorization: (header) => {
        const [user, token] = Buffer.from(/^Basic (.+)$/.exec(header ?? '')?.[1] ?? '', 'base64').toString().split(':');
        if (user === 'x-access-token' && token === SERVICE) return 'service';
        return token ? host.identityOf(token) : null;
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t = await startTestApp();
    acme = await seedPeople(t, 'acme-refresh');
    await t.opened.core.gitHosts.add(systemCtx(silentLogger, { tenantId: acme.tenantId }), {
      name: 'corp',
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      token: SERVICE,
      oauth: { clientId: 'Iv1.refresh', clientSecret: CLIENT_SECRET, ...host.oauth },
      userConnections: 'optional',
      access: [{ who: '*', repos: ['org/*'] }],
    });
  });

  afterAll(async () => {
    await t?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await host?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** Mia connects her account through the host's OAuth flow; her first tokens are due for a refresh at once. */
  async function connectMia() {
    host.state.expiresIn = 120;
    const started = await api(t, 'POST', '/v1/me/connections/git/corp', { token: acme.tokens.member });
    expect(started.status, started.text).toBe(200);
    host.state.signedInAs = 'mia-at-corp';
    const consent = await fetch(started.json.authorizeUrl, { redirect: 'manual' });
    const back = await fetch(consent.headers.get('location')!, { redirect: 'manual', headers: { cookie: `${ACCESS_COOKIE}=${acme.tokens.member}` } });
    expect(back.headers.get('location')).toBe('/#/connections?connected=corp');
    host.state.expiresIn = 3600;
  }

  it("one refresh for callers in two processes, and the tenant's other database work goes on while the host is slow", async () => {
    await connectMia();
    const release = host.holdRefreshes();
    const arrived = host.state.refreshesArrived;
    // A second serve: its own credentials (and its own in-process sharing), the same database.
    const box = createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]);
    const other = createGitCredentials({ db: t.opened.db, connections: createGitConnectionsRepo(), box, clock: systemClock });
    const hostRow = (await createGitHostsRepo().findByName(t.opened.db, acme.tenantId, 'corp'))!;
    const calls = [t.opened.core.gitHosts.forAgent(owner(), 'corp'), t.opened.core.gitHosts.forAgent(owner(), 'corp'), other.forAgent(hostRow, acme.ids.mia)];
    try {
      await expect.poll(() => host.state.refreshesArrived).toBe(arrived + 1);
      // Reads and writes of the tenant, the connections' table too, while the host holds the refresh.
      const work = Promise.all([
        api(t, 'GET', '/v1/me/connections', { token: acme.tokens.member }),
        api(t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { access: [{ who: '*', repos: ['org/*', 'other/*'] }] } }),
        api(t, 'GET', '/v1/admin/connectors/git/corp/connections', { token: acme.tokens.owner }),
      ]);
      expect(await finishes(work)).toBe('finished');
      expect((await work).map((r) => r.status)).toEqual([200, 200, 200]);
    } finally {
      release();
    }
    const [a, b, c] = await Promise.all(calls);
    for (const v of [a, b]) expect(v).toMatchObject({ as: { kind: 'user', account: 'mia-at-corp' } });
    expect(c).toMatchObject({ as: 'user', account: 'mia-at-corp' });
    // All three use the one new token; the host was asked once (a second refresh with the rotated token would have failed).
    expect(new Set([(a as { authorization: string }).authorization, (b as { authorization: string }).authorization, (c as { authorization: string }).authorization]).size).toBe(1);
    expect(host.state.refreshesArrived).toBe(arrived + 1);
    expect(refreshes()).toBe(1);
    expect(host.identityOf(Buffer.from((c as { authorization: string }).authorization.slice(6), 'base64').toString().split(':')[1]!)).toBe('mia-at-corp');
  });

  it('a person disconnecting during a slow refresh is not held up, and the refreshed tokens are neither used nor kept', async () => {
    await connectMia();
    const release = host.holdRefreshes();
    const arrived = host.state.refreshesArrived;
    const call = t.opened.core.gitHosts.forAgent(owner(), 'corp');
    let gone: Awaited<ReturnType<typeof api>> | undefined;
    try {
      await expect.poll(() => host.state.refreshesArrived).toBe(arrived + 1);
      const disconnect = api(t, 'DELETE', '/v1/me/connections/git/corp', { token: acme.tokens.member }).then((r) => (gone = r));
      expect(await finishes(disconnect)).toBe('finished');
      expect(gone!.status).toBe(204);
    } finally {
      release();
    }
    // She has no connection now: the service credential, as for anyone without one (nothing to tell).
    expect(await call).toMatchObject({ as: { kind: 'service' } });
    expect(((await call) as { as: { fallback?: string } }).as.fallback).toBeUndefined();
    expect((await t.opened.db.query(`select 1 from git_connections where tenant_id = $1`, [acme.tenantId])).rows).toEqual([]);
  });

  it('a failed refresh in optional mode: the service credential stands in, the person is told why, the host is not asked at every request', async () => {
    await connectMia();
    host.state.failRefresh = true;
    try {
      const arrived = host.state.refreshesArrived;
      const view = await t.opened.core.gitHosts.forAgent(owner(), 'corp');
      expect(view).toMatchObject({ as: { kind: 'service', fallback: expect.stringMatching(/could not be refreshed \(the host refused \(invalid_grant/) } });
      expect(host.state.refreshesArrived).toBe(arrived + 1);
      // Within the retry interval the recorded failure answers; the host is not asked again.
      expect(await t.opened.core.gitHosts.forAgent(owner(), 'corp')).toMatchObject({ as: { kind: 'service', fallback: expect.stringContaining('invalid_grant') } });
      expect(host.state.refreshesArrived).toBe(arrived + 1);
      // Her Connections page says so.
      const mine = await api(t, 'GET', '/v1/me/connections', { token: acme.tokens.member });
      expect(mine.json.git).toEqual([expect.objectContaining({ host: 'corp', connected: true, problem: expect.stringContaining('invalid_grant') })]);

      // Her agent's git goes through the gateway as the service, audited with why.
      const listener = await t.opened.core.egress.listen({ tenantId: acme.tenantId, userId: acme.ids.mia, credential: CREDENTIAL, self: UNKNOWN_SELF }, { port: 0 });
      try {
        const r = await run('git', ['-c', `http.proxy=${listener.address}`, '-c', `http.extraHeader=Authorization: Bearer ${CREDENTIAL}`, 'ls-remote', 'http://llm.agentws.internal/git/corp/org/private.git'], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
        expect(r.stdout).toBe('');
      } finally {
        await listener.close();
      }
      const told = async () => (await t.opened.db.query<{ user_id: string; details: any }>(`select user_id, details from audit_log where tenant_id = $1 and action = 'git.credential_fallback'`, [acme.tenantId])).rows;
      await expect.poll(told).toEqual([{ user_id: acme.ids.mia, details: expect.objectContaining({ host: 'corp', as: 'service', reason: expect.stringContaining('invalid_grant') }) }]);

      // Required mode: refused, saying why.
      await t.opened.core.gitHosts.update(systemCtx(silentLogger, { tenantId: acme.tenantId }), 'corp', { userConnections: 'required' });
      expect(await t.opened.core.gitHosts.forAgent(owner(), 'corp')).toMatchObject({ refused: expect.stringMatching(/could not be refreshed \(.*invalid_grant.*\): connect it again/) });
    } finally {
      host.state.failRefresh = false;
    }
    // Reconnecting clears it.
    await connectMia();
    expect((await api(t, 'GET', '/v1/me/connections', { token: acme.tokens.member })).json.git[0].problem).toBeNull();
    expect(await t.opened.core.gitHosts.forAgent(owner(), 'corp')).toMatchObject({ as: { kind: 'user', account: 'mia-at-corp' } });
  });
});
