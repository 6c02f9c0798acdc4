import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TokenRevoke extends BaseCommand<typeof TokenRevoke> {
  static override summary = 'Revoke a personal access token: it stops working at once, in every process.';
  static override description = 'In a terminal it asks for confirmation first (--yes skips the question); without a terminal, or with --json, it never asks. Revoking a revoked token is no error.';
  static override examples = ['<%= config.bin %> token revoke 0b6a…', '<%= config.bin %> token revoke 0b6a… --tenant acme --yes --json'];
  static override args = { id: Args.string({ description: 'Id of the token (`aws token list`)', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const found = (await core.personalTokens.list(ctx)).find((t) => t.id === this.args.id);
    if (found) await this.confirmOrExit(`Revoke token "${found.name}" (${found.prefix}…) of ${found.userEmail}?`, { yes: this.flags.yes, declined: 'Nothing was revoked.' });
    const token = await core.personalTokens.revoke(ctx, { id: this.args.id });
    this.output({ token }, () => info(`revoked token ${token.id} ("${token.name}" of ${token.userEmail}); it no longer works`));
  }
}
