import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/** `aws team create|list|add|remove|delete` run in-process (the built CLI), audited as the operator (system:cli). */
describe(`team commands (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand([...args, '--tenant', 'acme'], { env: t.env });

  beforeAll(async () => {
    t = await startTestApp();
    await seedTenant(t, 'acme', [{ handle: 'ann', roles: ['member'] }, { handle: 'bob', roles: ['member'] }]);
    await seedTenant(t, 'beta', [{ handle: 'zoe', roles: ['member'] }]);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('creates, lists, adds and removes members, deletes; --json prints one document', async () => {
    const created = await run(['team', 'create', 'Platform', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const { team } = JSON.parse(created.stdout);
    expect(team).toMatchObject({ name: 'Platform', members: [] });

    const add = await run(['team', 'add', 'platform', 'ann@acme.example', '--json']);
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({ added: true, team: { id: team.id, members: [{ handle: 'ann' }] } });
    expect((await run(['team', 'add', team.id, 'bob'])).code).toBe(0);
    const again = await run(['team', 'add', 'Platform', 'bob']);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/already in/);

    const list = await run(['team', 'list', '--json']);
    expect(JSON.parse(list.stdout).teams.map((x: any) => [x.name, x.members.map((m: any) => m.handle)])).toEqual([['Platform', ['ann', 'bob']]]);
    const human = await run(['team', 'list']);
    expect(human.stdout).toMatch(/Platform\s+ann,bob/);

    const removed = await run(['team', 'remove', 'Platform', 'bob', '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout).team.members.map((m: any) => m.handle)).toEqual(['ann']);

    // A user of another tenant, a missing team, a duplicate name: exit 1 with a message.
    const foreign = await run(['team', 'add', 'Platform', 'zoe@beta.example']);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/not found/);
    expect((await run(['team', 'add', 'Nope', 'ann'])).code).toBe(1);
    const dup = await run(['team', 'create', 'platform', '--json']);
    expect(dup.code).toBe(1);
    expect(JSON.parse(dup.stdout).error).toBe('conflict');

    const deleted = await run(['team', 'delete', 'Platform', '--json']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(JSON.parse(deleted.stdout)).toEqual({ deleted: team.id });
    expect(JSON.parse((await run(['team', 'list', '--json'])).stdout).teams).toEqual([]);

    const { rows } = await t.opened.db.query(`select action, actor from audit_log where target = $1 order by ts`, [`team:${team.id}`]);
    expect(rows.map((r) => r.action)).toEqual(['team.create', 'team.member_add', 'team.member_add', 'team.member_remove', 'team.delete']);
    expect(rows.every((r) => r.actor === 'system:cli')).toBe(true);
  });
});
