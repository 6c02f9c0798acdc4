import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT, CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB, DELIVERY_KEEP_DAYS, type CodeHostKind } from '../../src/core/codehost/codehost-contract.js';
import { REFUSAL_REPLIES_PER_HOUR } from '../../src/core/codehost/codehost-intake.service.js';
import { RATE_PER_PERSON_REPO_HOUR } from '../../src/core/codehost/codehost-webhook-fns.js';
import { ensureQueues } from '../../src/jobs/boss.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { deliveryFor, githubDelivery, githubPing, gitlabDelivery, giteaDelivery, hubSignature256, type DeliveryInput } from '../fixtures/code-host-deliveries.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

const SECRET: Record<CodeHostKind, string> = { github: `gh-${randomBytes(16).toString('base64url')}`, gitlab: `gl-${randomBytes(16).toString('base64url')}`, gitea: `gt-${randomBytes(16).toString('base64url')}` };
const hookIdOf = () => randomBytes(18).toString('base64url');

/**
 * The webhook intake end to end over HTTP (POST /v1/codehost/webhooks/:hookId) on the real database and
 * job queue: deliveries built from each host's documentation (test/fixtures/code-host-deliveries.ts),
 * signed as the host signs. Jobs are inspected in pgboss.job, never run (the run is codehost-runs').
 * Hosts, connections and roles are set up with SQL: the admin side is not this suite's subject.
 */
