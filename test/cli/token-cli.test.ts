import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, freePort, seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand, startServe, type ServeProcess } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws token create|list|revoke` run in-process (the built CLI): the operator creating a person's token (audited as
 * system:cli), and on PostgreSQL a revocation holding at once in a separate `aws serve` process.
 */
describe(`token commands (${DB_MODE})`, { timeout: 180_000 }, () => {
  let t: TestApp;
  let serve: ServeProcess | null = null;
  let acme: { tenantId: string; ids: Record<string, string> };
  const run = (args: string[]) => runCommand([...args, '--tenant', 'acme'], { env: t.env });

  beforeAll(async () => {
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [{ handle: 'mel', roles: ['member'] }]);
    await seedTenant(t, 'beta');
    if (DB_MODE === 'postgres') serve = await startServe(t.env, { extraEnv: { AGENTWS_PORT: String(await freePort()) } });
  });
  afterAll(async () => {
    await serve?.stop();
    await t?.close();
  });

  it('creates a token for a user once, lists it without its value, refuses what the user does not hold, revokes it everywhere', async () => {
    const created = await run(['token', 'create', '--user', 'mel@acme.example', '--name', 'ci', '--scopes', 'read,sessions', '--expires-in', '7d', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const { token, value } = JSON.parse(created.stdout);
    expect(value).toMatch(/^agentws_pat_/);
    expect(token).toMatchObject({ name: 'ci', scopes: ['read', 'sessions'], userId: acme.ids.mel, createdBy: 'system:cli' });
    expect(Date.parse(token.expiresAt) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    const me = await api(t, 'GET', '/v1/auth/me', { token: value });
    expect(me.json.user.handle).toBe('mel');

    // Human output: the value alone on stdout, the rest on stderr.
    const human = await run(['token', 'create', '--user', 'mel', '--name', 'laptop', '--scopes', 'read']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout.trim()).toMatch(/^agentws_pat_[A-Za-z0-9_-]{43}$/);
    expect(human.stderr).toContain('shown only now');

    const over = await run(['token', 'create', '--user', 'mel', '--name', 'x', '--scopes', 'admin']);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/scopes: mel does not hold admin/);
    const long = await run(['token', 'create', '--user', 'mel', '--name', 'x', '--scopes', 'read', '--expires-in', '200d']);
    expect(long.code).toBe(1);
    expect(long.stderr).toContain('expiresInDays');
    expect((await run(['token', 'create', '--user', 'mel', '--name', 'x', '--scopes', 'read', '--expires-in', 'soon'])).code).toBe(1);

    const list = await run(['token', 'list', '--user', 'mel', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout).tokens.map((x: { name: string }) => x.name).sort()).toEqual(['ci', 'laptop']);
    expect(list.stdout).not.toContain(value);
    const table = await run(['token', 'list']);
    expect(table.stdout).toMatch(/mel\s+ci\s+agentws_pat_\S+\s+read,sessions\s+active/);
    expect((await runCommand(['token', 'list', '--tenant', 'beta', '--json'], { env: t.env })).stdout).toContain('"tokens": []');

    if (serve) {
      const onServe = () => fetch(`${serve!.url}/v1/sessions`, { headers: { authorization: `Bearer ${value}` } });
      expect((await onServe()).status).toBe(200);
    }
    const revoked = await run(['token', 'revoke', token.id, '--yes', '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout).token).toMatchObject({ id: token.id, revokedBy: 'system:cli' });
    expect((await api(t, 'GET', '/v1/sessions', { token: value })).status).toBe(401);
    if (serve) {
      const r = await onServeAfter(serve.url, value);
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ error: 'invalid token' });
    }
    const { rows: entries } = await t.opened.db.query<{ action: string; actor: string }>(`select action, actor, details from audit_log where tenant_id = $1 and action like 'token.%'`, [acme.tenantId]);
    expect(entries.filter((e) => e.action === 'token.create').map((e) => e.actor)).toEqual(['system:cli', 'system:cli']);
    expect(entries.some((e) => e.action === 'token.revoke' && e.actor === 'system:cli')).toBe(true);
    expect(JSON.stringify(entries)).not.toContain(value);
  });
});

async function onServeAfter(url: string, value: string) {
  const r = await fetch(`${url}/v1/sessions`, { headers: { authorization: `Bearer ${value}` } });
  return { status: r.status, body: await r.json() };
}
