import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tenantSharedDir } from '../../src/core/runtime/host/runtime-host.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { HAS_SCRIPT, runCommand, runInTerminal } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws skill list|show|promote|deprecate` run in-process (the built CLI), acting as the operator (system:cli).
 * Skills and their source trajectories are inserted with SQL (learning them for real needs an agent
 * runtime: test/api/skills.runtime.test.ts); promotion writes the files every sandbox of the tenant reads.
 */
describe(`skill commands (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand(args, { env: t.env });
  const sql = async <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => (await t.opened.db.query<T>(text, params)).rows;
  let acme: Awaited<ReturnType<typeof seedTenant>>;
  let beta: Awaited<ReturnType<typeof seedTenant>>;
  const ids = { notes: '', lint: '', other: '' };
  const md = (name: string, description: string) => `---\nname: ${name}\ndescription: "${description}"\n---\n\n## When to use\nx\n\n## Steps\n1. y\n\n## Verify\nz\n\n## Sources\nT1\n`;

  async function skill(tenantId: string, userId: string, name: string, description: string, minutesAgo: number): Promise<string> {
    const [{ id }] = await sql<{ id: string }>(
      `insert into skills (tenant_id, name, description, created_at, updated_at) values ($1, $2, $3, now() - make_interval(mins => $4::int), now()) returning id`,
      [tenantId, name, description, minutesAgo],
    );
    const [{ id: sessionId }] = await sql<{ id: string }>(`insert into agent_sessions (tenant_id, owner_id, title, directory) values ($1, $2, 'work', '/tmp/x') returning id`, [tenantId, userId]);
    const sources: string[] = [];
    for (const k of [1, 2, 3]) {
      const [row] = await sql<{ id: string }>(
        `insert into trajectories (tenant_id, user_id, session_id, message_id, request, answer, tools, tool_grams, words, outcome, skill_id)
         values ($1, $2, $3, $4, $5, 'done', $6, $7, '{}', 'success', $8) returning id`,
        [tenantId, userId, sessionId, `msg_${name}_${k}`, `${description} #${k}`, ['bash:npm test', 'edit:src/**/*.ts'], ['bash:npm test > edit:src/**/*.ts'], id],
      );
      sources.push(row.id);
    }
    await sql(`insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories) values ($1, $2, 1, $3, $4, $5)`, [id, tenantId, description, md(name, description), sources]);
    return id;
  }
  const skillFiles = (tenantId: string) => {
    const root = join(tenantSharedDir(t.opened.core.config.dataDir, tenantId), 'skills');
    return existsSync(root) ? readdirSync(root, { recursive: true }).map(String).filter((f) => f.endsWith('SKILL.md')) : [];
  };

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'ann', roles: ['member'] }]);
    beta = await seedTenant(t, 'beta');
    ids.notes = await skill(acme.tenantId, acme.ids.ann, 'write-release-notes', 'Write release notes for a package', 3);
    ids.lint = await skill(acme.tenantId, acme.ids.ann, 'fix-lint-errors', 'Fix lint errors reported by the linter, then run it again to see them gone', 1);
    ids.other = await skill(beta.tenantId, beta.ids.owner, 'deploy-preview', 'Deploy a preview', 2);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('list: a tenant\'s skills newest first (table and --json), --status; with several tenants one must be named', async () => {
    const json = await run(['skill', 'list', '--tenant', 'acme', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const doc = JSON.parse(json.stdout);
    expect(Object.keys(doc)).toEqual(['skills']);
    const waiting = { promotedVersion: null, pendingVersion: 1 };
    expect(doc.skills).toEqual([
      { id: ids.lint, name: 'fix-lint-errors', description: 'Fix lint errors reported by the linter, then run it again to see them gone', status: 'proposed', version: 1, ...waiting, createdAt: expect.any(String) },
      { id: ids.notes, name: 'write-release-notes', description: 'Write release notes for a package', status: 'proposed', version: 1, ...waiting, createdAt: expect.any(String) },
    ]);
    const human = await run(['skill', 'list', '--tenant', acme.tenantId]);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+STATUS\s+VERSION\s+LOADED\s+WAITING\s+CREATED\s+DESCRIPTION$/);
    expect(lines[1]).toMatch(new RegExp(`^${ids.lint}\\s+fix-lint-errors\\s+proposed\\s+1\\s+-\\s+1\\s+\\S+\\s+Fix lint errors reported by the linter, then run it again t…$`));
    expect(lines).toHaveLength(3);

    const none = await run(['skill', 'list', '--tenant', 'beta', '--status', 'promoted']);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/No skills promoted yet/);
    const ambiguous = await run(['skill', 'list']);
    expect(ambiguous.code).toBe(1);
    expect(ambiguous.stderr).toMatch(/there are 2 tenants: name one with --tenant/);
    expect((await run(['skill', 'list', '--tenant', 'acme', '--status', 'active'])).code).toBe(1);
  });

  it('show: the SKILL.md, versions and source trajectories (--json: the service\'s document); an unknown id is exit 1', async () => {
    const json = await run(['skill', 'show', ids.notes, '--json']);
    expect(json.code, json.stderr).toBe(0);
    const { skill } = JSON.parse(json.stdout);
    expect(skill).toMatchObject({ id: ids.notes, name: 'write-release-notes', status: 'proposed', promotedVersion: null, loads: 0, content: md('write-release-notes', 'Write release notes for a package') });
    expect(skill.versions).toEqual([
      {
        version: 1,
        status: 'proposed',
        description: 'Write release notes for a package',
        createdAt: expect.any(String),
        sourceTrajectories: expect.any(Array),
        content: md('write-release-notes', 'Write release notes for a package'),
        flags: [],
        reviewedBy: null,
        reviewedAt: null,
      },
    ]);
    expect(skill).toMatchObject({ pendingVersion: 1, contentVersion: 1, flags: [] });
    // The operator reviews: the requests it was learnt from are shown.
    expect(skill.sourceTrajectories.map((s: any) => s.request)).toEqual([1, 2, 3].map((k) => `Write release notes for a package #${k}`));
    expect(skill.sourceTrajectories[0].tools).toEqual(['bash:npm test', 'edit:src/**/*.ts']);

    const human = await run(['skill', 'show', ids.notes]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^status\s+proposed$/m);
    expect(human.stdout).toMatch(/^waiting\s+version 1: `aws skill promote \S+` or `aws skill reject \S+`$/m);
    expect(human.stdout).toContain('## When to use');
    expect(human.stdout).toContain('No flagged lines in version 1.');
    expect(human.stdout).toMatch(/^1\s+proposed\s+\S+\s+3\s+Write release notes for a package$/m);
    expect(human.stdout).toMatch(/^ID\s+OUTCOME\s+TOOLS\s+REQUEST$/m);
    expect(human.stdout).toMatch(/success\s+bash:npm test > edit:src\/\*\*\/\*\.ts\s+Write release notes for a package #1$/m);

    for (const id of ['0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11', 'nope']) {
      const missing = await run(['skill', 'show', id]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/^Error: skill not found$/m);
    }
  });

  it('promote with no id never waits for an answer without a terminal', async () => {
    for (const args of [['skill', 'promote'], ['skill', 'promote', '--json']]) {
      const r = await run(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no skill id given: name the skill: `aws skill promote <id>`/);
    }
    expect(JSON.parse((await run(['skill', 'promote', '--json'])).stdout).error).toBe('validation_failed');
    expect((await run(['skill', 'list', '--tenant', 'acme', '--status', 'promoted', '--json'])).stdout).toContain('"skills": []');
  });

  it.runIf(HAS_SCRIPT)('promote with no id, in a terminal: picks from the tenant\'s proposed skills', async () => {
    // The list is newest first: one arrow down picks write-release-notes.
    const r = await runInTerminal(t.env, ['skill', 'promote', '--tenant', 'acme'], [[/Promote which skill\?/, '\u001b[B\r']]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/skill write-release-notes \(version 1\) is promoted/);
    const [doc] = await sql<{ status: string }>(`select status from skills where id = $1`, [ids.notes]);
    expect(doc.status).toBe('promoted');
    await sql(`update skills set status = 'proposed', promoted_version = null, promoted_at = null where id = $1`, [ids.notes]);
    await sql(`update skill_versions set status = 'proposed', reviewed_by = null, reviewed_at = null where skill_id = $1`, [ids.notes]);
  });

  it('promote and deprecate by id: the files every sandbox of the tenant reads, audited as the operator; repeats change nothing; a deprecated skill stays so', async () => {
    const promoted = await run(['skill', 'promote', ids.notes, '--json']);
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(JSON.parse(promoted.stdout)).toEqual({ skill: expect.objectContaining({ id: ids.notes, status: 'promoted', version: 1, promotedVersion: 1, pendingVersion: null }), changed: true, version: 1 });
    const files = skillFiles(acme.tenantId);
    expect(files).toEqual([expect.stringMatching(/^[0-9a-f]{12}\/write-release-notes\/SKILL\.md$/)]);
    const root = join(tenantSharedDir(t.opened.core.config.dataDir, acme.tenantId), 'skills');
    expect(readFileSync(join(root, files[0]), 'utf8')).toBe(md('write-release-notes', 'Write release notes for a package'));
    expect(skillFiles(beta.tenantId)).toEqual([]);

    const again = await run(['skill', 'promote', ids.notes]);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/skill write-release-notes was promoted already/);

    const lint = await run(['skill', 'promote', ids.lint]);
    expect(lint.stderr).toMatch(/skill fix-lint-errors \(version 1\) is promoted: agents load it from their next turn/);
    expect(skillFiles(acme.tenantId).filter((f) => !f.startsWith(files[0].slice(0, 12))).sort()).toEqual([expect.stringMatching(/\/fix-lint-errors\/SKILL\.md$/), expect.stringMatching(/\/write-release-notes\/SKILL\.md$/)]);

    const deprecated = await run(['skill', 'deprecate', ids.notes]);
    expect(deprecated.code, deprecated.stderr).toBe(0);
    expect(deprecated.stderr).toMatch(/skill write-release-notes is deprecated: agents no longer receive it/);
    // Gone from every generation of files; the other promoted skill stays.
    expect(skillFiles(acme.tenantId).some((f) => f.includes('write-release-notes'))).toBe(false);
    expect(skillFiles(acme.tenantId).some((f) => f.includes('fix-lint-errors'))).toBe(true);
    expect((await run(['skill', 'deprecate', ids.notes])).stderr).toMatch(/was deprecated already/);
    const back = await run(['skill', 'promote', ids.notes, '--json']);
    expect(back.code).toBe(1);
    expect(JSON.parse(back.stdout)).toEqual({ error: 'conflict', message: 'a deprecated skill cannot be promoted' });

    const audit = await sql<{ action: string; actor: string; tenant_id: string }>(`select action, actor, tenant_id from audit_log where target = $1 order by ts, id`, [`skill:${ids.notes}`]);
    expect(audit.map((a) => [a.action, a.actor, a.tenant_id])).toEqual(
      expect.arrayContaining([
        ['skill.promote', 'system:cli', acme.tenantId],
        ['skill.deprecate', 'system:cli', acme.tenantId],
      ]),
    );
  });
  it('a version waiting beside the promoted one: show prints its flagged lines, promote needs --accept-flags, reject leaves the promoted one', async () => {
    // fix-lint-errors is promoted at version 1 (above); a new version waits, with a flagged line.
    const v2 = md('fix-lint-errors', 'Fix lint errors with the new linter').replace('1. y', '1. Run `npx -y new-linter`.');
    const flag = { line: 10, text: '1. Run `npx -y new-linter`.', reason: 'it runs a package fetched from a registry (npx and the like)' };
    const wait = async (version: number, content: string) => {
      await sql(`insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories, flags) values ($1, $2, $3, $4, $5, '{}', $6::jsonb)`, [
        ids.lint,
        acme.tenantId,
        version,
        `Fix lint errors, version ${version}`,
        content,
        JSON.stringify([flag]),
      ]);
      await sql(`update skills set version = $2, description = $3 where id = $1`, [ids.lint, version, `Fix lint errors, version ${version}`]);
    };
    expect(v2.split('\n')[9]).toBe(flag.text);
    await wait(2, v2);
    const loaded = () => {
      const root = join(tenantSharedDir(t.opened.core.config.dataDir, acme.tenantId), 'skills');
      const newest = skillFiles(acme.tenantId)
        .filter((f) => f.includes('fix-lint-errors'))
        .map((f) => join(root, f))
        .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
      return readFileSync(newest, 'utf8');
    };
    const v1 = loaded();
    expect(v1).toBe(md('fix-lint-errors', 'Fix lint errors reported by the linter, then run it again to see them gone'));

    const listed = JSON.parse((await run(['skill', 'list', '--tenant', 'acme', '--status', 'promoted', '--json'])).stdout).skills;
    expect(listed).toEqual([expect.objectContaining({ id: ids.lint, status: 'promoted', version: 2, promotedVersion: 1, pendingVersion: 2 })]);
    const shown = await run(['skill', 'show', ids.lint]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^loaded\s+version 1$/m);
    expect(shown.stdout).toMatch(/^waiting\s+version 2: /m);
    expect(shown.stdout).toContain('1 flagged line(s) of version 2 (read them; promote with --accept-flags):');
    expect(shown.stdout).toMatch(/^LINE\s+REASON\s+TEXT$/m);
    expect(shown.stdout).toMatch(/^10\s+it runs a package fetched from a registry \(npx and the like\)\s+1\. Run `npx -y new-linter`\.$/m);
    expect(shown.stdout).toMatch(/^1\s+promoted\s/m);
    expect(shown.stdout).toMatch(/^2\s+proposed\s/m);

    const refused = await run(['skill', 'promote', ids.lint]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/version 2 has 1 flagged line\(s\) a reviewer must read before promoting it/);
    expect(refused.stderr).toMatch(/--accept-flags/);
    expect(JSON.parse((await run(['skill', 'promote', ids.lint, '--json'])).stdout).error).toBe('flags_not_acknowledged');

    const rejected = await run(['skill', 'reject', ids.lint]);
    expect(rejected.code, rejected.stderr).toBe(0);
    expect(rejected.stderr).toMatch(/version 2 of skill fix-lint-errors is rejected: agents keep loading version 1/);
    expect((await run(['skill', 'reject', ids.lint, '--version', '2'])).stderr).toMatch(/was rejected already/);
    const nothing = await run(['skill', 'reject', ids.lint]);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/no version of this skill waits for review/);
    expect(loaded()).toBe(v1);

    const v3 = v2.replace('new-linter', 'newer-linter');
    await wait(3, v3);
    const promoted = await run(['skill', 'promote', ids.lint, '--version', '3', '--accept-flags', '--json']);
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(JSON.parse(promoted.stdout)).toEqual({ skill: expect.objectContaining({ id: ids.lint, status: 'promoted', promotedVersion: 3, pendingVersion: null }), changed: true, version: 3 });
    expect(loaded()).toBe(v3);
    const versions = JSON.parse((await run(['skill', 'show', ids.lint, '--json'])).stdout).skill.versions;
    expect(versions.map((v: any) => [v.version, v.status, v.reviewedBy])).toEqual([
      [1, 'retired', 'system:cli'],
      [2, 'rejected', 'system:cli'],
      [3, 'promoted', 'system:cli'],
    ]);
    const audit = await sql<{ action: string; details: any }>(`select action, details from audit_log where target = $1 and action in ('skill.reject', 'skill.promote') order by ts, seq`, [`skill:${ids.lint}`]);
    expect(audit.map((a) => [a.action, a.details.version, a.details.acknowledgedFlags ?? null])).toEqual([
      ['skill.promote', 1, false],
      ['skill.reject', 2, null],
      ['skill.promote', 3, true],
    ]);
  });
});
