import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { CONFIG_VARS } from '../../src/config/config.schema.js';
import { ConfigError } from '../../src/kernel/errors.js';
import { readFileSync } from 'node:fs';

const SECRETS = {
  AGENTWS_JWT_SECRET: 'j'.repeat(43),
  AGENTWS_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url'),
};

function tempConfig(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'aws-cfg-'));
  const path = join(dir, 'config.env');
  writeFileSync(path, text);
  return path;
}

function problemsOf(fn: () => unknown): Array<{ variable: string; message: string }> {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies defaults and selects the embedded database when DATABASE_URL is empty', () => {
    const c = loadConfig({ env: { ...SECRETS }, cwd: '/srv/app' });
    expect(c.database).toEqual({ mode: 'embedded', url: null, poolMax: 10 });
    expect(c.server).toMatchObject({ host: '127.0.0.1', port: 8080, publicUrl: 'http://localhost:8080' });
    expect(c.dataDir).toBe('/srv/app/data');
    expect(c.worker.inServe).toBe(true);
    expect(c.configFile).toBeNull();
    expect(Object.isFrozen(c) && Object.isFrozen(c.server)).toBe(true);
  });

  it('sizes the runtime pool from the host by default (AGENTWS_RUNTIME_MAX=auto), takes a number, refuses anything else', () => {
    expect(loadConfig({ env: { ...SECRETS } }).runtime).toMatchObject({ max: null, freezeAfterMs: 10_000 });
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_MAX: ' Auto ' } }).runtime.max).toBeNull();
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_MAX: '60', AGENTWS_RUNTIME_FREEZE_SECONDS: '0' } }).runtime).toMatchObject({ max: 60, freezeAfterMs: 0 });
    for (const bad of ['0', '501', 'lots', '-3', '2.5']) {
      const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_MAX: bad } }));
      expect(problems, bad).toEqual([{ variable: 'AGENTWS_RUNTIME_MAX', message: expect.stringContaining('auto or a whole number from 1 to 500') }]);
    }
  });

  it('reads the config file and lets the environment override it; relative paths follow the file', () => {
    const path = tempConfig(
      `# comment\nAGENTWS_PORT=9000\nAGENTWS_DATA_DIR=./store\nAGENTWS_JWT_SECRET=${SECRETS.AGENTWS_JWT_SECRET}\nAGENTWS_ENCRYPTION_KEY="${SECRETS.AGENTWS_ENCRYPTION_KEY}"\nDATABASE_URL=postgres://u:p@db:5432/x\n`,
    );
    const c = loadConfig({ configPath: path, env: { AGENTWS_PORT: '9100' } });
    expect(c.server.port).toBe(9100);
    expect(c.dataDir).toBe(join(path, '..', 'store'));
    expect(c.database.mode).toBe('postgres');
    expect(c.worker.inServe).toBe(false);
    expect(c.configFile).toBe(path);
  });

  it('reports every problem at once, each with the variable name', () => {
    const problems = problemsOf(() =>
      loadConfig({
        env: {
          AGENTWS_PORT: 'eighty',
          AGENTWS_LOG_LEVEL: 'loud',
          AGENTWS_TRUST_PROXY: 'maybe',
          DATABASE_URL: 'mysql://x@y/z',
          AGENTWS_JWT_SECRET: 'short',
        },
      }),
    );
    const vars = problems.map((p) => p.variable).sort();
    expect(vars).toEqual(
      ['AGENTWS_ENCRYPTION_KEY', 'AGENTWS_JWT_SECRET', 'AGENTWS_LOG_LEVEL', 'AGENTWS_PORT', 'AGENTWS_TRUST_PROXY', 'DATABASE_URL'].sort(),
    );
    expect(problems.find((p) => p.variable === 'AGENTWS_PORT')!.message).toMatch(/whole number/);
    expect(problems.find((p) => p.variable === 'AGENTWS_ENCRYPTION_KEY')!.message).toMatch(/required/);
  });

  it('rejects unknown variables in the file (typos) and a missing explicit file', () => {
    const path = tempConfig(`AGENTWS_PROT=1\n`);
    expect(problemsOf(() => loadConfig({ configPath: path, env: SECRETS })).map((p) => p.variable)).toEqual(['AGENTWS_PROT']);
    expect(problemsOf(() => loadConfig({ configPath: '/nonexistent/config.env', env: SECRETS }))[0].variable).toBe('AGENTWS_CONFIG');
  });

  it('rejects an encryption key that is not 32 bytes', () => {
    const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_ENCRYPTION_KEY: 'x'.repeat(60) } }));
    expect(problems).toEqual([{ variable: 'AGENTWS_ENCRYPTION_KEY', message: expect.stringMatching(/32 bytes/) }]);
  });

  it('requires an operator in demo mode and builds the Entra issuer from the tenant id', () => {
    expect(problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_ALLOW_ANONYMOUS: 'true' } }))[0].variable).toBe('AGENTWS_OPERATOR_EMAIL');
    const c = loadConfig({ env: { ...SECRETS, AGENTWS_ENTRA_TENANT_ID: 'abc', AGENTWS_OIDC_CLIENT_ID: 'cid' } });
    expect(c.auth.oidc.issuerUrl).toBe('https://login.microsoftonline.com/abc/v2.0');
  });

  it('refuses demo mode on an address other machines reach, or with an identity provider, naming the reason', () => {
    const demo = { ...SECRETS, AGENTWS_ALLOW_ANONYMOUS: 'true', AGENTWS_OPERATOR_EMAIL: 'op@example.com' };
    for (const host of ['0.0.0.0', '::', '192.168.1.10', 'agents.example.com', '']) {
      const problems = problemsOf(() => loadConfig({ env: { ...demo, AGENTWS_HOST: host } }));
      expect(problems, host).toEqual([{ variable: 'AGENTWS_ALLOW_ANONYMOUS', message: expect.stringMatching(/only on a loopback address.*"/) }]);
      expect(problems[0].message).toContain(`"${host}"`);
    }
    for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', '::1']) expect(loadConfig({ env: { ...demo, AGENTWS_HOST: host } }).auth.allowAnonymous, host).toBe(true);

    for (const idp of [{ AGENTWS_OIDC_ISSUER_URL: 'https://login.example.com' }, { AGENTWS_ENTRA_TENANT_ID: 'abc' }]) {
      const problems = problemsOf(() => loadConfig({ env: { ...demo, ...idp, AGENTWS_OIDC_CLIENT_ID: 'cid' } }));
      expect(problems).toEqual([{ variable: 'AGENTWS_ALLOW_ANONYMOUS', message: expect.stringMatching(/identity provider/) }]);
      // Without a client id no sign-in is configured, so demo mode is still the only way in.
      expect(loadConfig({ env: { ...demo, ...idp } }).auth.allowAnonymous).toBe(true);
    }
    // Both at once: both reasons.
    expect(problemsOf(() => loadConfig({ env: { ...demo, AGENTWS_HOST: '0.0.0.0', AGENTWS_ENTRA_TENANT_ID: 'abc', AGENTWS_OIDC_CLIENT_ID: 'cid' } }))).toHaveLength(2);
  });

  it('takes a metrics token of 24 characters or more, never echoing a short one', () => {
    expect(loadConfig({ env: { ...SECRETS } }).secrets.metricsToken).toBeNull();
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_METRICS_TOKEN: 'm'.repeat(24) } }).secrets.metricsToken).toBe('m'.repeat(24));
    const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_METRICS_TOKEN: 'short-token' } }));
    expect(problems).toEqual([{ variable: 'AGENTWS_METRICS_TOKEN', message: expect.stringMatching(/too short \(11 characters, need at least 24\)/) }]);
    expect(JSON.stringify(problems)).not.toContain('short-token');
  });

  it('reads the egress ports the operator opens (AGENTWS_EGRESS_PORTS), reporting what is not a port with the other egress problems', () => {
    expect(loadConfig({ env: { ...SECRETS } }).runtime.egressPorts).toEqual([]);
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_EGRESS_PORTS: '22, 587' } }).runtime.egressPorts).toEqual([22, 587]);
    const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_EGRESS_PORTS: '22,smtp,70000', AGENTWS_EGRESS_PRIVATE_ALLOW: '10.0.0.0/8:5432,10.0.0.0/99' } }));
    expect(problems).toEqual([
      { variable: 'AGENTWS_EGRESS_PRIVATE_ALLOW', message: 'not a host, host:port or CIDR: 10.0.0.0/99' },
      { variable: 'AGENTWS_EGRESS_PORTS', message: 'not a port (1-65535): smtp, 70000' },
    ]);
  });

  it('memory write limits: 30 a minute and 2,000 memories a person unless set; bounded', () => {
    expect(loadConfig({ env: { ...SECRETS } }).memories).toEqual({ writesPerMinute: 30, quota: 2000 });
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_MEMORY_WRITES_PER_MINUTE: '5', AGENTWS_MEMORY_QUOTA: '100' } }).memories).toEqual({ writesPerMinute: 5, quota: 100 });
    const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_MEMORY_WRITES_PER_MINUTE: '0', AGENTWS_MEMORY_QUOTA: 'lots' } }));
    expect(problems.map((p) => p.variable)).toEqual(['AGENTWS_MEMORY_WRITES_PER_MINUTE', 'AGENTWS_MEMORY_QUOTA']);
  });

  it('the runner heartbeat timeout: 30 s unless set; at least 6 s (the control plane syncs every sixth of it)', () => {
    expect(loadConfig({ env: { ...SECRETS } }).runtime.runnerHeartbeatTimeoutMs).toBe(30_000);
    expect(loadConfig({ env: { ...SECRETS, AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS: '12000' } }).runtime.runnerHeartbeatTimeoutMs).toBe(12_000);
    expect(problemsOf(() => loadConfig({ env: { ...SECRETS, AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS: '1000' } })).map((p) => p.variable)).toEqual(['AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS']);
  });

  it('runtime limits and the workspace quota: sizes as people write them, auto and off, bounded; the quota never over its ceiling', () => {
    const GiB = 1024 ** 3;
    expect(loadConfig({ env: { ...SECRETS } }).runtime).toMatchObject({ memoryMax: 'auto', pidsMax: 1024, tmpBytes: GiB, workspaceQuotaBytes: 10 * GiB, workspaceQuotaMaxBytes: 100 * GiB });
    const set = loadConfig({
      env: { ...SECRETS, AGENTWS_RUNTIME_MEMORY_MAX: '6GiB', AGENTWS_RUNTIME_PIDS_MAX: 'off', AGENTWS_RUNTIME_TMP_SIZE: '256M', AGENTWS_WORKSPACE_QUOTA: 'off', AGENTWS_WORKSPACE_QUOTA_MAX: '1T' },
    }).runtime;
    expect(set).toMatchObject({ memoryMax: 6 * GiB, pidsMax: null, tmpBytes: 256 * 1024 ** 2, workspaceQuotaBytes: null, workspaceQuotaMaxBytes: 1024 * GiB });
    const problems = problemsOf(() =>
      loadConfig({ env: { ...SECRETS, AGENTWS_RUNTIME_MEMORY_MAX: '100MiB', AGENTWS_RUNTIME_PIDS_MAX: '10', AGENTWS_RUNTIME_TMP_SIZE: 'big', AGENTWS_WORKSPACE_QUOTA: '20GiB', AGENTWS_WORKSPACE_QUOTA_MAX: '10GiB' } }),
    );
    expect(problems.map((p) => p.variable).sort()).toEqual(['AGENTWS_RUNTIME_MEMORY_MAX', 'AGENTWS_RUNTIME_PIDS_MAX', 'AGENTWS_RUNTIME_TMP_SIZE', 'AGENTWS_WORKSPACE_QUOTA_MAX']);
    expect(problems.find((p) => p.variable === 'AGENTWS_RUNTIME_MEMORY_MAX')?.message).toMatch(/from 512 MiB .*or auto, off, got "100MiB"/);
  });

  it('never echoes a malformed URL (it may hold a password)', () => {
    const problems = problemsOf(() => loadConfig({ env: { ...SECRETS, DATABASE_URL: 'postgres://user:s3cret@' } }));
    expect(JSON.stringify(problems)).not.toContain('s3cret');
  });

  it('the docs document every variable, each under a heading of its own (the anchor errors and pages link to)', () => {
    const reference = readFileSync(new URL('../../docs/reference/configuration.md', import.meta.url), 'utf8');
    for (const v of CONFIG_VARS) expect(reference, v.name).toMatch(new RegExp(`^## ${v.name}$`, 'm'));
  });
});
