import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

/**
 * `aws user sign-in-link` run in-process (the built CLI): the link alone on stdout, made over the same
 * database the running service reads, so the service signs its person in with it.
 */
describe(`user sign-in-link (${DB_MODE})`, { timeout: 120_000 }, () => {
  let t: TestApp;
  const run = (args: string[]) => runCommand(['user', 'sign-in-link', ...args], { env: t.env });
  const use = (url: string) => api(t, 'POST', '/v1/auth/link', { body: { token: url.split('#/sign-in-link/')[1] }, headers: { origin: t.url, 'x-agentws-csrf': '1' } });

  beforeAll(async () => {
    t = await startTestApp();
    // One tenant: --tenant may be left out, as in a container's first hour.
    await seedTenant(t, 'acme', [{ handle: 'mel', roles: ['member'] }]);
  });
  afterAll(async () => t?.close());

  it('prints a one-time link to stdout only, which the service takes once', async () => {
    const made = await run(['owner@acme.example']);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toMatch(new RegExp(`^${t.url}/#/sign-in-link/agentws_link_[A-Za-z0-9_-]{43}\\n$`));
    expect(made.stderr).toMatch(/for owner@acme\.example, for one use until .*shown only now/);
    expect(made.stderr).not.toContain('agentws_link_');
    const url = made.stdout.trim();
    expect((await use(url)).json.user.email).toBe('owner@acme.example');
    expect((await use(url)).json.error).toBe('sign_in_link_used');
    const { rows } = await t.opened.db.query<{ actor: string; channel: string; details: Record<string, unknown> }>(`select actor, channel, details from audit_log where action = 'auth.sign_in_link.create'`);
    expect(rows).toEqual([{ actor: 'system:cli', channel: 'cli', details: expect.objectContaining({ command: 'user sign-in-link', minutes: 10 }) }]);
  });

  it('takes a lifetime in minutes and --json; refuses other lifetimes and people who are no owner or admin', async () => {
    const json = await run(['owner', '--expires-in', '5m', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const doc = JSON.parse(json.stdout);
    expect(doc.url).toMatch(/#\/sign-in-link\/agentws_link_/);
    expect(Date.parse(doc.link.expiresAt) - Date.now()).toBeLessThanOrEqual(5 * 60_000);
    expect(Date.parse(doc.link.expiresAt) - Date.now()).toBeGreaterThan(4.9 * 60_000);

    for (const bad of ['90m', '2h', 'soon']) {
      const r = await run(['owner', '--expires-in', bad]);
      expect(r.code, bad).toBe(1);
      expect(r.stdout).toBe('');
    }
    const member = await run(['mel']);
    expect(member.code).toBe(1);
    expect(member.stderr).toMatch(/sign-in links are for owners and admins: mel@acme\.example holds member/);
    expect(member.stdout).toBe('');
    expect((await run(['nobody'])).stderr).toMatch(/user "nobody" not found/);
  });

  it('explains itself in --help', async () => {
    const help = await runCommand(['user', 'sign-in-link', '--help']);
    expect(help.code).toBe(0);
    const text = help.stdout.replace(/\s+/g, ' ');
    expect(text).toContain('The link works once');
    expect(text).toContain('it is not written to any log, and only a hash of its token is stored');
    expect(help.stdout).toContain('--expires-in');
  });
});
