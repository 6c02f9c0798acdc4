import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { runCli, runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/** Local demo mode stays on one machine: serve, init and the config refuse it elsewhere. */
describe(`demo mode only on loopback, without an identity provider (${DB_MODE})`, () => {
  let env: TestEnv;
  const dbFlags = () => (env.databaseUrl ? ['--database-url', env.databaseUrl] : []);
  beforeAll(async () => {
    env = await createTestEnv({ vars: { AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'op@example.com' }, initialiseEmbedded: false });
  });
  afterAll(() => env?.cleanup());

  it('serve --host <non-loopback> refuses to start in demo mode, naming the variable and the reason', async () => {
    for (const host of ['0.0.0.0', '::']) {
      const r = await runCli(['serve', '--host', host, '--port', '0'], { env, timeoutMs: 30_000 });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/AGENTWS_ALLOW_ANONYMOUS/);
      expect(r.stderr).toContain(`"${host}"`);
      expect(r.stderr).toMatch(/loopback/);
      expect(r.stdout).not.toMatch(/agentws ready/);
    }
    const json = await runCli(['serve', '--host', '0.0.0.0', '--json'], { env, timeoutMs: 30_000 });
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ error: 'config_invalid', problems: [{ variable: 'AGENTWS_ALLOW_ANONYMOUS' }] });
  });

  it('a config with demo mode and AGENTWS_HOST=0.0.0.0 does not load', async () => {
    const r = await runCommand(['config', 'show'], { env, extraEnv: { AGENTWS_HOST: '0.0.0.0' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/AGENTWS_ALLOW_ANONYMOUS: demo mode .* only on a loopback address/);
  });

  it('init --demo with a non-loopback host or an identity provider is refused before anything is written', async () => {
    const configPath = join(env.dir, 'refused', 'config.env');
    for (const flags of [['--host', '0.0.0.0'], ['--entra-tenant-id', 'abc', '--oidc-client-id', 'cid']]) {
      const r = await runCommand(['init', '--yes', '--demo', '--config', configPath, '--data-dir', join(env.dir, 'refused-data'), ...flags, ...dbFlags()]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/demo mode/);
      expect(r.stderr).toMatch(/--no-demo/);
      expect(existsSync(configPath)).toBe(false);
    }
  });

  it('init --yes --host 0.0.0.0 leaves demo mode off, and writes a config that loads', async () => {
    const configPath = join(env.dir, 'public', 'config.env');
    const r = await runCommand(['init', '--yes', '--json', '--host', '0.0.0.0', '--config', configPath, '--data-dir', join(env.dir, 'public-data'), ...dbFlags()], { timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).demoMode).toBe(false);
    expect(readFileSync(configPath, 'utf8')).toMatch(/^AGENTWS_ALLOW_ANONYMOUS=false$/m);
    const config = loadConfig({ configPath, env: {} });
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.auth.allowAnonymous).toBe(false);
  });
});
