import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/open-database.js';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/** `aws role update`: the CLI's way to what the dashboard's Cost limits and Custom roles tabs do. */
describe(`role update (${DB_MODE})`, () => {
  let env: TestEnv;
  let host: Awaited<ReturnType<typeof openDatabase>> | undefined;
  beforeAll(async () => {
    env = await createTestEnv();
    if (DB_MODE === 'embedded') host = await openDatabase(env.config());
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    expect((await runCommand(['tenant', 'seed', '--name', 'acme', '--owner-email', 'alice@acme.example'], { env })).code).toBe(0);
  });
  afterAll(async () => {
    await host?.close();
    await env?.cleanup();
  });

  it('sets one cost limit, keeps the other, lifts one with "none"; a system role\'s other permissions are refused', async () => {
    const both = await runCommand(['role', 'update', 'member', '--monthly-limit', '20', '--per-request-limit', '1', '--json'], { env });
    expect(both.code, both.stderr).toBe(0);
    expect(JSON.parse(both.stdout).role.permissions.cost).toEqual({ monthly_limit_usd: 20, per_request_limit_usd: 1 });
    const one = await runCommand(['role', 'update', 'member', '--monthly-limit', 'none'], { env });
    expect(one.code, one.stderr).toBe(0);
    expect(one.stderr).toContain('updated role member; cost limits: $1 a request');

    const widen = await runCommand(['role', 'update', 'member', '--permissions', '{"admin":{"manage_users":true}}'], { env });
    expect(widen.code).toBe(1);
    expect(widen.stderr).toContain('only its cost limits, agents.terminal, agents.code_host and models can change');
    const bad = await runCommand(['role', 'update', 'member', '--monthly-limit', 'lots'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--monthly-limit must be a number');

    const audit = await runCommand(['audit', 'tail', '--json', '--action', 'role.update'], { env });
    expect(audit.stdout.trim().split('\n').map((l) => JSON.parse(l).actor)).toEqual(['system:cli', 'system:cli']);
  });
});
