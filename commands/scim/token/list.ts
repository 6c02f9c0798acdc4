import { BaseCommand } from '../../../src/cli/base-command.js';

export default class ScimTokenList extends BaseCommand<typeof ScimTokenList> {
  static override summary = "List a tenant's SCIM tokens with when each was created and last used (never the tokens themselves).";
  static override examples = ['<%= config.bin %> scim token list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const tokens = await core.scim.listTokens(await this.tenantCtx(this.flags.tenant));
    this.output({ tokens }, () => {
      if (!tokens.length) return void process.stdout.write('no SCIM tokens\n');
      for (const t of tokens) process.stdout.write(`${t.name}\tcreated ${t.createdAt.toISOString()} by ${t.createdBy}\tlast used ${t.lastUsedAt?.toISOString() ?? 'never'}\n`);
    });
  }
}
