import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, seedTenant, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws scim token create|list|revoke` and `aws retention show|set|run` run in-process (the built CLI): what an
 * operator setting up provisioning and a retention policy from a terminal sees.
 */
describe(`SCIM token and retention commands (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand([...args, '--tenant', 'acme'], { env: t.env });

  beforeAll(async () => {
    t = await startTestApp();
    await seedTenant(t, 'acme');
  });
  afterAll(async () => t?.close());

  it('creates a SCIM token once, which the SCIM endpoint takes; lists it by name only; revoked, it stops working', async () => {
    const created = await run(['scim', 'token', 'create', '--name', 'entra', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const { token } = JSON.parse(created.stdout);
    expect(token).toMatch(/^agentws_scim_/);
    const users = () => fetch(`${t.url}/scim/v2/Users?count=1`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
    expect(await users()).toBe(200);
    const listed = await run(['scim', 'token', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout + listed.stderr).toContain('entra');
    expect(listed.stdout + listed.stderr).not.toContain(token);
    const revoked = await run(['scim', 'token', 'revoke', '--name', 'entra']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(await users()).toBe(401);
    const again = await run(['scim', 'token', 'revoke', '--name', 'entra']);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain('no SCIM token named "entra"');
  });

  it('gives a SCIM token a lifetime (default 180 days, at most the maximum), shown with who minted it', async () => {
    const dflt = JSON.parse((await run(['scim', 'token', 'create', '--name', 'okta', '--json'])).stdout);
    expect(Math.round((Date.parse(dflt.expiresAt) - Date.now()) / 86_400_000)).toBe(180);
    const short = await run(['scim', 'token', 'create', '--name', 'okta', '--expires-in', '4w', '--json']);
    expect(short.code, short.stderr).toBe(0);
    expect(JSON.parse(short.stdout)).toMatchObject({ replaced: true, createdBy: 'system:cli' });
    expect(Math.round((Date.parse(JSON.parse(short.stdout).expiresAt) - Date.now()) / 86_400_000)).toBe(28);
    const listed = await run(['scim', 'token', 'list', '--json']);
    expect(JSON.parse(listed.stdout).tokens).toEqual([expect.objectContaining({ name: 'okta', expired: false, createdBy: 'system:cli', expiresAt: JSON.parse(short.stdout).expiresAt })]);
    const shown = await run(['scim', 'token', 'list']);
    expect(shown.stdout).toMatch(/okta\s+active\s+\d{4}-/);
    const tooLong = await run(['scim', 'token', 'create', '--name', 'okta', '--expires-in', '400d']);
    expect(tooLong.code).not.toBe(0);
    expect(tooLong.stderr).toMatch(/expiresInDays: .*365/);
    const bad = await run(['scim', 'token', 'create', '--name', 'okta', '--expires-in', 'soon']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--expires-in');
  });

  it('sets, shows and runs a retention policy; refuses an audit period under the floor, naming it', async () => {
    const set = await run(['retention', 'set', '--sessions', '90d', '--usage', '2y', '--json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout).retention).toMatchObject({ sessions: 90, usage: 730, trajectories: null, audit: null });
    const low = await run(['retention', 'set', '--audit', '30d']);
    expect(low.code).not.toBe(0);
    expect(low.stderr).toMatch(/audit: 30 days.*365/);
    const shown = await run(['retention', 'show']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout + shown.stderr).toMatch(/sessions\s+90 days/);
    const dry = await run(['retention', 'run', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, removed: { sessions: 0, usage: 0, trajectories: 0, audit: 0 } });
  });
});
