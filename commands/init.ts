import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { openCore, type OpenedCore } from '../src/cli/open-core.js';
import { colors, info, printJson } from '../src/cli/output.js';
import { runTasks } from '../src/cli/progress.js';
import { demoModeProblems, loadConfig, parseConfigValues, readConfigFile, resolveConfigPath } from '../src/config/load-config.js';
import type { Config } from '../src/config/config.schema.js';
import { ConflictError, ValidationError } from '../src/kernel/errors.js';
import type { SeedTenantResult } from '../src/core/tenants/tenants.service.js';
import { isLoopback } from '../src/lib/loopback.js';
import { slugify } from '../src/lib/slug.js';
import { packageRoot } from '../src/lib/package-root.js';
import { randomSecret } from '../src/lib/secrets.js';

const SECRET_VARS = ['AGENTWS_JWT_SECRET', 'AGENTWS_ENCRYPTION_KEY', 'AGENTWS_API_KEY'] as const;

export default class Init extends BaseCommand<typeof Init> {
  static override summary = 'Set up the service on this host: config, database, first tenant and owner.';
  static override description =
    'Writes the config file (with freshly generated secrets), creates the data directory, applies migrations, and creates the first tenant with its owner (the operator user). Asks for each setting when run in a terminal; with --yes, or without a terminal, it never asks and takes flags and defaults. Refuses to overwrite an existing config unless --force, which keeps the existing secrets and all data.';
  static override examples = [
    '<%= config.bin %> init',
    '<%= config.bin %> init --yes',
    '<%= config.bin %> init --yes --database-url postgres://agentws@db.internal/agentws --public-url https://agents.example.com --owner-email alice@example.com',
    '<%= config.bin %> init --yes --entra-tenant-id 00000000-0000-0000-0000-000000000000 --oidc-client-id <app-id> --no-demo',
  ];
  static override flags = {
    yes: Flags.boolean({ char: 'y', summary: 'Never prompt: use flags and defaults.' }),
    force: Flags.boolean({ summary: 'Rewrite an existing config (keeps its secrets; data is never touched).' }),
    'data-dir': Flags.string({ summary: 'Data directory (embedded database, workspaces).', default: './data' }),
    'database-url': Flags.string({ summary: 'PostgreSQL URL; omit for the embedded database.' }),
    host: Flags.string({ summary: 'Listen address.', default: '127.0.0.1' }),
    port: Flags.integer({ summary: 'Listen port.', default: 8080, min: 0, max: 65535 }),
    'public-url': Flags.string({ summary: 'URL users reach the service at (default: http://localhost:<port>).' }),
    'oidc-issuer-url': Flags.string({ summary: 'OpenID Connect issuer URL (not needed for Entra ID).' }),
    'entra-tenant-id': Flags.string({ summary: 'Microsoft Entra ID directory (tenant) id.' }),
    'oidc-client-id': Flags.string({ summary: 'OAuth client id at the identity provider.' }),
    'oidc-client-secret': Flags.string({ summary: 'OAuth client secret (prefer the AGENTWS_OIDC_CLIENT_SECRET environment variable: flags land in shell history).' }),
    demo: Flags.boolean({ summary: 'Local demo mode: requests without a token act as the operator (default: on when no identity provider is set and --host is loopback; refused otherwise).', allowNo: true }),
    'tenant-name': Flags.string({ summary: 'Name of the first tenant.', default: 'Default' }),
    'tenant-slug': Flags.string({ summary: 'Slug of the first tenant (default: from the name).' }),
    'owner-email': Flags.string({ summary: 'Email of the operator user, the first tenant\'s owner.', default: 'operator@agentws.local' }),
    'owner-handle': Flags.string({ summary: 'Handle of the operator user (default: the email\'s local part).' }),
    'show-secrets': Flags.boolean({ summary: 'Print the generated secrets (API key etc.) once.' }),
  };
  protected static override needsConfig = false;
  protected static override needsCore = false;

