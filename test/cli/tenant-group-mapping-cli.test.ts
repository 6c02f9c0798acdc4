import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/** `aws tenant group-mapping` run in-process (the built CLI): shows, sets and switches the sign-in group mapping. */
describe(`tenant group-mapping (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand(['tenant', 'group-mapping', ...args, '--tenant', 'acme'], { env: t.env });

  beforeAll(async () => {
    t = await startTestApp();
    await seedTenant(t, 'acme');
    expect((await runCommand(['team', 'create', 'Platform', '--tenant', 'acme'], { env: t.env })).code).toBe(0);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is off by default, sets both mappings and the switch, and refuses unknown teams and roles', async () => {
    const shown = await run(['--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ applyGroupMapping: false, groupRoleMapping: {}, groupTeamMapping: {} });

    const set = await run(['--apply', '--role', 'g-admins=admin', '--team', 'g-plat=platform', '--json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ applyGroupMapping: true, groupRoleMapping: { 'g-admins': 'admin' }, groupTeamMapping: { 'g-plat': 'Platform' } });
    const stored = await t.opened.db.query<{ settings: Record<string, unknown> }>(`select settings from tenants where slug = 'acme'`);
    expect(stored.rows[0].settings).toMatchObject({ signIn: { applyGroupMapping: true }, groupRoleMapping: { 'g-admins': 'admin' } });

    const human = await run([]);
    expect(human.stderr).toMatch(/ON/);
    expect(human.stdout).toMatch(/g-plat\s+team\s+Platform/);

    const unknownTeam = await run(['--team', 'g-x=Nope']);
    expect(unknownTeam.code).toBe(1);
    expect(unknownTeam.stderr).toMatch(/unknown teams: g-x -> Nope/);
    expect((await run(['--role', 'g-x=wizard'])).code).toBe(1);
    expect((await run(['--role', 'no-equals-sign'])).code).toBe(1);

    const off = await run(['--no-apply', '--clear-teams', '--json']);
    expect(JSON.parse(off.stdout)).toMatchObject({ applyGroupMapping: false, groupRoleMapping: { 'g-admins': 'admin' }, groupTeamMapping: {} });
  });
});
