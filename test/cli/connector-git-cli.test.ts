import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

const TOKEN = 'ghp_stdin-token-0123456789SECRET';
const ROTATED = 'ghp_rotated-token-XYZ987';

/** `aws connector git add|list|update|remove` as real subprocesses: the token piped in, stored sealed, never printed. */
describe(`connector git commands (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  const run = (args: string[], input?: string) => runCli([...args, '--tenant', 'acme'], { env: t.env, input });
  const sealed = async () => (await t.opened.db.query<{ s: string }>(`select secret_sealed as s from git_hosts where name = 'github'`)).rows[0]?.s;
  const open = (s: string) => createSecretBox([t.env.vars.AGENTWS_ENCRYPTION_KEY]).open(s);

  beforeAll(async () => {
    t = await startTestApp();
    await seedTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('adds, lists, updates and removes a git host; the token only ever goes in', async () => {
    const add = await run(['connector', 'git', 'add', 'github', '--base-url', 'https://github.com/', '--token-stdin', '--access', 'role:member=acme/*,acme-infra/**', '--json'], TOKEN);
    expect(add.code, add.stderr).toBe(0);
    const added = JSON.parse(add.stdout).gitHost;
    expect(added).toMatchObject({ name: 'github', baseUrl: 'https://github.com', access: [{ who: 'role:member', repos: ['acme/*', 'acme-infra/**'] }], protectedRefs: ['refs/heads/main', 'refs/heads/master'], protectDefault: true, branchPrefix: 'agent/{handle}/' });
    expect(open(await sealed())).toBe(TOKEN);

    const list = await run(['connector', 'git', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('github');
    expect(list.stdout).toContain('role:member=acme/*,acme-infra/**');

    const bad = await run(['connector', 'git', 'update', 'github', '--branch-prefix', 'agents/']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/branchPrefix must contain \{handle\}/);

    const upd = await run(['connector', 'git', 'update', 'github', '--token-stdin', '--protect', 'refs/heads/release/*', '--json'], ROTATED);
    expect(upd.code, upd.stderr).toBe(0);
    expect(JSON.parse(upd.stdout)).toMatchObject({ changed: expect.arrayContaining(['token (rotated)', 'protectedRefs']), gitHost: { protectedRefs: ['refs/heads/release/*'] } });
    expect(open(await sealed())).toBe(ROTATED);

    for (const r of [add, list, upd]) expect(`${r.stdout}${r.stderr}`).not.toMatch(/SECRET|XYZ987/);
    const audit = JSON.stringify((await t.opened.db.query(`select details from audit_log where action like 'connector.git.%'`)).rows);
    expect(audit).not.toMatch(/SECRET|XYZ987/);

    const rm = await run(['connector', 'git', 'remove', 'github', '--yes']);
    expect(rm.code).toBe(0);
    expect(await sealed()).toBeUndefined();
    expect((await run(['connector', 'git', 'remove', 'github', '--yes'])).code).toBe(1);
  });
});
