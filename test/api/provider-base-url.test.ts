import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { runCommand } from '../helpers/cli.js';
import { DB_MODE } from '../helpers/test-env.js';

const KEY = 'sk-old-host-secret-0123456789';

/** A stored provider key never follows a base-URL change to another host on its own. */
describe(`providers: the key and a new base URL (${DB_MODE})`, () => {
  let t: TestApp;
  let owner: string;

  beforeAll(async () => {
    t = await startTestApp();
    const acme = await seedTenant(t, 'acme');
    owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
  });
  afterAll(() => t?.close());

  const add = (name: string, body: Record<string, unknown>) => api(t, 'POST', '/v1/admin/providers', { token: owner, body: { name, models: [{ id: 'm1' }], ...body } });
  const patch = (name: string, body: Record<string, unknown>) => api(t, 'PATCH', `/v1/admin/providers/${name}`, { token: owner, body });
  const get = async (name: string) => (await api(t, 'GET', '/v1/admin/providers', { token: owner })).json.providers.find((p: any) => p.name === name);

  it('refuses a move to another origin unless the request brings a key or drops the stored one', async () => {
    expect((await add('gw', { kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9001/v1', apiKey: KEY })).status).toBe(201);
    for (const baseUrl of ['http://127.0.0.2:9001/v1', 'http://127.0.0.1:9002/v1', 'https://127.0.0.1:9001/v1']) {
      const moved = await patch('gw', { baseUrl });
      expect(moved.status, baseUrl).toBe(400);
      expect(moved.json).toMatchObject({ error: 'validation_failed', message: expect.stringMatching(/^apiKey: /), details: { field: 'apiKey' }, hint: expect.stringContaining('apiKey: null') });
    }
    expect(await get('gw')).toMatchObject({ baseUrl: 'http://127.0.0.1:9001/v1', hasApiKey: true });

    // Another path on the same origin keeps the key.
    expect((await patch('gw', { baseUrl: 'http://127.0.0.1:9001/openai/v1' })).status).toBe(200);
    expect(await get('gw')).toMatchObject({ baseUrl: 'http://127.0.0.1:9001/openai/v1', hasApiKey: true });
    // With a new key, or dropping the stored one, the move is fine.
    expect((await patch('gw', { baseUrl: 'http://127.0.0.2:9001/v1', apiKey: 'sk-new-host' })).json.provider).toMatchObject({ baseUrl: 'http://127.0.0.2:9001/v1', hasApiKey: true });
    expect((await patch('gw', { baseUrl: 'http://127.0.0.3:9001/v1', apiKey: null })).json.provider).toMatchObject({ baseUrl: 'http://127.0.0.3:9001/v1', hasApiKey: false });
    // Without a stored key there is nothing to protect.
    expect((await patch('gw', { baseUrl: 'http://127.0.0.4:9001/v1' })).status).toBe(200);
    const audit = await api(t, 'GET', '/v1/admin/audit-log?action=provider.update', { token: owner });
    expect(audit.json.entries.length).toBeGreaterThanOrEqual(4);
    expect(audit.text).not.toContain(KEY);
  });

  it('treats a built-in provider without a base URL as its official host, and keeps its key required', async () => {
    expect((await add('oa', { kind: 'openai', apiKey: KEY })).status).toBe(201);
    const moved = await patch('oa', { baseUrl: 'https://llm-proxy.example.com/v1' });
    expect(moved.status).toBe(400);
    expect(moved.json.message).toContain('https://api.openai.com -> https://llm-proxy.example.com');
    expect((await patch('oa', { baseUrl: 'https://api.openai.com/v1' })).status).toBe(200);
    const dropped = await patch('oa', { apiKey: null });
    expect(dropped.status).toBe(400);
    expect(dropped.json.details).toEqual({ field: 'apiKey' });
  });

  it('aws provider update: --base-url to another host needs --api-key-stdin or --no-api-key', async () => {
    expect((await add('cli', { kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:9101/v1', apiKey: KEY })).status).toBe(201);
    const refused = await runCommand(['provider', 'update', 'cli', '--base-url', 'http://127.0.0.9:9101/v1', '--tenant', 'acme'], { env: t.env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/apiKey: the base URL moves to another origin/);
    expect(refused.stderr).toMatch(/--no-api-key/);
    expect(await get('cli')).toMatchObject({ baseUrl: 'http://127.0.0.1:9101/v1', hasApiKey: true });
    const dropped = await runCommand(['provider', 'update', 'cli', '--base-url', 'http://127.0.0.9:9101/v1', '--no-api-key', '--tenant', 'acme', '--json'], { env: t.env });
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(JSON.parse(dropped.stdout)).toMatchObject({ provider: { baseUrl: 'http://127.0.0.9:9101/v1', hasApiKey: false }, changed: ['baseUrl', 'apiKey (removed)'] });
    const rekeyed = await runCommand(['provider', 'update', 'cli', '--base-url', 'http://127.0.0.1:9101/v1', '--api-key-stdin', '--tenant', 'acme', '--json'], { env: t.env, input: 'sk-another' });
    expect(rekeyed.code, rekeyed.stderr).toBe(0);
    expect(JSON.parse(rekeyed.stdout).provider).toMatchObject({ baseUrl: 'http://127.0.0.1:9101/v1', hasApiKey: true });
  }, 60_000);
});
