import { afterAll, describe, expect, it } from 'vitest';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { api, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/**
 * Upgrading (docs/operating/backups-and-upgrades.md, "Upgrading"): a database of an earlier release, with data in it written as that
 * release wrote it, is brought to this release by `aws migrate` and serves. The earlier release is the
 * one before memory screening (its last migration 0016): the releases since added columns with data
 * migrations (0017 fills a memory's screening signals and release from the audit log), tables (runtime
 * hosts, runners) and turn states.
 */
const PREVIOUS_RELEASE_LAST_MIGRATION = '0016_skill_version_review';

describe(`upgrading a database of an earlier release (${DB_MODE})`, { timeout: 180_000 }, () => {
  let env: TestEnv | null = null;
  let opened: OpenedCore | null = null;
  let app: TestApp | null = null;

  afterAll(async () => {
    await opened?.close().catch(() => {});
    if (app) await app.close();
    else await env?.cleanup();
  });

  it('`aws migrate` brings it to this release, keeps every row, runs the data migrations, and the API serves it', async () => {
    // A new, empty database, migrated only as far as the earlier release went.
    env = await createTestEnv({ initialiseEmbedded: false });
    opened = await openCore(env.config(), silentLogger);
    const { migrator, db } = opened.core;
    await migrator.checkPrerequisites();
    await migrator.withLock(async () => {
      for (const name of await migrator.pending()) if (name <= PREVIOUS_RELEASE_LAST_MIGRATION) await migrator.applyOne(name);
    });
    expect((await migrator.pending())[0]).toBe('0017_memory_screening');

    // What that release held: a tenant with its roles (made as then: tenants and roles have not changed
    // since), its owner (in SQL: users gained columns since), a member, a session, memories (one
    // quarantined, one released, as the audit log recorded them), a skill.
    const tenantId = (await opened.core.tenants.provisionForSignIn(systemCtx(silentLogger), { externalTenantId: 'acme-idp', name: 'Acme' })).tenant.id;
    const owner = (await db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'owner', 'owner@acme.example', 'Owner') returning id`, [tenantId])).rows[0].id;
    await db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'owner'`, [tenantId, owner]);
    const member = (await db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, 'mia', 'mia@acme.example', 'Mia') returning id`, [tenantId])).rows[0].id;
    await db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = 'member'`, [tenantId, member]);
    const session = (await db.query<{ id: string }>(`insert into agent_sessions (tenant_id, owner_id, title, directory) values ($1, $2, 'Quarterly report', '/workspace') returning id`, [tenantId, member])).rows[0].id;
    const memory = async (content: string, status: string) =>
      (await db.query<{ id: string }>(`insert into memories (tenant_id, user_id, kind, content, status, source) values ($1, $2, 'fact', $3, $4, 'agent') returning id`, [tenantId, member, content, status])).rows[0].id;
    await memory('The release train leaves on Thursdays', 'active');
    const quarantined = await memory('Always run the deploy script first', 'quarantined');
    const released = await memory('Ignore the staging server, it is retired', 'active');
    await db.query(
      `insert into audit_log (tenant_id, user_id, actor, action, target, details) values
         ($1, $2::uuid, $3, 'memory.create', $4, '{"signals": ["imperative"]}'),
         ($1, $2::uuid, $3, 'memory.create', $5, '{"signals": ["ignore-instructions"]}'),
         ($1, $2::uuid, $3, 'memory.release', $5, '{}')`,
      [tenantId, member, `user:${member}`, `memory:${quarantined}`, `memory:${released}`],
    );
    await db.query(`insert into skills (tenant_id, name, description) values ($1, 'release-notes', 'Write release notes.')`, [tenantId]);
    const before = (await db.query<{ n: number }>(`select count(*)::int as n from audit_log`)).rows[0].n;
    await opened.close();
    opened = null;

    // The upgrade, as an operator runs it.
    const migrated = await runCommand(['migrate', '--json'], { env, timeoutMs: 120_000 });
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(JSON.parse(migrated.stdout).applied).toEqual(expect.arrayContaining(['0017_memory_screening', '0018_runtime_hosts', '0019_runners', '0020_turn_ends']));

    app = await startTestApp({ env });
    const t = app;
    expect(((await (await fetch(`${t.url}/readyz`)).json()) as { migrations: string }).migrations).toBe('current');
    const token = await signToken(t, { sub: member, tid: tenantId, roles: ['member'] });
    const sessions = await api(t, 'GET', '/v1/sessions', { token });
    expect(sessions.status, sessions.text).toBe(200);
    expect(JSON.stringify(sessions.json)).toContain(session);
    const memories = await api(t, 'GET', '/v1/memories', { token });
    expect(memories.status, memories.text).toBe(200);
    expect(JSON.stringify(memories.json)).toContain('The release train leaves on Thursdays');
    // 0017's data migration: the screening signals and the release, from the audit log.
    const rows = (await t.opened.db.query<{ id: string; signals: string[]; released: boolean }>(`select id, signals, released_at is not null as released from memories where id = any($1)`, [[quarantined, released]])).rows;
    expect(rows.find((r) => r.id === quarantined)).toMatchObject({ signals: ['imperative'], released: false });
    expect(rows.find((r) => r.id === released)).toMatchObject({ signals: ['ignore-instructions'], released: true });
    // Nothing lost, and the audit log goes on in order.
    expect((await t.opened.db.query<{ n: number }>(`select count(*)::int as n from audit_log`)).rows[0].n).toBeGreaterThanOrEqual(before);
    expect((await t.opened.db.query(`select name from skills where tenant_id = $1`, [tenantId])).rows).toEqual([{ name: 'release-notes' }]);
    // And the new release's own tables work on it: a new memory through the API.
    expect((await api(t, 'POST', '/v1/memories', { token, body: { kind: 'fact', content: 'Written after the upgrade' } })).status).toBe(201);
  });
});
