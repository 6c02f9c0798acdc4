import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class ConnectorGitDisconnect extends BaseCommand<typeof ConnectorGitDisconnect> {
  static override summary = "End a person's connection of their own account to a git host.";
  static override description =
    "Their sealed tokens are deleted: their agents reach the host with the service credential again, or not at all when the host requires per-user connections. The grant stays at the host until revoked there. In a terminal it asks for confirmation first (--yes skips the question).";
  static override examples = ['<%= config.bin %> connector git disconnect github --user alice@acme.example', '<%= config.bin %> connector git disconnect github --user alice --tenant acme --yes --json'];
  static override args = { host: Args.string({ description: 'Git host name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    user: Flags.string({ summary: 'Whose connection: email, handle or id.', required: true }),
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.flags.user);
    await this.confirmOrExit(`Disconnect ${user.email}'s account from ${this.args.host}?`, { yes: this.flags.yes });
    await core.gitConnections.remove(ctx, this.args.host, user.id);
    this.output({ disconnected: { host: this.args.host, userId: user.id } }, () => info(`disconnected ${user.email} from ${this.args.host}`));
  }
}
