import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';

export default class ProviderList extends BaseCommand<typeof ProviderList> {
  static override summary = 'List the model providers of a tenant (API keys are never shown).';
  static override description =
    'One line per provider: name, kind, base URL, model ids, whether it is enabled and whether an API key is stored. --json prints the providers with their full model entries (limits and costs); the key itself is never returned by any command or API.';
  static override examples = ['<%= config.bin %> provider list', '<%= config.bin %> provider list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const providers = await core.providers.list(await this.tenantCtx(this.flags.tenant));
    this.output({ providers }, () => {
      if (!providers.length) return info('no providers yet: add one with `npx aws provider add`');
      const rows = providers.map((p) => ({
        name: p.name,
        kind: p.kind,
        baseUrl: p.baseUrl ?? '(default)',
        models: p.models.map((m) => m.id).join(','),
        enabled: p.enabled ? 'yes' : 'no',
        key: p.hasApiKey ? 'set' : 'none',
      }));
      process.stdout.write(table(rows, ['name', 'kind', 'baseUrl', 'models', 'enabled', 'key']) + '\n');
    });
  }
}
