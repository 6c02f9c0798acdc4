import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class ConnectorGitRemove extends BaseCommand<typeof ConnectorGitRemove> {
  static override summary = 'Remove a git host and its sealed token.';
  static override description = 'In a terminal it asks for confirmation first (--yes skips the question). Agents\' requests to it are refused at once; runtimes drop it from their git config at their next configuration refresh.';
  static override examples = ['<%= config.bin %> connector git remove github', '<%= config.bin %> connector git remove github --tenant acme --yes --json'];
  static override args = { name: Args.string({ description: 'Git host name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const name = this.args.name;
    await this.confirmOrExit(`Remove git host ${name} and its token?`, { yes: this.flags.yes });
    await core.gitHosts.remove(ctx, name);
    this.output({ removed: name }, () => info(`removed git host ${name}`));
  }
}
