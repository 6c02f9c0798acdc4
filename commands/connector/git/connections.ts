import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info, table } from '../../../src/cli/output.js';

export default class ConnectorGitConnections extends BaseCommand<typeof ConnectorGitConnections> {
  static override summary = 'List who has connected their own account to a git host (never their tokens).';
  static override description = 'Columns: handle, email, the account at the host, since when, and when its access token expires (refreshed before then when the host gave a refresh token). End one with `connector git disconnect`.';
  static override examples = ['<%= config.bin %> connector git connections github', '<%= config.bin %> connector git connections github --tenant acme --json'];
  static override args = { host: Args.string({ description: 'Git host name', required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const connections = await core.gitConnections.listForHost(await this.tenantCtx(this.flags.tenant), this.args.host);
    this.output({ connections }, () => {
      if (!connections.length) return info(`Nobody has connected their account to ${this.args.host} yet (the dashboard's Connections screen does it).`);
      const rows = connections.map((c) => ({ handle: c.handle, email: c.email, account: c.account ?? '', since: c.connectedAt.toISOString(), expires: c.expiresAt?.toISOString() ?? '' }));
      process.stdout.write(table(rows, ['handle', 'email', 'account', 'since', 'expires']) + '\n');
    });
  }
}