  async run(): Promise<void> {
    const f = this.flags;
    const { path } = resolveConfigPath({ configPath: f.config });
    const existing = existsSync(path);
    if (existing && !f.force) {
      throw new ConflictError(`a config already exists at ${path}`, {
        hint: 'Nothing was changed. Use --force to rewrite it (secrets and data are kept), or run `npx aws migrate` / `npx aws tenant seed` to repeat just those steps.',
      });
    }
    if (f['oidc-client-secret']) {
      process.stderr.write(colors.err.yellow('Warning: --oidc-client-secret lands in shell history; prefer AGENTWS_OIDC_CLIENT_SECRET in the environment.\n'));
    }
    const interactive = !f.yes && !f.json && Boolean(process.stdin.isTTY && process.stderr.isTTY);
    const answers = interactive ? await this.ask() : this.fromFlags();

    const old = existing ? readConfigFile(path) : {};
    const secrets = Object.fromEntries(
      SECRET_VARS.map((name) => [name, old[name] || randomSecret(32)]),
    ) as Record<(typeof SECRET_VARS)[number], string>;

    const values: Record<string, string> = {
      CREATED_AT: new Date().toISOString(),
      AGENTWS_DATA_DIR: answers.dataDir,
      DATABASE_URL: answers.databaseUrl,
      AGENTWS_HOST: answers.host,
      AGENTWS_PORT: String(answers.port),
      AGENTWS_PUBLIC_URL: answers.publicUrl,
      AGENTWS_OIDC_ISSUER_URL: answers.issuerUrl,
      AGENTWS_ENTRA_TENANT_ID: answers.entraTenantId,
      AGENTWS_OIDC_CLIENT_ID: answers.clientId,
      AGENTWS_OIDC_CLIENT_SECRET: answers.clientSecret,
      AGENTWS_ALLOW_ANONYMOUS: String(answers.demo),
      AGENTWS_OPERATOR_EMAIL: answers.ownerEmail,
      // The operator is looked up in this tenant only (another tenant may have a user with that email).
      AGENTWS_OPERATOR_TENANT: (answers.tenantSlug?.trim() || slugify(answers.tenantName)).toLowerCase(),
      ...secrets,
    };
    for (const [k, v] of Object.entries(values)) {
      if (/[\r\n]/.test(v)) throw new ValidationError(`${k} must be a single line`);
    }
    const template = readFileSync(join(packageRoot(), 'templates', 'config.env.tmpl'), 'utf8');
    const text = template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => quote(values[key] ?? ''));

    if (answers.demo) {
      const problems = demoModeProblems({ host: answers.host, identityProvider: Boolean((answers.issuerUrl || answers.entraTenantId) && answers.clientId) });
      if (problems.length) {
        throw new ValidationError(problems.map((p) => p.message).join('\n'), {
          hint: 'Leave out --demo (or pass --no-demo); keep --host 127.0.0.1 for a demo on this machine. Nothing was written.',
        });
      }
    }
    // Validate before writing anything: a bad flag must not leave a broken config behind.
    const { CREATED_AT: _, ...fileValues } = values;
    parseConfigValues({ fileValues, configFile: path, env: {}, cwd: dirname(path) });

    let config!: Config;
    let opened: OpenedCore | undefined;
    let seeded!: SeedTenantResult;
    const applied: string[] = [];
    try {
      await runTasks(
        [
          {
            title: `write ${path}`,
            task: () => {
              mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
              writeFileSync(path, text, { mode: 0o600 });
              chmodSync(path, 0o600);
              config = loadConfig({ configPath: path, env: {} });
              mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
            },
          },
          {
            title: 'open the database',
            task: async (_, task) => {
              if (config.database.mode === 'embedded') task.title = 'open the embedded database (the first start takes a few seconds)';
              opened = await openCore(config, this.log_);
            },
          },
          {
            title: 'apply migrations',
            task: async () => {
              applied.push(...(await opened!.core.migrator.up()));
            },
          },
          {
            title: `create tenant "${answers.tenantName}" and owner ${answers.ownerEmail}`,
            task: async () => {
              seeded = await opened!.core.tenants.seedTenant(this.ctx(), {
                name: answers.tenantName,
                slug: answers.tenantSlug,
                ownerEmail: answers.ownerEmail,
                ownerHandle: answers.ownerHandle,
              });
            },
          },
        ],
        { quiet: this.jsonMode },
      );
    } finally {
      await opened?.close();
    }

