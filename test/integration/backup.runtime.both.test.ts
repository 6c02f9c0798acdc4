import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api } from '../helpers/app.js';
import { runCli, runCommand } from '../helpers/cli.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/**
 * Backups that restore, on this project's database mode: an installation with a session and
 * its transcript, a memory, a skill, a gateway, a tenant's shared file and its audit log is backed up by
 * `aws backup create` while serve runs (a real subprocess, reaching the database as the operator's would),
 * the installation is gone, `aws backup restore` brings it back on a new data dir and an empty database,
 * and a turn in the old session sees its earlier messages.
 */
describe(`backup and restore (${DB_MODE})`, { timeout: 180_000 }, () => {
  let r: RuntimeApp | null = null;
  let restored: RuntimeApp | null = null;
  let target: TestEnv | null = null;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let sessionId = '';
  let archive = '';
  let secrets: Record<string, string> = {};
  const sharedNote = `a note the tenant shares ${Math.random().toString(36).slice(2)}`;

  beforeAll(async () => {
    r = await startRuntimeApp();
    people = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'bash', arguments: { command: 'echo kept > kept.txt', description: 'write' } } }, { text: 'The launch code is 4711.' }], { text: 'What is the launch code?' });
    sessionId = turn.sessionId;
    expect((await api(r.t, 'POST', '/v1/memories', { token: people.tokens.member, body: { kind: 'fact', content: 'The release train leaves on Thursdays' } })).status).toBe(201);
    const g = await api(r.t, 'POST', '/v1/gateways', { token: people.tokens.owner, body: { kind: 'bot_chat', botToken: `123456:${crypto.randomUUID()}`, botUsername: 'backup_bot', botId: '123456' } });
    expect(g.status, g.text).toBe(201);
    await r.t.opened.db.query(`insert into skills (tenant_id, name, description) values ($1, 'release-notes', 'Write release notes.')`, [people.tenantId]);
    const shared = join(r.t.env.dataDir, 'tenants', people.tenantId, 'shared');
    mkdirSync(shared, { recursive: true });
    writeFileSync(join(shared, 'notes.md'), `${sharedNote}\n`);
    secrets = { AGENTWS_ENCRYPTION_KEY: r.t.env.vars.AGENTWS_ENCRYPTION_KEY, AGENTWS_JWT_SECRET: r.t.env.vars.AGENTWS_JWT_SECRET, AGENTWS_API_KEY: r.t.env.vars.AGENTWS_API_KEY };
    archive = join(r.t.env.dir, '..', `agentws-backup-${Date.now()}-${Math.random().toString(36).slice(2)}.tar.gz`);
  }, 180_000);

  afterAll(async () => {
    await restored?.close();
    await r?.close();
    await target?.cleanup();
    if (archive) await import('node:fs').then((fs) => fs.rmSync(archive, { force: true }));
  });

  it('backup create writes one archive while serve runs: 0600, a manifest last, every entry checksummed', async () => {
    const made = await runCli(['backup', 'create', archive, '--json'], { env: r!.t.env, timeoutMs: 120_000 });
    expect(made.code, made.stderr).toBe(0);
    const out = JSON.parse(made.stdout);
    expect(out.tables).toBeGreaterThan(20);
    expect(out.files).toBeGreaterThan(3);
    expect(statSync(archive).mode & 0o777).toBe(0o600);
    // A second backup to the same name is refused (never overwritten).
    const again = await runCommand(['backup', 'create', archive], { env: r!.t.env });
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/exists/);
    // As the daily timer runs it: into a directory, named by the time, only the newest kept.
    const dir = join(r!.t.env.dir, 'backups');
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'not a backup\n');
    for (let i = 0; i < 2; i++) expect((await runCommand(['backup', 'create', '--dir', dir, '--keep', '1'], { env: r!.t.env, timeoutMs: 120_000 })).code).toBe(0);
    expect(readdirSync(dir).filter((n) => !n.startsWith('.')).sort()).toEqual([expect.stringMatching(/^agentws-\d{4}-\d\d-\d\dT\d{6}\.\d{3}Z\.tar\.gz$/), 'notes.txt']);
    // The audit log says each happened.
    const { rows } = await r!.t.opened.db.query(`select action from audit_log where action = 'backup.created'`);
    expect(rows.length).toBe(3);
  });

  it('restore refuses an installation in use, and a host without the secrets the data needs, naming them', async () => {
    const inUse = await runCommand(['backup', 'restore', archive], { env: r!.t.env });
    expect(inUse.code).not.toBe(0);
    expect(inUse.stderr).toMatch(/already holds/);
    // A host with other secrets (its database migrated and empty, as after `aws migrate`).
    const stranger = await createTestEnv();
    try {
      const refused = await runCommand(['backup', 'restore', archive], { env: stranger });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/AGENTWS_ENCRYPTION_KEY/);
      expect(refused.stderr).toMatch(/AGENTWS_JWT_SECRET/);
      // Nothing was changed: no workspace moved in, the database still empty.
      expect(existsSync(join(stranger.dataDir, 'workspaces'))).toBe(false);
    } finally {
      await stranger.cleanup();
    }
  });

  it('restore on a new data dir and an empty database brings everything back, and an old session goes on', async () => {
    const oldWorkspace = join(r!.t.env.dataDir, 'workspaces', people.tenantId, people.ids.mia);
    expect(readFileSync(join(oldWorkspace, 'kept.txt'), 'utf8')).toBe('kept\n');
    // The installation is gone.
    await r!.close();
    r = null;
    // PostgreSQL: a new database not even migrated (restore migrates it to the backup's schema first); the
    // embedded database: a new data dir whose database is migrated and empty, as after `aws migrate`.
    target = await createTestEnv({ vars: secrets });
    const done = await runCommand(['backup', 'restore', archive, '--json'], { env: target, timeoutMs: 120_000 });
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout).rows).toBeGreaterThan(10);

    restored = await startRuntimeApp({ env: target });
    const t = restored.t;
    expect(readFileSync(join(target.dataDir, 'workspaces', people.tenantId, people.ids.mia, 'kept.txt'), 'utf8')).toBe('kept\n');
    expect(readFileSync(join(target.dataDir, 'tenants', people.tenantId, 'shared', 'notes.md'), 'utf8')).toBe(`${sharedNote}\n`);
    // Sessions with their transcript, memories, gateways (their sealed token opens with the same key), skills, audit.
    const { signToken } = await import('../helpers/app.js');
    const member = await signToken(t, { sub: people.ids.mia, tid: people.tenantId, roles: ['member'] });
    const owner = await signToken(t, { sub: people.ids.owner, tid: people.tenantId, roles: ['owner'] });
    const messages = await api(t, 'GET', `/v1/sessions/${sessionId}/messages`, { token: member });
    expect(messages.status, messages.text).toBe(200);
    expect(JSON.stringify(messages.json)).toContain('The launch code is 4711.');
    const memories = await api(t, 'GET', '/v1/memories', { token: member });
    expect(JSON.stringify(memories.json)).toContain('The release train leaves on Thursdays');
    const gateways = await api(t, 'GET', '/v1/gateways', { token: owner });
    expect(JSON.stringify(gateways.json)).toContain('backup_bot');
    expect((await t.opened.db.query(`select name from skills where tenant_id = $1`, [people.tenantId])).rows.map((x) => x.name)).toEqual(['release-notes']);
    const actions = (await t.opened.db.query<{ action: string }>(`select action from audit_log order by seq`)).rows.map((x) => x.action);
    // The entries of before the backup (its own backup.created is written after its snapshot), then the restore's.
    expect(actions).toEqual(expect.arrayContaining(['tenant.create', 'gateway.create']));
    expect(actions).not.toContain('backup.created');
    expect(actions.at(-1)).toBe('backup.restored');
    // New audit entries continue the old sequence (the sequence was restored, not restarted).
    const { rows: seqs } = await t.opened.db.query<{ n: string; max: string }>(`select count(*)::text as n, max(seq)::text as max from audit_log`);
    expect(Number(seqs[0].max)).toBeGreaterThanOrEqual(Number(seqs[0].n));

    // A turn in the old session: the runtime starts from the restored home, and the model is sent the earlier messages.
    await applyScriptedProviderKeepKey();
    const before = restored.llm.requests.length;
    await agentTurn(restored, member, [{ text: 'Still 4711.' }], { sessionId, text: 'And again?' });
    const sent = restored.llm.requests.slice(before).filter((q) => !q.title);
    expect(sent.length).toBeGreaterThan(0);
    expect(JSON.stringify(sent[0].body.messages)).toContain('The launch code is 4711.');
  });

  /** The restored provider points at the old run's scripted model: point it at this run's (the key stays sealed as it was). */
  async function applyScriptedProviderKeepKey() {
    const t = restored!.t;
    await t.opened.db.query(`update providers set base_url = $1 where tenant_id = $2`, [`${restored!.llm.url}/v1`, people.tenantId]);
    const { signToken } = await import('../helpers/app.js');
    const owner = await signToken(t, { sub: people.ids.owner, tid: people.tenantId, roles: ['owner'] });
    const applied = await api(t, 'POST', '/v1/admin/runtime/apply', { token: owner, body: { defaultModel: 'scripted/fake-model' } });
    expect(applied.status, applied.text).toBe(200);
  }
});
