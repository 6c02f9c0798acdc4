import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class ConnectorMcpRemove extends BaseCommand<typeof ConnectorMcpRemove> {
  static override summary = 'Remove an MCP server and its stored token.';
  static override description =
    'In a terminal it asks for confirmation first (--yes skips the question); without a terminal, or with --json, it never asks. The gateway refuses the server at once; running agents drop it at their next turn.';
  static override examples = ['<%= config.bin %> connector mcp remove tracker', '<%= config.bin %> connector mcp remove tracker --tenant acme --yes --json'];
  static override args = { name: Args.string({ description: 'Server name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const name = this.args.name;
    await this.confirmOrExit(`Remove MCP server ${name} and its token?`, { yes: this.flags.yes });
    await core.mcpServers.remove(ctx, name);
    this.output({ removed: name }, () => info(`removed MCP server ${name}`));
  }
}
