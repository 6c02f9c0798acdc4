import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class UserRemove extends BaseCommand<typeof UserRemove> {
  static override summary = 'Remove a user with their roles, sign-ins and sessions; their tokens stop working at once.';
  static override description =
    'The user is named by email, handle or id. In a terminal it asks for confirmation first (--yes skips the question); without a terminal, or with --json, it never asks. The operator user, a gateway\'s service user and the tenant\'s last owner cannot be removed.';
  static override examples = ['<%= config.bin %> user remove alice@acme.example', '<%= config.bin %> user remove bob --tenant acme --yes --json'];
  static override args = { user: Args.string({ description: 'Email, handle or id of the user', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    await this.confirmOrExit(`Remove ${user.email} (${user.handle}) with their sessions?`, { yes: this.flags.yes });
    const removed = await core.users.removeUser(ctx, { userId: user.id });
    this.output({ removed }, () => info(`removed ${removed.email}; their tokens no longer work`));
  }
}