    const doc = {
      configFile: path,
      dataDir: config.dataDir,
      database: config.database.mode,
      publicUrl: config.server.publicUrl,
      demoMode: config.auth.allowAnonymous,
      migrationsApplied: applied,
      tenant: { id: seeded.tenant.id, slug: seeded.tenant.slug, name: seeded.tenant.name, created: seeded.created.tenant },
      operator: { id: seeded.owner.id, email: seeded.owner.email, handle: seeded.owner.handle },
      ...(f['show-secrets'] ? { secrets } : {}),
    };
    if (this.jsonMode) return printJson(doc);
    info('');
    info(colors.err.green(`Ready. Config: ${path}  Data: ${config.dataDir}  Database: ${config.database.mode}`));
    if (f['show-secrets']) info(`Service API key (AGENTWS_API_KEY): ${secrets.AGENTWS_API_KEY}`);
    info('Next:');
    info(`  npx aws serve${f.config ? ` --config ${f.config}` : ''}            # then open ${config.server.publicUrl}/v1/auth/status`);
    if (config.database.mode === 'postgres') info('  npx aws worker                  # one or more, for background jobs');
    if (!config.auth.oidc.issuerUrl) info('  set AGENTWS_ENTRA_TENANT_ID (or AGENTWS_OIDC_ISSUER_URL) and AGENTWS_OIDC_CLIENT_ID for sign-in');
  }

  private fromFlags() {
    const f = this.flags;
    const idp = Boolean(f['oidc-issuer-url'] || f['entra-tenant-id']);
    return {
      dataDir: f['data-dir'],
      databaseUrl: f['database-url'] ?? '',
      host: f.host,
      port: f.port,
      publicUrl: f['public-url'] ?? `http://localhost:${f.port}`,
      issuerUrl: f['oidc-issuer-url'] ?? '',
      entraTenantId: f['entra-tenant-id'] ?? '',
      clientId: f['oidc-client-id'] ?? '',
      clientSecret: f['oidc-client-secret'] ?? process.env.AGENTWS_OIDC_CLIENT_SECRET ?? '',
      // Demo mode by default only where it may run: no identity provider, and a loopback address.
      demo: f.demo ?? (!idp && isLoopback(f.host)),
      tenantName: f['tenant-name'],
      tenantSlug: f['tenant-slug'],
      ownerEmail: f['owner-email'],
      ownerHandle: f['owner-handle'],
    };
  }

  /** Interactive questions, each defaulting to the flag's value so flags still pre-fill the answers. */
  private async ask() {
    const { input, select, confirm, password } = await import('@inquirer/prompts');
    const d = this.fromFlags();
    const dataDir = await input({ message: 'Data directory', default: d.dataDir });
    const db = await select({
      message: 'Database',
      default: d.databaseUrl ? 'postgres' : 'embedded',
      choices: [
        { name: 'Embedded (PGlite in the data directory; one host, zero set-up)', value: 'embedded' },
        { name: 'PostgreSQL 15+ with pgvector (production; several serve/worker processes)', value: 'postgres' },
      ],
    });
    const databaseUrl =
      db === 'postgres'
        ? await input({ message: 'PostgreSQL URL', default: d.databaseUrl || 'postgres://agentws@127.0.0.1:5432/agentws', validate: (v) => /^postgres(ql)?:\/\//.test(v) || 'a postgres:// URL' })
        : '';
    const publicUrl = await input({ message: 'Public URL', default: d.publicUrl, validate: (v) => isUrl(v) || 'an absolute http(s) URL' });
    const entraTenantId = await input({ message: 'Microsoft Entra ID tenant id (empty to skip)', default: d.entraTenantId });
    const issuerUrl = entraTenantId ? '' : await input({ message: 'Other OpenID Connect issuer URL (empty to skip)', default: d.issuerUrl });
    const hasIdp = Boolean(entraTenantId || issuerUrl);
    const clientId = hasIdp ? await input({ message: 'OAuth client id', default: d.clientId }) : d.clientId;
    const clientSecret = hasIdp ? await password({ message: 'OAuth client secret (empty for PKCE-only public client)', mask: '*' }) : d.clientSecret;
    const demo = await confirm({ message: 'Enable local demo mode (no sign-in needed; for trying it out on this machine)?', default: !hasIdp && isLoopback(d.host) });
    const tenantName = await input({ message: 'First tenant name', default: d.tenantName });
    const ownerEmail = await input({ message: 'Operator (first owner) email', default: d.ownerEmail });
    return { ...d, dataDir, databaseUrl, publicUrl, entraTenantId, issuerUrl, clientId, clientSecret, demo, tenantName, ownerEmail };
  }
}

function isUrl(v: string): boolean {
  try {
    return ['http:', 'https:'].includes(new URL(v).protocol);
  } catch {
    return false;
  }
}

/** Values are written double-quoted when they hold anything a shell or env-file parser could misread. */
function quote(v: string): string {
  return /^[A-Za-z0-9_./:@%+,=-]*$/.test(v) ? v : `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}
