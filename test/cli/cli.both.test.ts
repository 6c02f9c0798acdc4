import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, runCli, runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

/** Parses stdout as exactly one JSON document (fails if anything else is printed there). */
function oneJson<T = any>(stdout: string): T {
  return JSON.parse(stdout) as T;
}

describe(`CLI (${DB_MODE})`, () => {
  let env: TestEnv;
  let configPath: string;
  const dbFlags = () => (env.databaseUrl ? ['--database-url', env.databaseUrl] : []);

  beforeAll(async () => {
    env = await createTestEnv({ initialiseEmbedded: false });
    configPath = join(env.dir, 'fresh', 'config.env');
  });
  afterAll(() => env?.cleanup());

  it('init --yes sets everything up and prints one JSON document', async () => {
    const r = await runCli(['init', '--yes', '--json', '--config', configPath, '--data-dir', env.dataDir, '--owner-email', 'ops@example.com', '--tenant-name', 'Ops', ...dbFlags()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const doc = oneJson(r.stdout);
    expect(doc).toMatchObject({
      configFile: configPath,
      database: DB_MODE,
      demoMode: true,
      tenant: { slug: 'ops', created: true },
      operator: { email: 'ops@example.com', handle: 'ops' },
    });
    expect(doc.migrationsApplied.length).toBeGreaterThan(0);
    expect(doc.secrets).toBeUndefined();
    const text = readFileSync(configPath, 'utf8');
    expect(text).toMatch(/^AGENTWS_JWT_SECRET=\S{43}$/m);
    expect(text).toMatch(/^AGENTWS_OPERATOR_EMAIL=ops@example.com$/m);
    // Secrets never reach stdout unless asked.
    const secret = /^AGENTWS_JWT_SECRET=(\S+)$/m.exec(text)![1];
    expect(r.stdout).not.toContain(secret);
  });

  it('refuses to overwrite the config without --force, and --force keeps secrets and data', async () => {
    const before = readFileSync(configPath, 'utf8');
    const again = await runCommand(['init', '--yes', '--config', configPath, '--data-dir', env.dataDir, ...dbFlags()]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
    expect(again.stderr).toMatch(/--force/);
    expect(readFileSync(configPath, 'utf8')).toBe(before);

    const forced = await runCommand(['init', '--yes', '--force', '--json', '--config', configPath, '--data-dir', env.dataDir, '--owner-email', 'ops@example.com', '--tenant-name', 'Ops', ...dbFlags()]);
    expect(forced.code).toBe(0);
    const doc = oneJson(forced.stdout);
    expect(doc.tenant.created).toBe(false);
    expect(doc.migrationsApplied).toEqual([]);
    const secretLines = (t: string) => t.split('\n').filter((l) => /^AGENTWS_(JWT_SECRET|ENCRYPTION_KEY|API_KEY)=/.test(l));
    expect(secretLines(readFileSync(configPath, 'utf8'))).toEqual(secretLines(before));
  });

  it('never prompts without a TTY, even without --yes', async () => {
    const other = join(env.dir, 'noprompt', 'config.env');
    const r = await runCommand(['init', '--config', other, '--data-dir', join(env.dir, 'noprompt-data'), '--json', '--no-demo', ...(env.databaseUrl ? ['--database-url', env.databaseUrl] : [])], { timeoutMs: 60_000 });
    expect(r.code).toBe(0);
    expect(oneJson(r.stdout).demoMode).toBe(false);
  });

  it('migrate: --status reports, a second run applies nothing', async () => {
    const status = await runCommand(['migrate', '--status', '--json', '--config', configPath]);
    expect(status.code).toBe(0);
    const doc = oneJson(status.stdout);
    expect(doc.pending).toBe(0);
    expect(doc.migrations.every((m: { appliedAt: string | null }) => typeof m.appliedAt === 'string')).toBe(true);

    const again = await runCommand(['migrate', '--json', '--config', configPath]);
    expect(again.code).toBe(0);
    expect(oneJson(again.stdout)).toEqual({ applied: [], pending: [] });

    const human = await runCommand(['migrate', '--status', '--config', configPath]);
    expect(human.stdout).toMatch(/^MIGRATION\s+APPLIED/m);
    expect(human.stderr).toMatch(/schema is current/);
  });

  it('tenant seed --json is idempotent; tenant list shows it', async () => {
    const args = ['tenant', 'seed', '--json', '--config', configPath, '--name', 'ACME Corp', '--owner-email', 'alice@acme.example'];
    const first = await runCommand(args);
    expect(first.code).toBe(0);
    const a = oneJson(first.stdout);
    expect(a.created).toEqual({ tenant: true, owner: true, roles: ['owner', 'admin', 'member', 'viewer'] });
    const second = oneJson((await runCommand(args)).stdout);
    expect(second.tenant.id).toBe(a.tenant.id);
    expect(second.created).toEqual({ tenant: false, owner: false, roles: [] });

    const list = oneJson((await runCommand(['tenant', 'list', '--json', '--config', configPath])).stdout);
    // On PostgreSQL the no-prompt init above shares this database and adds its own "default" tenant.
    expect(list.tenants.map((t: { slug: string }) => t.slug)).toEqual(expect.arrayContaining(['acme-corp', 'ops']));
  });

  it('bad flags give a clear error and exit 1', async () => {
    const missing = await runCli(['tenant', 'seed', '--config', configPath, '--name', 'X']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/owner-email/);
    expect(missing.stderr).toMatch(/Hint:/);

    const unknown = await runCli(['migrate', '--bogus', '--config', configPath]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/--bogus/);

    const badValue = await runCommand(['tenant', 'seed', '--config', configPath, '--name', 'Y', '--owner-email', 'not-an-email']);
    expect(badValue.code).toBe(1);
    expect(badValue.stderr).toMatch(/not an email address/);

    const json = await runCommand(['tenant', 'seed', '--json', '--config', configPath, '--name', 'Y', '--owner-email', 'not-an-email']);
    expect(json.code).toBe(1);
    expect(oneJson(json.stdout)).toMatchObject({ error: 'validation_failed' });
  });

  it('a bad config names every problem and exits 1', async () => {
    const bad = join(env.dir, 'bad.env');
    writeFileSync(bad, 'AGENTWS_PORT=eighty\nAGENTWS_LOG_LEVEL=loud\n');
    const r = await runCommand(['migrate', '--config', bad]);
    expect(r.code).toBe(1);
    for (const v of ['AGENTWS_PORT', 'AGENTWS_LOG_LEVEL', 'AGENTWS_JWT_SECRET', 'AGENTWS_ENCRYPTION_KEY']) expect(r.stderr).toContain(v);
  });

  it('config show masks secrets unless asked', async () => {
    const secret = /^AGENTWS_API_KEY=(\S+)$/m.exec(readFileSync(configPath, 'utf8'))![1];
    const masked = await runCommand(['config', 'show', '--config', configPath]);
    expect(masked.code).toBe(0);
    expect(masked.stdout).toMatch(/AGENTWS_API_KEY\s+\S+…\(43 chars\)\s+file/);
    expect(masked.stdout).not.toContain(secret);
    const shown = oneJson((await runCommand(['config', 'show', '--json', '--show-secrets', '--config', configPath])).stdout);
    expect(shown.variables.AGENTWS_API_KEY).toEqual({ value: secret, source: 'file' });
    expect(shown.variables.AGENTWS_PORT).toEqual({ value: '8080', source: 'file' });
  });

  it('--help lists every command with a summary, and each command has examples', async () => {
    const root = await runCommand(['--help']);
    for (const cmd of ['init', 'migrate', 'serve', 'worker', 'tenant seed', 'tenant list', 'config show']) {
      expect(root.stdout).toMatch(new RegExp(`^\\s+${cmd}\\s+\\S`, 'm'));
      const help = await runCommand([...cmd.split(' '), '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('EXAMPLES');
    }
  });

  it("keeps the CLI's compiled code in the user's cache, and runs as well where that cannot be written", async () => {
    const cacheHome = join(env.dir, 'cache');
    // --version goes through oclif (--help does not load it: test/cli/fast-help.test.ts).
    const cached = await runCli(['--version'], { extraEnv: { XDG_CACHE_HOME: cacheHome } });
    expect(cached.code).toBe(0);
    const dir = join(cacheHome, 'agentws', 'node-compile-cache');
    // One folder per Node version, holding an entry per module compiled (oclif and its dependencies).
    const versions = readdirSync(dir);
    expect(versions).toHaveLength(1);
    expect(readdirSync(join(dir, versions[0])).length).toBeGreaterThan(20);
    // sysfs refuses new directories (EPERM), even to root.
    for (const args of [['--version'], ['--help']]) {
      const withCache = await runCli(args, { extraEnv: { XDG_CACHE_HOME: cacheHome } });
      const uncached = await runCli(args, { extraEnv: { XDG_CACHE_HOME: '/sys/agentws-no-cache' } });
      expect(uncached).toMatchObject({ code: 0, stderr: '', stdout: withCache.stdout });
    }
  });

  const systemNode = '/usr/bin/node';
  const oldNode = existsSync(systemNode) && Number(spawnSync(systemNode, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).stdout) < 24;
  it.runIf(oldNode)('on a Node.js older than 24 it says what it needs and how to get it', () => {
    const r = spawnSync(systemNode, [BIN, 'tenant', 'list'], { encoding: 'utf8', env: cleanEnv() });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/aws needs Node\.js >= 24; this is v\d+/);
    expect(r.stderr).toContain('./install.sh --with-node');
  });

  it.runIf(DB_MODE === 'embedded')('aws worker refuses the embedded database with a clear hint', async () => {
    const r = await runCli(['worker', '--config', configPath]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/needs PostgreSQL/);
    expect(existsSync(configPath)).toBe(true);
  });
});
