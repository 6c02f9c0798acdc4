import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/open-database.js';
import { BIN, cleanEnv, runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

const lines = (s: string) => s.split('\n').filter(Boolean);

describe(`admin commands (${DB_MODE})`, () => {
  let env: TestEnv;
  // Embedded: the suite hosts the database and the commands reach it by socket, as with `aws serve`
  // running (a command hosting PGlite itself costs seconds; cli.both.test.ts covers that path).
  let host: Awaited<ReturnType<typeof openDatabase>> | undefined;
  beforeAll(async () => {
    env = await createTestEnv();
    if (DB_MODE === 'embedded') host = await openDatabase(env.config());
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    for (const [name, email] of [['acme', 'alice@acme.example'], ['beta', 'bob@beta.example']]) {
      expect((await runCommand(['tenant', 'seed', '--name', name, '--owner-email', email], { env })).code).toBe(0);
    }
  });
  afterAll(async () => {
    await host?.close();
    await env?.cleanup();
  });

  it('role assign / revoke / list and user list act through the services, audited as the CLI', async () => {
    const needTenant = await runCommand(['role', 'list'], { env });
    expect(needTenant.code).toBe(1);
    expect(needTenant.stderr).toMatch(/--tenant/);
    expect(needTenant.stderr).toMatch(/acme, beta/);

    const assign = await runCommand(['role', 'assign', 'alice', 'admin', '--tenant', 'acme', '--json'], { env });
    expect(assign.code).toBe(0);
    expect(JSON.parse(assign.stdout)).toMatchObject({ user: { email: 'alice@acme.example' }, role: { name: 'admin' }, changed: true, roles: ['admin', 'owner'] });

    const users = JSON.parse((await runCommand(['user', 'list', '--tenant', 'acme', '--json'], { env })).stdout).users;
    expect(users).toEqual([expect.objectContaining({ email: 'alice@acme.example', roles: ['admin', 'owner'] })]);

    const roles = JSON.parse((await runCommand(['role', 'list', '--tenant', 'acme', '--json'], { env })).stdout).roles;
    expect(roles.find((r: { name: string }) => r.name === 'admin').members).toBe(1);

    const revoke = await runCommand(['role', 'revoke', 'alice@acme.example', 'admin', '--tenant', 'acme', '--json'], { env });
    expect(JSON.parse(revoke.stdout).roles).toEqual(['owner']);
    const lastOwner = await runCommand(['role', 'revoke', 'alice', 'owner', '--tenant', 'acme'], { env });
    expect(lastOwner.code).toBe(1);
    expect(lastOwner.stderr).toMatch(/last owner/);
    const otherTenant = await runCommand(['role', 'assign', 'bob@beta.example', 'admin', '--tenant', 'acme'], { env });
    expect(otherTenant.code).toBe(1);
    expect(otherTenant.stderr).toMatch(/not found/);
  });

  it('audit tail prints deterministic JSON lines and CSV, oldest first, with filters', async () => {
    const json = await runCommand(['audit', 'tail', '--tenant', 'acme', '--json', '-n', '3'], { env });
    expect(json.code).toBe(0);
    const entries = lines(json.stdout).map((l) => JSON.parse(l));
    expect(entries.map((e) => e.action)).toEqual(['role.assign', 'role.assign', 'role.revoke']);
    expect(entries.every((e) => e.actor === 'system:cli' && e.channel === 'cli')).toBe(true);
    expect(Date.parse(entries[0].ts)).toBeLessThanOrEqual(Date.parse(entries[2].ts));

    const again = await runCommand(['audit', 'tail', '--tenant', 'acme', '--json', '-n', '3'], { env });
    expect(again.stdout).toBe(json.stdout);

    const csv = await runCommand(['audit', 'tail', '--action', 'tenant.create', '--csv'], { env });
    expect(lines(csv.stdout)[0]).toBe('id,ts,tenantId,userId,actor,action,target,sessionId,channel,durationMs');
    expect(lines(csv.stdout)).toHaveLength(3); // header + both tenants (no --tenant: every tenant)

    const bad = await runCommand(['audit', 'tail', '--since', 'last tuesday'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/ISO 8601/);
  });

  it('audit tail --follow streams entries as they are written and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [BIN, 'audit', 'tail', '--follow', '--json', '--tenant', 'beta', '-n', '1'], {
      env: cleanEnv({ AGENTWS_CONFIG: env.configPath }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    await expect.poll(() => lines(out).length, { timeout: 15_000 }).toBe(1);
    const started = Date.now();
    expect((await runCommand(['role', 'assign', 'bob', 'viewer', '--tenant', 'beta'], { env })).code).toBe(0);
    await expect.poll(() => lines(out).map((l) => JSON.parse(l).action), { timeout: 10_000, interval: 50 }).toEqual(['role.assign', 'role.assign']);
    const latency = Date.now() - started;
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', resolve);
      child.kill('SIGTERM');
    });
    expect(code, err).toBe(0);
    expect(latency).toBeLessThan(10_000);
  });

  it('usage report: table, JSON and CSV', async () => {
    const json = await runCommand(['usage', 'report', '--tenant', 'acme', '--since', '7d', '--json'], { env });
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ totalTokens: 0, totalCostUsd: 0, byModel: {}, byUser: {}, window: { since: '7d' } });
    const csv = await runCommand(['usage', 'report', '--tenant', 'acme', '--csv'], { env });
    expect(csv.stdout).toBe('group,key,tokens,costUsd,inputTokens,outputTokens,reasoningTokens,cacheReadTokens,cacheWriteTokens\ntotal,,0,0.000000,0,0,0,0,0\n');
    const bad = await runCommand(['usage', 'report', '--tenant', 'acme', '--since', 'soon'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/24h, 7d or 30d/);
  });

  it('user remove: removes a user with --yes (never asks without a terminal), keeps the last owner', async () => {
    for (const email of ['carol@gamma.example', 'dan@gamma.example']) {
      expect((await runCommand(['tenant', 'seed', '--name', 'gamma', '--owner-email', email], { env })).code).toBe(0);
    }
    const removed = await runCommand(['user', 'remove', 'dan@gamma.example', '--tenant', 'gamma', '--json'], { env });
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toMatchObject({ removed: { email: 'dan@gamma.example', roles: ['owner'] } });
    const users = JSON.parse((await runCommand(['user', 'list', '--tenant', 'gamma', '--json'], { env })).stdout).users;
    expect(users.map((u: { email: string }) => u.email)).toEqual(['carol@gamma.example']);
    const last = await runCommand(['user', 'remove', 'carol', '--tenant', 'gamma', '--yes'], { env });
    expect(last.code).toBe(1);
    expect(last.stderr).toMatch(/last owner/);
    const unknown = await runCommand(['user', 'remove', 'nobody@gamma.example', '--tenant', 'gamma', '--yes'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/not found/);
    const audit = lines((await runCommand(['audit', 'tail', '--tenant', 'gamma', '--action', 'user.remove', '--json'], { env })).stdout).map((l) => JSON.parse(l));
    expect(audit).toEqual([expect.objectContaining({ actor: 'system:cli', channel: 'cli', action: 'user.remove' })]);
  });
});
