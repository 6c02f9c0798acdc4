import { BaseCommand } from '../../../src/cli/base-command.js';
import { accessText } from '../../../src/cli/mcp-input.js';
import { info, table } from '../../../src/cli/output.js';

export default class ConnectorMcpList extends BaseCommand<typeof ConnectorMcpList> {
  static override summary = "List the tenant's MCP servers (tokens are never shown).";
  static override description = 'One line per server: name, URL, how its credential is sent, the roles that may use it (which tools, and which resources and prompts when any), whether it is enabled. --json prints the servers as the API returns them.';
  static override examples = ['<%= config.bin %> connector mcp list', '<%= config.bin %> connector mcp list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const servers = await core.mcpServers.list(await this.tenantCtx(this.flags.tenant));
    this.output({ servers }, () => {
      if (!servers.length) return info('no MCP servers yet: add one with `npx aws connector mcp add`');
      const rows = servers.map((s) => ({
        name: s.name,
        url: s.url,
        credential: s.hasSecret ? (s.authKind === 'header' ? `header ${s.authHeader}` : s.authKind) : 'none',
        roles: accessText(s.access),
        enabled: s.enabled ? 'yes' : 'no',
      }));
      process.stdout.write(table(rows, ['name', 'url', 'credential', 'roles', 'enabled']) + '\n');
    });
  }
}