describe(`code host webhook intake (${DB_MODE})`, () => {
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  const hosts: Record<string, { id: string; hookId: string; name: string }> = {};
  const db = () => t.opened.db;

  beforeAll(async () => {
    t = await startTestApp();
    // The run and reply queues are codehost-runs' (their handlers come with it); the intake only sends to them.
    await ensureQueues(t.opened.boss, [CODE_HOST_RUN_JOB, CODE_HOST_REPLY_JOB]);
    const box = createSecretBox([t.env.config().secrets.encryptionKey]);
    acme = await seedTenant(t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'eve', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
      { handle: 'dee', roles: ['member'] },
      { handle: 'cal', roles: [] },
      { handle: 'twin1', roles: ['member'] },
      { handle: 'twin2', roles: ['member'] },
    ]);
    beta = await seedTenant(t, 'beta', [{ handle: 'bob', roles: ['member'] }]);
    await db().query(`update users set deactivated_at = now() where id = $1`, [acme.ids.dee]);
    // cal may create agents but not hand issues to them (a custom role without agents.code_host).
    const { rows } = await db().query<{ id: string }>(
      `insert into roles (tenant_id, name, permissions) values ($1, 'coder', $2) returning id`,
      [acme.tenantId, JSON.stringify({ agents: { create: true, delete: false, configure: false, terminal: false, code_host: false, use_templates: '*' }, memory: {}, tools: { allowed: '*', denied: [] }, models: { allowed: '*' }, admin: {}, cost: {} })],
    );
    await db().query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) values ($1, $2, $3, 'test')`, [acme.tenantId, acme.ids.cal, rows[0].id]);

    const addHost = async (tenantId: string, name: string, kind: CodeHostKind, o: { enabled?: boolean; repos?: string[] } = {}) => {
      const hookId = hookIdOf();
      const { rows } = await db().query<{ id: string }>(
        `insert into git_hosts (tenant_id, name, base_url, secret_sealed, kind, webhook_id, webhook_secret_sealed, webhook_enabled, webhook_repos)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
        [tenantId, name, `https://${kind}.example.com`, box.seal('service-token'), kind, hookId, box.seal(SECRET[kind]), o.enabled ?? true, o.repos ?? ['acme/*', 'acme/tools/**']],
      );
      hosts[name] = { id: rows[0].id, hookId, name };
      return rows[0].id;
    };
    await addHost(acme.tenantId, 'gh', 'github');
    await addHost(acme.tenantId, 'gl', 'gitlab');
    await addHost(acme.tenantId, 'gt', 'gitea');
    await addHost(acme.tenantId, 'off', 'github', { enabled: false });
    await addHost(beta.tenantId, 'beta-gh', 'github');
    const connect = (tenantId: string, host: string, userId: string, account: string) =>
      db().query(`insert into git_connections (tenant_id, host_id, user_id, account, access_sealed, scopes) values ($1, $2, $3, $4, $5, 'repo')`, [tenantId, hosts[host].id, userId, account, box.seal('user-token')]);
    for (const h of ['gh', 'gl', 'gt']) {
      await connect(acme.tenantId, h, acme.ids.mia, 'Mia-Dev');
      await connect(acme.tenantId, h, acme.ids.vic, 'vic-dev');
      await connect(acme.tenantId, h, acme.ids.dee, 'dee-dev');
      await connect(acme.tenantId, h, acme.ids.cal, 'cal-dev');
    }
    // Two people connected to one host account: which of them asked is unknown.
    await connect(acme.tenantId, 'gh', acme.ids.twin1, 'twin');
    await connect(acme.tenantId, 'gh', acme.ids.twin2, 'twin');
    // Another tenant's person, connected on their own host.
    await connect(beta.tenantId, 'beta-gh', beta.ids.bob, 'bob-dev');
  });
  afterAll(async () => {
    await t?.close();
  });

  const post = (hookId: string, d: { headers: Record<string, string>; body: string | Buffer }) =>
    fetch(`${t.url}/v1/codehost/webhooks/${hookId}`, { method: 'POST', headers: d.headers, body: d.body }).then(async (r) => ({ status: r.status, json: (await r.json().catch(() => null)) as any }));
  const rowsOf = async (host: string, deliveryId: string) =>
    (await db().query(`select id, outcome, reason, repo, target_type as "targetType", target_number as "targetNumber", actor_login as "actorLogin", user_id as "userId", replays, event from code_host_deliveries where host_id = $1 and delivery_id = $2`, [hosts[host].id, deliveryId])).rows;
  const jobsOf = async (name: string, deliveryRowId: string) =>
    (await db().query(`select data, singleton_key as "singletonKey", retry_limit as "retryLimit" from pgboss.job where name = $1 and (data->>'deliveryRowId' = $2 or data->>'key' = $3)`, [name, deliveryRowId, `refused:${deliveryRowId}`])).rows;
  const auditOf = async (action: string, deliveryRowId: string) =>
    (await db().query(`select actor, user_id as "userId", channel, target, details, tenant_id as "tenantId" from audit_log where action = $1 and details->>'delivery' = $2`, [action, deliveryRowId])).rows;
  const mia = { login: 'mia-dev', id: 1001 };

  it('a mapped person\'s comment: 202 queued, the delivery recorded, the run job and the audit entry in its transaction', async () => {
    const d = githubDelivery({ secret: SECRET.github, actor: mia, comment: '@agent please make the list wrap' });
    const r = await post(hosts.gh.hookId, d);
    expect(r).toEqual({ status: 202, json: { ok: true, outcome: 'queued' } });
    const [row] = await rowsOf('gh', d.deliveryId);
    expect(row).toMatchObject({ outcome: 'queued', reason: null, repo: 'acme/widgets', targetType: 'issue', targetNumber: 7, actorLogin: 'mia-dev', userId: acme.ids.mia, replays: 0, event: 'issue_comment' });
    const jobs = await jobsOf(CODE_HOST_RUN_JOB, row.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0].singletonKey).toBe(`codehost:${row.id}`);
    expect(jobs[0].retryLimit).toBe(5);
    expect(jobs[0].data).toEqual({ tenantId: acme.tenantId, hostId: hosts.gh.id, deliveryRowId: row.id, person: { userId: acme.ids.mia, handle: 'mia', mappedBy: 'connection' }, trigger: d.trigger });
    expect(jobs[0].data.trigger.comment.body).toBe('please make the list wrap');
    const [entry] = await auditOf(AUDIT.trigger, row.id);
    expect(entry).toMatchObject({ actor: `user:${acme.ids.mia}`, userId: acme.ids.mia, channel: 'codehost', target: 'git_host:gh', tenantId: acme.tenantId });
    expect(entry.details).toMatchObject({ repo: 'acme/widgets', via: 'comment', mappedBy: 'connection', target: { type: 'issue', number: 7 } });
    expect(await jobsOf(CODE_HOST_REPLY_JOB, row.id)).toHaveLength(0);
  });

  it('a replayed delivery (the host retries): 200 replayed, counted on the first row, no second job', async () => {
    const d = githubDelivery({ secret: SECRET.github, actor: mia, via: 'label', target: 'pull_request' });
    expect((await post(hosts.gh.hookId, d)).status).toBe(202);
    expect(await post(hosts.gh.hookId, d)).toEqual({ status: 200, json: { ok: true, outcome: 'replayed' } });
    expect((await post(hosts.gh.hookId, d)).json.outcome).toBe('replayed');
    const rows = await rowsOf('gh', d.deliveryId);
    expect(rows).toHaveLength(1);
    expect(rows[0].replays).toBe(2);
    expect(await jobsOf(CODE_HOST_RUN_JOB, rows[0].id)).toHaveLength(1);
    expect(await auditOf(AUDIT.trigger, rows[0].id)).toHaveLength(1);
    // The same delivery id to another host is that host's own delivery.
    const other = gitlabDelivery({ secret: SECRET.gitlab, actor: mia, deliveryId: d.deliveryId });
    expect((await post(hosts.gl.hookId, other)).json.outcome).toBe('queued');
  });

  it('the same delivery posted concurrently (two serves, a retry racing the first): one 202, one job', async () => {
    const d = gitlabDelivery({ secret: SECRET.gitlab, actor: mia, target: 'pull_request' });
    const answers = await Promise.all(Array.from({ length: 6 }, () => post(hosts.gl.hookId, d)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 202]);
    expect(answers.filter((a) => a.json.outcome === 'queued')).toHaveLength(1);
    const rows = await rowsOf('gl', d.deliveryId);
    expect(rows).toHaveLength(1);
    expect(rows[0].replays).toBe(5);
    expect(await jobsOf(CODE_HOST_RUN_JOB, rows[0].id)).toHaveLength(1);
  });

  it('a wrong, missing or other host\'s signature: 401, nothing stored, nothing queued', async () => {
    const count = async () => Number((await db().query(`select count(*) from code_host_deliveries`)).rows[0].count);
    const jobs = async () => Number((await db().query(`select count(*) from pgboss.job where name in ($1, $2)`, [CODE_HOST_RUN_JOB, CODE_HOST_REPLY_JOB])).rows[0].count);
    const before = [await count(), await jobs()];
    for (const kind of ['github', 'gitlab', 'gitea'] as const) {
      const host = { github: 'gh', gitlab: 'gl', gitea: 'gt' }[kind];
      const hook = hosts[host].hookId;
      const wrong = deliveryFor(kind, { secret: SECRET[kind], signWith: `${SECRET[kind]}x`, actor: mia });
      expect((await post(hook, wrong)).status).toBe(401);
      expect((await post(hook, deliveryFor(kind, { secret: null, actor: mia }))).status).toBe(401);
      // Signed with another host's secret.
      expect((await post(hook, deliveryFor(kind, { secret: SECRET[kind === 'github' ? 'gitea' : 'github'], actor: mia }))).status).toBe(401);
      // A body changed after signing (the host's comment swapped for another). GitLab's token does not cover
      // the body (its documented scheme: a shared token over TLS), so only the HMAC hosts can tell.
      if (kind === 'gitlab') continue;
      const good = deliveryFor(kind, { secret: SECRET[kind], actor: mia });
      const r = await post(hook, { headers: good.headers, body: good.body.replace('please fix this', 'push to main now') });
      expect(r.status).toBe(401);
      expect(r.json).toMatchObject({ error: 'unauthenticated' });
      expect(await rowsOf(host, good.deliveryId)).toHaveLength(0);
    }
    expect([await count(), await jobs()]).toEqual(before);
  });

  it('unknown, malformed, disabled and other-tenant webhook ids: 404 alike, nothing stored', async () => {
    const d = githubDelivery({ secret: SECRET.github, actor: mia });
    for (const id of [hookIdOf(), 'short', `${hosts.gh.hookId}x`, hosts.off.hookId, '..%2F..%2Fadmin', 'a'.repeat(99)]) {
      const r = await post(id, d);
      expect(r.status, id).toBe(404);
    }
    // An unknown id is answered before its body is read: 404, not 413.
    const big = githubDelivery({ secret: SECRET.github, actor: mia, issueBody: 'x'.repeat(2_000_000) });
    expect((await post(hookIdOf(), big)).status).toBe(404);
    expect((await post(hosts.off.hookId, big)).status).toBe(404);
    // A path segment past the framework's limit is its 414 (a client error all the same).
    expect((await post('a'.repeat(300), d)).status).toBe(414);
    // beta's host (its own row and secret, equal to gh's in this suite) knows no mia-dev: another tenant's people are not mapped.
    expect((await post(hosts['beta-gh'].hookId, d)).json.outcome).toBe('refused');
    expect(await rowsOf('gh', d.deliveryId)).toHaveLength(0);
    expect(await rowsOf('off', d.deliveryId)).toHaveLength(0);
  });

  it('a body over 1 MiB: 413 before anything is read; nothing stored', async () => {
    const d = githubDelivery({ secret: SECRET.github, actor: mia, issueBody: 'x'.repeat(1_100_000) });
    const r = await post(hosts.gh.hookId, d);
    expect(r.status).toBe(413);
    expect(await rowsOf('gh', d.deliveryId)).toHaveLength(0);
  });

  const refusedCase = async (host: string, d: ReturnType<typeof deliveryFor>, reason: string, o: { reply: boolean; actor: string }) => {
    const r = await post(hosts[host].hookId, d);
    expect(r, reason).toEqual({ status: 202, json: { ok: true, outcome: 'refused' } });
    const [row] = await rowsOf(host, d.deliveryId);
    expect(row).toMatchObject({ outcome: 'refused', reason });
    expect(await jobsOf(CODE_HOST_RUN_JOB, row.id)).toHaveLength(0);
    const replies = await jobsOf(CODE_HOST_REPLY_JOB, row.id);
    expect(replies).toHaveLength(o.reply ? 1 : 0);
    const [entry] = await auditOf(AUDIT.refused, row.id);
    expect(entry).toMatchObject({ actor: o.actor, channel: 'codehost', target: `git_host:${host}` });
    expect(entry.details).toMatchObject({ reason, repo: d.trigger.repo, answered: o.reply, account: d.trigger.actor.login });
    return { row, reply: replies[0] };
  };

  it('an unmapped commenter: refused, one polite reply job on the issue, audited as the system', async () => {
    const d = githubDelivery({ secret: SECRET.github, actor: { login: 'stranger', id: 9 }, number: 12 });
    const { row, reply } = await refusedCase('gh', d, 'unmapped', { reply: true, actor: 'system:codehost' });
    expect(reply.singletonKey).toBe(`refused:${row.id}`);
    expect(reply.data).toMatchObject({ tenantId: acme.tenantId, hostId: hosts.gh.id, repo: 'acme/widgets', projectId: null, target: { type: 'issue', number: 12 }, key: `refused:${row.id}` });
    expect(reply.data.text).toMatch(/@stranger is not linked/);
    expect(reply.data.text).toMatch(/Connect your account/);
    // Another tenant's person is nobody here (connections are per host).
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: { login: 'bob-dev', id: 10 } }), 'unmapped', { reply: true, actor: 'system:codehost' });
    // Two people connected to the same account: neither is taken.
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: { login: 'twin', id: 11 } }), 'unmapped', { reply: true, actor: 'system:codehost' });
    // GitHub payloads carry no email: a tenant email in a forged-looking field does not map either.
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: { login: 'eve-gh', id: 12, email: 'eve@acme.example' } }), 'unmapped', { reply: true, actor: 'system:codehost' });
  });

  it('GitLab and Gitea map by the email the host asserts when there is no connection; a placeholder maps nobody', async () => {
    const gl = gitlabDelivery({ secret: SECRET.gitlab, actor: { login: 'eve-gl', id: 31, email: 'Eve@Acme.example' }, via: 'label' });
    expect((await post(hosts.gl.hookId, gl)).json.outcome).toBe('queued');
    const [row] = await rowsOf('gl', gl.deliveryId);
    const [job] = await jobsOf(CODE_HOST_RUN_JOB, row.id);
    expect(job.data.person).toEqual({ userId: acme.ids.eve, handle: 'eve', mappedBy: 'email' });
    expect(job.data.trigger).toEqual(gl.trigger);
    expect(job.data.trigger.projectId).toBe(4242);
    const gt = giteaDelivery({ secret: SECRET.gitea, actor: { login: 'eve-gt', id: 32, email: 'eve@acme.example' }, target: 'pull_request' });
    expect((await post(hosts.gt.hookId, gt)).json.outcome).toBe('queued');
    await refusedCase('gl', gitlabDelivery({ secret: SECRET.gitlab, actor: { login: 'eve-gl', id: 31 } }), 'unmapped', { reply: true, actor: 'system:codehost' });
    // mia is connected to gl as Mia-Dev: another GitLab account showing her email is not her.
    await refusedCase('gl', gitlabDelivery({ secret: SECRET.gitlab, actor: { login: 'impostor', id: 33, email: 'mia@acme.example' } }), 'unmapped', { reply: true, actor: 'system:codehost' });
    await refusedCase('gt', giteaDelivery({ secret: SECRET.gitea, actor: { login: 'eve-gt', id: 32 } }), 'unmapped', { reply: true, actor: 'system:codehost' });
  });

  it('no permission (viewer; a role with agents.create but not agents.code_host) and deactivated: refused and answered', async () => {
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: { login: 'vic-dev', id: 21 } }), 'no_permission', { reply: true, actor: `user:${acme.ids.vic}` });
    const { reply } = await refusedCase('gt', giteaDelivery({ secret: SECRET.gitea, actor: { login: 'cal-dev', id: 22 } }), 'no_permission', { reply: true, actor: `user:${acme.ids.cal}` });
    expect(reply.data.text).toMatch(/agents\.code_host/);
    const { row } = await refusedCase('gl', gitlabDelivery({ secret: SECRET.gitlab, actor: { login: 'dee-dev', id: 23 } }), 'deactivated', { reply: true, actor: 'system:codehost' });
    expect(row.userId).toBe(acme.ids.dee);
  });

  it('a repository outside the allow list: refused and audited, but not answered there', async () => {
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: mia, repo: 'elsewhere/secret-repo' }), 'not_allowed_repo', { reply: false, actor: 'system:codehost' });
    // acme/* is one level: a GitLab subgroup needs its own pattern (acme/tools/** is allowed, acme/other/x is not).
    await refusedCase('gl', gitlabDelivery({ secret: SECRET.gitlab, actor: mia, repo: 'acme/other/widgets' }), 'not_allowed_repo', { reply: false, actor: 'system:codehost' });
  });

  it('a pull request from a fork: refused and answered', async () => {
    await refusedCase('gh', githubDelivery({ secret: SECRET.github, actor: mia, via: 'review_comment', fork: true }), 'fork', { reply: true, actor: 'system:codehost' });
  });

  it('the rate limit per person and repository: the eleventh run in the hour is refused', async () => {
    const base: DeliveryInput = { secret: SECRET.github, actor: mia, repo: 'acme/rated' };
    for (let i = 0; i < RATE_PER_PERSON_REPO_HOUR; i++) {
      expect((await post(hosts.gh.hookId, githubDelivery({ ...base, number: 100 + i }))).json.outcome, `run ${i}`).toBe('queued');
    }
    const { reply } = await refusedCase('gh', githubDelivery({ ...base, number: 200 }), 'rate_limited', { reply: true, actor: `user:${acme.ids.mia}` });
    expect(reply.data.text).toMatch(/later/);
    // Another repository is not limited by this one's runs.
    expect((await post(hosts.gh.hookId, githubDelivery({ ...base, repo: 'acme/other' }))).json.outcome).toBe('queued');
  });

  it('refusals to one account on one repository are answered at most a few times an hour (no reply flood)', async () => {
    const answered: boolean[] = [];
    for (let i = 0; i < REFUSAL_REPLIES_PER_HOUR + 2; i++) {
      const d = githubDelivery({ secret: SECRET.github, actor: { login: 'spammer', id: 66 }, repo: 'acme/spam', number: i + 1 });
      expect((await post(hosts.gh.hookId, d)).json.outcome).toBe('refused');
      const [row] = await rowsOf('gh', d.deliveryId);
      answered.push((await jobsOf(CODE_HOST_REPLY_JOB, row.id)).length === 1);
      expect(await auditOf(AUDIT.refused, row.id)).toHaveLength(1);
    }
    expect(answered).toEqual([...Array(REFUSAL_REPLIES_PER_HOUR).fill(true), false, false]);
  });

  it('what is not a request: 202 ignored and recorded with why (ping, push, no mention, other label, bots)', async () => {
    const cases: Array<[{ headers: Record<string, string>; body: string; deliveryId: string }, string, string]> = [
      [githubPing(SECRET.github), 'gh', 'ping'],
      [githubDelivery({ secret: SECRET.github, actor: mia, comment: 'thanks, @agent' }), 'gh', 'no_mention'],
      [gitlabDelivery({ secret: SECRET.gitlab, actor: mia, via: 'label', label: 'bug' }), 'gl', 'other_label'],
      [githubDelivery({ secret: SECRET.github, actor: { login: 'ci[bot]', id: 5, bot: true } }), 'gh', 'bot'],
    ];
    const push = githubPing(SECRET.github);
    push.headers['X-GitHub-Event'] = 'push';
    cases.push([push, 'gh', 'event:push']);
    for (const [d, host, reason] of cases) {
      expect(await post(hosts[host].hookId, d), reason).toEqual({ status: 202, json: { ok: true, outcome: 'ignored' } });
      const [row] = await rowsOf(host, d.deliveryId);
      expect(row).toMatchObject({ outcome: 'ignored', reason });
      expect(await jobsOf(CODE_HOST_RUN_JOB, row.id)).toHaveLength(0);
    }
  });

  it('garbage, signed or not, never a 5xx: malformed JSON, binary, empty, odd or missing content types, hostile payloads', async () => {
    const gh = hosts.gh.hookId;
    // Signed as GitHub signs, over exactly these bytes, whatever they are.
    const signedBody = (body: Buffer | string, contentType?: string) => ({
      headers: {
        'X-GitHub-Event': 'issue_comment',
        'X-GitHub-Delivery': `g-${randomBytes(6).toString('hex')}`,
        'X-Hub-Signature-256': hubSignature256(SECRET.github, body),
        ...(contentType ? { 'content-type': contentType } : {}),
      },
      body,
    });
    const bodies: Array<[Buffer | string, string | undefined]> = [
      ['not json', 'application/json'],
      ['{"action":', 'application/json'],
      [randomBytes(4096), 'application/octet-stream'],
      ['', 'application/json'],
      ['[1,2,3]', undefined],
      ['{"action":"created","issue":{"number":"x"}}', 'text/plain'],
      ['{"action":"created"}', 'application/x-www-form-urlencoded'],
      [`${'['.repeat(50_000)}${']'.repeat(50_000)}`, 'application/json'],
      ['{"action":"created","repository":{"full_name":"acme/x","default_branch":"main"},"comment":{"body":"@agent hi","id":1,"user":{"login":"mia-dev","id":1},"html_url":"javascript:alert(1)"},"issue":{"number":1,"title":"t","html_url":"https://x/y"}}', 'application/json'],
    ];
    for (const [body, ct] of bodies) {
      const d = signedBody(body, ct);
      const r = await post(gh, d);
      expect(r.status, `${ct} ${String(body).slice(0, 40)}`).toBe(202);
      expect(r.json).toEqual({ ok: true, outcome: 'ignored' });
      const unsigned = await post(gh, { headers: { 'content-type': ct ?? 'application/json' }, body });
      expect(unsigned.status).toBe(401);
    }
    // NUL and lone surrogates (valid JSON escapes PostgreSQL will not store in text or jsonb): taken on as U+FFFD.
    const odd = githubDelivery({ secret: SECRET.github, actor: mia, title: 'a\u0000b\ud800c', issueBody: '\udc00body', comment: '@agent do \u0000 it' });
    const oddAnswer = await post(gh, odd);
    expect(oddAnswer).toEqual({ status: 202, json: { ok: true, outcome: 'queued' } });
    const [oddRow] = await rowsOf('gh', odd.deliveryId);
    const [oddJob] = await jobsOf(CODE_HOST_RUN_JOB, oddRow.id);
    expect(oddJob.data.trigger.target).toMatchObject({ title: 'a\uFFFDb\uFFFDc', body: '\uFFFDbody' });
    expect(oddJob.data.trigger.comment.body).toBe('do \uFFFD it');
    const nulUrl = githubDelivery({ secret: SECRET.github, actor: mia });
    nulUrl.payload.issue.html_url = 'https://github.com/acme/widgets/issues/7\u0000';
    const nulBody = JSON.stringify(nulUrl.payload);
    expect(await post(gh, { headers: { ...signedBody(nulBody).headers }, body: nulBody })).toEqual({ status: 202, json: { ok: true, outcome: 'ignored' } });
    // Duplicated signature headers are not taken.
    const d = githubDelivery({ secret: SECRET.github, actor: mia });
    const dup = await fetch(`${t.url}/v1/codehost/webhooks/${gh}`, {
      method: 'POST',
      headers: [...Object.entries(d.headers), ['X-Hub-Signature-256', d.headers['X-Hub-Signature-256']]],
      body: d.body,
    });
    expect(dup.status).toBe(401);
    // Other methods are not routes.
    expect((await fetch(`${t.url}/v1/codehost/webhooks/${gh}`)).status).toBe(404);
  });

  it('the admin\'s test delivery goes through verification and is recorded as test; recent lists newest first', async () => {
    const intake = t.opened.core.codeHostIntake;
    const r = await intake.testDelivery(acme.tenantId, hosts.gl.id);
    expect(r).toMatchObject({ status: 202, outcome: 'test' });
    expect(r.deliveryId).toMatch(/^test-/);
    const [row] = await rowsOf('gl', r.deliveryId);
    expect(row).toMatchObject({ outcome: 'test', event: 'ping', repo: null });
    expect(await jobsOf(CODE_HOST_RUN_JOB, row.id)).toHaveLength(0);
    for (const h of ['gh', 'gt']) expect((await intake.testDelivery(acme.tenantId, hosts[h].id)).outcome).toBe('test');
    const recent = await intake.recent(acme.tenantId, hosts.gl.id, 3);
    expect(recent).toHaveLength(3);
    expect(recent[0]).toMatchObject({ id: row.id, outcome: 'test', deliveryId: r.deliveryId });
    expect(recent.map((x) => x.receivedAt.getTime())).toEqual([...recent.map((x) => x.receivedAt.getTime())].sort((a, b) => b - a));
    // Another tenant's host is not found; a disabled one says why.
    await expect(intake.testDelivery(beta.tenantId, hosts.gl.id)).rejects.toMatchObject({ status: 404 });
    await expect(intake.testDelivery(acme.tenantId, hosts.off.id)).rejects.toMatchObject({ status: 409 });
    expect(await intake.recent(beta.tenantId, hosts.gl.id)).toEqual([]);
  });

  it('a rotated secret counts once the host is forgotten; the old one then fails', async () => {
    const intake = t.opened.core.codeHostIntake;
    const box = createSecretBox([t.env.config().secrets.encryptionKey]);
    const d = giteaDelivery({ secret: SECRET.gitea, actor: mia });
    expect((await post(hosts.gt.hookId, d)).status).toBe(202);
    const next = `${SECRET.gitea}-rotated`;
    await db().query(`update git_hosts set webhook_secret_sealed = $2 where id = $1`, [hosts.gt.id, box.seal(next)]);
    intake.forget(hosts.gt.hookId);
    expect((await post(hosts.gt.hookId, giteaDelivery({ secret: SECRET.gitea, actor: mia }))).status).toBe(401);
    expect((await post(hosts.gt.hookId, giteaDelivery({ secret: next, actor: mia }))).status).toBe(202);
    await db().query(`update git_hosts set webhook_enabled = false where id = $1`, [hosts.gt.id]);
    intake.forget(hosts.gt.hookId);
    expect((await post(hosts.gt.hookId, giteaDelivery({ secret: next, actor: mia }))).status).toBe(404);
  });

  it('the daily sweep deletes deliveries older than the keep period, in batches, and only those', async () => {
    const old = new Date(Date.now() - (DELIVERY_KEEP_DAYS + 1) * 24 * 3600_000);
    await db().query(
      `insert into code_host_deliveries (tenant_id, host_id, delivery_id, event, outcome, received_at) select $1, $2, 'old-' || g, 'ping', 'ignored', $3 from generate_series(1, 5003) g`,
      [acme.tenantId, hosts.gh.id, old],
    );
    const kept = Number((await db().query(`select count(*) from code_host_deliveries where received_at > now() - interval '1 day'`)).rows[0].count);
    const r = await t.opened.core.codeHostIntake.sweepJob(systemCtx(silentLogger));
    expect(r.deleted).toBe(5003);
    expect(Number((await db().query(`select count(*) from code_host_deliveries where delivery_id like 'old-%'`)).rows[0].count)).toBe(0);
    expect(Number((await db().query(`select count(*) from code_host_deliveries`)).rows[0].count)).toBe(kept);
    expect(t.opened.core.schedules['codehost-sweep']).toBe('17 3 * * *');
  });
});
