import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { table } from '../../src/cli/output.js';
import { CONFIG_VARS } from '../../src/config/config.schema.js';
import { readConfigFile } from '../../src/config/load-config.js';
import { maskSecret } from '../../src/lib/secrets.js';

export default class ConfigShow extends BaseCommand<typeof ConfigShow> {
  static override summary = 'Print the effective configuration, secrets masked.';
  static override description =
    'Shows every variable with its effective value and where it came from (environment, config file or default). Secrets are masked unless --show-secrets is given.';
  static override examples = ['<%= config.bin %> config show', '<%= config.bin %> config show --json', '<%= config.bin %> config show --show-secrets'];
  static override flags = {
    'show-secrets': Flags.boolean({ summary: 'Print secrets in full (careful: terminals and logs keep them).' }),
  };
  protected static override needsCore = false;

  async run(): Promise<void> {
    // The config already loaded and validated in init(); here we only explain where each value came from.
    const file = this.appConfig.configFile ? readConfigFile(this.appConfig.configFile) : {};
    const rows = CONFIG_VARS.map((spec) => {
      const fromEnv = process.env[spec.name];
      const source = fromEnv !== undefined ? 'env' : file[spec.name] !== undefined ? 'file' : 'default';
      const raw = fromEnv ?? file[spec.name] ?? ('default' in spec ? spec.default : '') ?? '';
      const value = spec.kind === 'secret' && !this.flags['show-secrets'] ? maskSecret(raw) : spec.name === 'DATABASE_URL' && !this.flags['show-secrets'] ? maskUrl(raw) : raw;
      return { variable: spec.name, value, source };
    });
    this.output(
      {
        configFile: this.appConfig.configFile,
        databaseMode: this.appConfig.database.mode,
        dataDir: this.appConfig.dataDir,
        variables: Object.fromEntries(rows.map((r) => [r.variable, { value: r.value, source: r.source }])),
      },
      () => {
        process.stdout.write(`# config file: ${this.appConfig.configFile ?? '(none: environment only)'}\n`);
        process.stdout.write(`# database: ${this.appConfig.database.mode}, data dir: ${this.appConfig.dataDir}\n`);
        process.stdout.write(table(rows, ['variable', 'value', 'source']) + '\n');
      },
    );
  }
}

function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '****';
    return u.toString();
  } catch {
    return url;
  }
}
