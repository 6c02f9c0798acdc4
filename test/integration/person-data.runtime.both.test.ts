import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCore } from '../../src/cli/open-core.js';
import { extractArchive } from '../../src/core/backup/backup-archive.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { EXPORT_FILES, pseudonymOf, pseudonymousUuid } from '../../src/core/privacy/privacy-fns.js';
import { runtimeRoot } from '../../src/core/runtime/host/managed-config.js';
import { workspaceDir } from '../../src/lib/data-paths.js';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * A person's data on request against the real runtime and both databases: Mia (a
 * member) works through a real session with the scripted model, writes memories, has a git connection,
 * a trajectory and a skill learnt from it, and audit entries name her. Her export holds what the docs
 * list (docs/admin/audit-and-data.md) and nothing of anyone else's; her erasure leaves no row, file or audit entry naming her, keeps
 * her shared memory anonymously (the tenant chose keep-anonymous), and leaves the owner's data alone.
 */
describe(`a person's data: export and erasure (${DB_MODE})`, { timeout: 300_000 }, () => {
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let mia = { id: '', email: '', handle: 'mia' };
  let miaSession = '';
  let ownerSession = '';
  const tmp = mkdtempSync(join(tmpdir(), 'agentws-person-'));
  const db = () => r.t.opened.db;
  const core = () => r.t.opened.core;
  const sys = () => systemCtx(silentLogger, { name: 'test', tenantId: acme.tenantId });
  const SEALED = 'sealed-access-token-of-mia';

  async function count(sql: string, args: unknown[]): Promise<number> {
    return (await db().query<{ n: number }>(`select count(*)::int as n from (${sql}) x`, args)).rows[0].n;
  }

  beforeAll(async () => {
    r = await startRuntimeApp();
    acme = await seedPeople(r.t, 'acme');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    mia = { id: acme.ids.mia, email: (await db().query<{ email: string }>(`select email from users where id = $1`, [acme.ids.mia])).rows[0].email, handle: 'mia' };

    // Her work: a real turn (its transcript in her runtime, usage recorded, a trajectory recorded by the worker).
    const turn = await agentTurn(r, acme.tokens.member, [{ text: 'The build is green, Mia.' }], { text: 'check the build', title: 'mia work' });
    miaSession = turn.sessionId;
    ownerSession = (await agentTurn(r, acme.tokens.owner, [{ text: 'Owner answer only.' }], { text: 'owner question', title: 'owner work' })).sessionId;
    const deadline = Date.now() + 30_000;
    while ((await count(`select 1 from trajectories where user_id = $1`, [mia.id])) === 0) {
      if (Date.now() > deadline) throw new Error('no trajectory of Mia was recorded');
      await new Promise((res) => setTimeout(res, 200));
    }

    // Her memories: one private through the API, one shared with her team (a member cannot share: stored as sharing would).
    expect((await api(r.t, 'POST', '/v1/memories', { token: acme.tokens.member, body: { kind: 'preference', content: 'Mia prefers tabs over spaces' } })).status).toBe(201);
    await db().query(`insert into memories (tenant_id, user_id, kind, content, visibility) values ($1, $2, 'fact', 'The staging database is db-stage-7', 'team')`, [acme.tenantId, mia.id]);
    expect((await api(r.t, 'POST', '/v1/memories', { token: acme.tokens.owner, body: { kind: 'fact', content: 'Owner secret plan zebra' } })).status).toBe(201);
    // Vic (a viewer) has a private and an org memory; the default policy removes both at his erasure.
    await db().query(`insert into memories (tenant_id, user_id, kind, content, visibility) values ($1, $2, 'fact', 'Vic private note', 'private'), ($1, $2, 'fact', 'Vic shared note', 'org')`, [acme.tenantId, acme.ids.vic]);

    // A skill learnt from her trajectory, and her git connection (its token sealed).
    const trajectory = (await db().query<{ id: string }>(`select id from trajectories where user_id = $1 limit 1`, [mia.id])).rows[0].id;
    const skill = (await db().query<{ id: string }>(`insert into skills (tenant_id, name, description) values ($1, 'check-the-build', 'Checks the build') returning id`, [acme.tenantId])).rows[0].id;
    await db().query(`insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories) values ($1, $2, 1, 'Checks the build', 'SKILL body from Mia', $3::uuid[])`, [skill, acme.tenantId, [trajectory]]);
    const host = (await db().query<{ id: string }>(`insert into git_hosts (tenant_id, name, base_url, secret_sealed) values ($1, 'forge', 'https://forge.example', null) returning id`, [acme.tenantId])).rows[0].id;
    await db().query(`insert into git_connections (tenant_id, host_id, user_id, account, access_sealed, scopes) values ($1, $2, $3, 'mia-at-forge', $4, 'repo')`, [acme.tenantId, host, mia.id, SEALED]);

    // An entry about her written by someone else, naming her email and handle.
    await db().transaction(async (tx) => {
      await core().audit.record(tx, sys(), { action: 'test.mention', target: `user:${mia.id}`, details: { email: mia.email.toUpperCase(), handle: 'mia', note: `contacted ${mia.email}` } });
    });
  });

  afterAll(async () => {
    await r?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("exports everything of hers the docs list, and nothing of anyone else's or any secret", async () => {
    const res = await fetch(`${r.t.url}/v1/admin/users/${mia.id}/export`, { method: 'POST', headers: { authorization: `Bearer ${acme.tokens.owner}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/gzip');
    const file = join(tmp, 'mia.tar.gz');
    writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    const dir = join(tmp, 'mia');
    const manifest = (await extractArchive(file, dir)) as unknown as { kind: string; userId: string; files: Record<string, { count: number }>; warnings: string[] };
    expect(manifest.kind).toBe('agentws-person-export');
    expect(manifest.userId).toBe(mia.id);
    expect(manifest.warnings).toEqual([]);
    expect(Object.keys(manifest.files)).toEqual(Object.keys(EXPORT_FILES));
    const read = (name: string) => JSON.parse(readFileSync(join(dir, name), 'utf8'));

    expect(read('profile.json')).toMatchObject({ id: mia.id, email: mia.email, handle: 'mia' });
    expect(read('roles.json')).toEqual(['member']);
    const sessions = read('sessions.json') as Array<{ id: string; transcript: string | null }>;
    expect(sessions.map((s) => s.id)).toEqual([miaSession]);
    // The transcript as GET /v1/sessions/:id/messages shows it.
    const transcript = read(`sessions/${miaSession}.json`);
    const shown = (await api(r.t, 'GET', `/v1/sessions/${miaSession}/messages`, { token: acme.tokens.member })).json.messages;
    expect(transcript.messages).toEqual(shown);
    expect(JSON.stringify(transcript)).toContain('The build is green, Mia.');
    expect((read('memories.json') as Array<{ content: string }>).map((m) => m.content).sort()).toEqual(['Mia prefers tabs over spaces', 'The staging database is db-stage-7']);
    expect((read('trajectories.json') as Array<{ request: string }>)[0].request).toContain('check the build');
    expect(read('skills.json')).toMatchObject([{ name: 'check-the-build', content: 'SKILL body from Mia' }]);
    expect(read('git-connections.json')).toMatchObject([{ host: 'forge', account: 'mia-at-forge', scopes: 'repo' }]);
    expect((read('usage.json') as unknown[]).length).toBeGreaterThan(0);
    const audit = read('audit.json') as Array<{ action: string; actor: string }>;
    expect(audit.map((e) => e.action)).toEqual(expect.arrayContaining(['session.create', 'test.mention']));
    expect(manifest.files['memories.json'].count).toBe(2);
    expect(manifest.files['sessions/<id>.json'].count).toBe(1);

    // Nothing of the owner's, and no secret of the appliance.
    const everything = readdirSync(dir, { recursive: true }).filter((p) => statSync(join(dir, String(p))).isFile()).map((p) => readFileSync(join(dir, String(p)), 'utf8')).join('\n');
    for (const foreign of ['Owner secret plan zebra', 'Owner answer only.', ownerSession, SEALED, 'sk-scripted-secret']) expect(everything).not.toContain(foreign);
    expect(readdirSync(join(dir, 'sessions'))).toEqual([`${miaSession}.json`]);
  });

  it('lets a person export their own data, and nobody without admin.manage_users anyone else', async () => {
    const own = await fetch(`${r.t.url}/v1/me/export`, { headers: { authorization: `Bearer ${acme.tokens.viewer}` } });
    expect(own.status).toBe(200);
    const other = await fetch(`${r.t.url}/v1/admin/users/${mia.id}/export`, { method: 'POST', headers: { authorization: `Bearer ${acme.tokens.viewer}` } });
    expect(other.status).toBe(403);
    expect((await fetch(`${r.t.url}/v1/admin/users/${mia.id}/erase`, { method: 'POST' })).status).toBe(401);
    const doc = await api(r.t, 'GET', '/v1/openapi.json');
    expect(doc.json.paths['/v1/admin/users/{userId}/export'].post.responses['200']).toBeDefined();
    expect(doc.json.paths['/v1/admin/users/{userId}/erase'].post.responses['200']).toBeDefined();
    expect(doc.json.paths['/v1/me/export'].get).toBeDefined();
  });

  it("takes a tenant policy for shared memories, naming a wrong value's field", async () => {
    const bad = await api(r.t, 'PATCH', '/v1/admin/tenant', { token: acme.tokens.owner, body: { settings: { privacy: { sharedMemoriesOnErase: 'keep' } } } });
    expect(bad.status).toBe(400);
    const ok = await api(r.t, 'PATCH', '/v1/admin/tenant', { token: acme.tokens.owner, body: { settings: { privacy: { sharedMemoriesOnErase: 'keep-anonymous' } } } });
    expect(ok.status).toBe(200);
    expect(ok.json.tenant.settings.privacy).toEqual({ sharedMemoriesOnErase: 'keep-anonymous' });
  });

  it('erases her: rows, files and the runtime store gone, audit kept under a pseudonym, shared memory kept anonymously', async () => {
    const dataDir = core().config.dataDir;
    const owner = { tenantId: acme.tenantId, userId: mia.id };
    const opencodeStore = join(runtimeRoot(dataDir, mia.id), 'home', '.local', 'share', 'opencode');
    expect(existsSync(workspaceDir(dataDir, owner))).toBe(true);
    expect(existsSync(opencodeStore)).toBe(true);
    const usageBefore = await count(`select 1 from usage_records where user_id = $1`, [mia.id]);

    const res = await api(r.t, 'POST', `/v1/admin/users/${mia.id}/erase`, { token: acme.tokens.owner });
    expect(res.status).toBe(200);
    const pseudonym = pseudonymOf(core().config.secrets.encryptionKey, acme.tenantId, mia.id);
    expect(res.json.erased).toMatchObject({ pseudonym, policy: 'keep-anonymous', sessions: 1, privateMemories: 1, sharedMemoriesKept: 1, sharedMemoriesRemoved: 0, gitConnections: 1, filesRemoved: { workspace: true, runtimeHome: true } });
    expect(res.json.erased.trajectories).toBeGreaterThan(0);

    // Her runtime is stopped, her files gone (opencode's own session store with them).
    expect(core().pool.live().map((l) => l.userId)).not.toContain(mia.id);
    expect(existsSync(workspaceDir(dataDir, owner))).toBe(false);
    expect(existsSync(runtimeRoot(dataDir, mia.id))).toBe(false);
    expect(existsSync(opencodeStore)).toBe(false);

    // Her rows.
    expect(await count(`select 1 from users where id = $1 or lower(email) = lower($2)`, [mia.id, mia.email])).toBe(0);
    expect(await count(`select 1 from agent_sessions where id = $1 or owner_id = $2`, [miaSession, mia.id])).toBe(0);
    expect(await count(`select 1 from agent_turns where user_id = $1 or session_id = $2`, [mia.id, miaSession])).toBe(0);
    expect(await count(`select 1 from trajectories where user_id = $1`, [mia.id])).toBe(0);
    expect(await count(`select 1 from git_connections where user_id = $1`, [mia.id])).toBe(0);
    expect(await count(`select 1 from auth_sign_ins where user_id = $1`, [mia.id])).toBe(0);
    expect(await count(`select 1 from memories where user_id = $1 or content = 'Mia prefers tabs over spaces'`, [mia.id])).toBe(0);
    // Her team memory stays for the others, authored by a placeholder named by the pseudonym.
    const kept = (await db().query<{ handle: string; email: string }>(`select u.handle, u.email from memories m join users u on u.id = m.user_id where m.content = 'The staging database is db-stage-7'`)).rows;
    expect(kept).toEqual([{ handle: `erased-${pseudonym.slice(7)}`, email: `erased-${pseudonym.slice(7)}@erased.invalid` }]);
    // Usage stays the organisation's record, under the pseudonymous id.
    expect(await count(`select 1 from usage_records where user_id = $1`, [mia.id])).toBe(0);
    expect(await count(`select 1 from usage_records where user_id = $1`, [pseudonymousUuid(core().config.secrets.encryptionKey, acme.tenantId, mia.id)])).toBe(usageBefore);
    expect(await count(`select 1 from usage_monthly where user_id = $1`, [mia.id])).toBe(0);

    // The audit log keeps its entries, none naming her; the erasure itself is recorded under the pseudonym.
    expect(await count(`select 1 from audit_log where user_id = $1 or actor = $2 or strpos(target, $1::text) > 0 or strpos(details::text, $1::text) > 0`, [mia.id, `user:${mia.id}`])).toBe(0);
    expect(await count(`select 1 from audit_log where strpos(lower(details::text || target || actor), lower($1)) > 0 or strpos(details::text, '"mia"') > 0`, [mia.email])).toBe(0);
    expect(await count(`select 1 from audit_log where actor = $1 and action = 'session.create'`, [pseudonym])).toBe(1);
    expect(await count(`select 1 from audit_log where action = 'test.mention' and target = $1`, [pseudonym])).toBe(1);
    const erase = (await db().query<{ actor: string; target: string; details: any }>(`select actor, target, details from audit_log where action = 'user.erase'`)).rows;
    expect(erase).toEqual([{ actor: `user:${acme.ids.owner}`, target: pseudonym, details: expect.objectContaining({ pseudonym, policy: 'keep-anonymous', counts: expect.objectContaining({ sessions: 1 }) }) }]);
    // The audit log is still append-only for anything else.
    await expect(db().query(`update audit_log set action = 'x' where action = 'user.erase'`)).rejects.toThrow(/append-only/);

    // The owner's data is untouched.
    expect(await count(`select 1 from agent_sessions where id = $1`, [ownerSession])).toBe(1);
    expect(await count(`select 1 from memories where content = 'Owner secret plan zebra'`, [])).toBe(1);
    const ownerMessages = await api(r.t, 'GET', `/v1/sessions/${ownerSession}/messages`, { token: acme.tokens.owner });
    expect(JSON.stringify(ownerMessages.json)).toContain('Owner answer only.');
    expect(existsSync(workspaceDir(dataDir, { tenantId: acme.tenantId, userId: acme.ids.owner }))).toBe(true);
  });

  it('removes shared memories by default policy, stops a runtime from a process hosting none (the CLI), and never erases the last owner', async () => {
    await api(r.t, 'PATCH', '/v1/admin/tenant', { token: acme.tokens.owner, body: { settings: { privacy: { sharedMemoriesOnErase: 'remove' } } } });
    const vic = { tenantId: acme.tenantId, userId: acme.ids.vic };
    await core().pool.prestart(vic);
    expect(core().pool.live().map((l) => l.userId)).toContain(vic.userId);
    expect(existsSync(runtimeRoot(core().config.dataDir, vic.userId))).toBe(true);
    // PostgreSQL: erased from a second core, as `aws user erase` does while `aws serve` hosts the runtime.
    const cli = DB_MODE === 'postgres' ? await openCore(r.t.env.config(), silentLogger) : null;
    try {
      const erased = await (cli?.core ?? core()).privacy.erasePerson(sys(), { userId: vic.userId });
      expect(erased).toMatchObject({ policy: 'remove', privateMemories: 1, sharedMemoriesRemoved: 1, sharedMemoriesKept: 0, filesRemoved: { runtimeHome: true } });
    } finally {
      await cli?.close();
    }
    expect(core().pool.live().map((l) => l.userId)).not.toContain(vic.userId);
    expect(existsSync(runtimeRoot(core().config.dataDir, vic.userId))).toBe(false);
    expect(await count(`select 1 from memories where content like 'Vic %'`, [])).toBe(0);
    await expect(core().privacy.erasePerson(sys(), { userId: acme.ids.owner })).rejects.toThrow(/last owner/);
    expect(await count(`select 1 from users where id = $1`, [acme.ids.owner])).toBe(1);
  });

  it("exports and erases al@'s entries only: never val@'s, nor al@acme.test.evil's (whole addresses, not substrings)", async () => {
    const people = { al: 'al@acme.test', val: 'val@acme.test', evil: 'al@acme.test.evil', upper: 'Sal.Al@acme.test' };
    const ids: Record<string, string> = {};
    for (const [handle, email] of Object.entries(people)) {
      ids[handle] = (await db().query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $4) returning id`, [acme.tenantId, `${handle}-x`, email, `Person ${handle}`])).rows[0].id;
    }
    // Entries about each, as other capabilities write them: the address as a value, inside text, as a key, in a target.
    await db().transaction(async (tx) => {
      for (const [handle, email] of Object.entries(people)) {
        await core().audit.record(tx, sys(), { action: 'test.profile', target: `user:${ids[handle]}`, details: { email } });
        await core().audit.record(tx, sys(), { action: 'test.note', target: `invite:${email}`, details: { note: `invited ${email} to the team`, [email]: true } });
      }
      await core().audit.record(tx, sys(), { action: 'test.both', target: 'team:ops', details: { members: [people.val, people.al] } });
    });
    const others = async () =>
      (await db().query<{ id: string; target: string; details: unknown }>(`select id, target, details from audit_log where tenant_id = $1 and action like 'test.%' and action <> 'test.both' and (target like '%val@%' or target like '%.evil%' or target like '%Sal.Al%' or target = any($2)) order by id`, [acme.tenantId, [ids.val, ids.evil, ids.upper].map((i) => `user:${i}`)])).rows;
    const before = await others();
    expect(before).toHaveLength(6);

    const file = join(tmp, 'al.tar.gz');
    const out = await core().privacy.exportPerson(sys(), { user: ids.al, file, appVersion: 'test' });
    const dir = join(tmp, 'al');
    await extractArchive(file, dir);
    const audit = JSON.parse(readFileSync(join(dir, 'audit.json'), 'utf8')) as Array<{ action: string; target: string }>;
    expect(audit.map((e) => `${e.action} ${e.target}`).sort()).toEqual([`test.both team:ops`, `test.note invite:${people.al}`, `test.profile user:${ids.al}`]);
    expect(out.counts['audit.json']).toBe(3);
    // val@ only in the entry naming both of them.
    expect(audit.filter((e) => JSON.stringify(e).includes(people.val)).map((e) => e.action)).toEqual(['test.both']);
    const text = readFileSync(join(dir, 'audit.json'), 'utf8');
    for (const other of [people.evil, people.upper, ids.val, ids.evil, ids.upper]) expect(text).not.toContain(other);

    const erased = await core().privacy.erasePerson(sys(), { userId: ids.al });
    // Those three and the export's own `user.export`.
    expect(erased.auditEntriesPseudonymised).toBe(4);
    // Everyone else's entries are exactly as they were; the shared one lost al@ only.
    expect(await others()).toEqual(before);
    const both = (await db().query<{ details: { members: string[] } }>(`select details from audit_log where tenant_id = $1 and action = 'test.both'`, [acme.tenantId])).rows[0];
    expect(both.details.members).toEqual([people.val, erased.pseudonym]);
    expect(await count(`select 1 from audit_log where tenant_id = $1 and (target = 'invite:' || $2 or details::text like '%"' || $2 || '"%' or details::text like '% ' || $2 || ' %')`, [acme.tenantId, people.al])).toBe(0);
  });
});
