import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';

export default class GatewayList extends BaseCommand<typeof GatewayList> {
  static override summary = 'List the chat gateways of a tenant (never their tokens or webhook secrets).';
  static override description = 'Columns: id, kind, bot username, registered webhook URL (empty until `aws webhook register`), enabled, created.';
  static override examples = ['<%= config.bin %> gateway list', '<%= config.bin %> gateway list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const gateways = await core.gateways.list(await this.tenantCtx(this.flags.tenant));
    this.output({ gateways }, () => {
      if (!gateways.length) return info('No gateways yet: create one with `npx aws gateway create`.');
      const rows = gateways.map((g) => ({ id: g.id, kind: g.kind, bot: `@${g.botUsername}`, webhook: g.webhookUrl || '-', enabled: g.enabled ? 'yes' : 'no', created: g.createdAt }));
      process.stdout.write(table(rows, ['id', 'kind', 'bot', 'webhook', 'enabled', 'created']) + '\n');
    });
  }
}
