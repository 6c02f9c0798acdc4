import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws connector mcp add|list|update|remove` (the built CLI, run in-process: test/helpers/cli.ts), audited as the
 * operator; the token piped in and never printed. PostgreSQL only: the database plays no part.
 */
describe.runIf(DB_MODE === 'postgres')('connector mcp commands', { timeout: 120_000 }, () => {
  let t: TestApp;
  const TOKEN = `tok-${Math.random().toString(36).slice(2)}`;
  const run = (args: string[], input?: string) => runCommand(['connector', 'mcp', ...args, '--tenant', 'acme'], { env: t.env, input });

  beforeAll(async () => {
    t = await startTestApp();
    await seedTenant(t, 'acme');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('adds with a piped token, lists, updates and removes; --json prints one document; never the token', async () => {
    const added = await run(['add', 'tracker', '--url', 'https://mcp.example.com/mcp', '--secret-stdin', '--allow', 'member=lookup,search', '--allow', 'admin', '--json'], TOKEN);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout).server).toMatchObject({ name: 'tracker', authKind: 'bearer', hasSecret: true, access: [{ role: 'member', tools: ['lookup', 'search'] }, { role: 'admin', tools: '*' }] });

    const human = await run(['list']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/tracker\s+https:\/\/mcp\.example\.com\/mcp\s+bearer\s+member=lookup,search admin=\*\s+yes/);

    const updated = await run(['update', 'tracker', '--allow', 'member', '--disable', '--json']);
    expect(updated.code, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ server: { enabled: false, access: [{ role: 'member', tools: '*' }] }, changed: ['access', 'enabled'] });

    // Resources and prompts apart: none unless given; the three flags together write the whole list.
    const granted = await run(['update', 'tracker', '--allow', 'member=lookup', '--allow-resources', 'member=docs://handbook/*,tickets://T-1', '--allow-prompts', 'member=triage', '--allow-prompts', 'admin', '--json']);
    expect(granted.code, granted.stderr).toBe(0);
    expect(JSON.parse(granted.stdout).server.access).toEqual([
      { role: 'member', tools: ['lookup'], resources: ['docs://handbook/*', 'tickets://T-1'], prompts: ['triage'] },
      { role: 'admin', tools: [], resources: [], prompts: '*' },
    ]);
    expect((await run(['list'])).stdout).toContain('member=lookup;resources=docs://handbook/*,tickets://T-1;prompts=triage admin=(no tools);prompts=*');
    const twice = await run(['update', 'tracker', '--allow', 'member=a', '--allow', 'member=b']);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/--allow names the role member twice/);
    const badUri = await run(['update', 'tracker', '--allow-resources', 'member=not a uri']);
    expect(badUri.code).toBe(1);
    expect(badUri.stderr).toMatch(/access\[0\]\.resources/);

    const bad = await run(['add', 'Bad Name', '--url', 'https://x/mcp', '--json']);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stdout).error).toBe('validation_failed');
    expect((await run(['update', 'tracker'])).stderr).toMatch(/nothing to change/);

    const removed = await run(['remove', 'tracker', '--yes', '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ removed: 'tracker' });
    expect(JSON.parse((await run(['list', '--json'])).stdout).servers).toEqual([]);

    for (const r of [added, human, updated]) expect(r.stdout + r.stderr).not.toContain(TOKEN);
    const { rows } = await t.opened.db.query(`select action, actor, details from audit_log where target = 'mcp:tracker' order by ts`);
    expect(rows.map((r) => r.action)).toEqual(['connector.mcp.add', 'connector.mcp.update', 'connector.mcp.update', 'connector.mcp.remove']);
    expect(rows.every((r) => r.actor === 'system:cli')).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(TOKEN);
  });
});
