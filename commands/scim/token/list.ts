import { BaseCommand } from '../../../src/cli/base-command.js';
import { info, table } from '../../../src/cli/output.js';

export default class ScimTokenList extends BaseCommand<typeof ScimTokenList> {
  static override summary = "List a tenant's SCIM tokens: who minted each and when, when it was last used, when it expires (never the tokens themselves).";
  static override description = 'An expired token is refused (401) until an owner renews it: `aws scim token create --name <its name>`.';
  static override examples = ['<%= config.bin %> scim token list --tenant acme', '<%= config.bin %> scim token list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const tokens = await core.scim.listTokens(await this.tenantCtx(this.flags.tenant));
    this.output({ tokens }, () => {
      if (!tokens.length) return info('No SCIM tokens.');
      const rows = tokens.map((t) => ({
        name: t.name,
        status: t.expired ? 'expired' : 'active',
        expires: t.expiresAt.toISOString(),
        'created by': t.createdBy,
        created: t.createdAt.toISOString(),
        'last used': t.lastUsedAt?.toISOString() ?? 'never',
      }));
      process.stdout.write(table(rows, ['name', 'status', 'expires', 'created by', 'created', 'last used']) + '\n');
    });
  }
}
