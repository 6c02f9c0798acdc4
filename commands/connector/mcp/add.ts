import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { ALLOW_FLAG_TEXT, ALLOW_PROMPTS_FLAG_TEXT, ALLOW_RESOURCES_FLAG_TEXT, accessText, parseAllow, resolveConnectorSecret, secretFlags } from '../../../src/cli/mcp-input.js';
import { info } from '../../../src/cli/output.js';
import { MCP_AUTH_KINDS } from '../../../src/core/connectors/mcp-fns.js';
import type { McpServerInput } from '../../../src/core/connectors/mcp-servers.schemas.js';

export default class ConnectorMcpAdd extends BaseCommand<typeof ConnectorMcpAdd> {
  static override summary = 'Register a remote MCP server (Streamable HTTP) for the tenant\'s agents; its token is stored sealed.';
  static override description =
    'Agents reach the server through the gateway host, which adds the token: it never enters a sandbox. Only the roles given with --allow, --allow-resources or --allow-prompts see the server, and only the tools, resources and prompts listed for them (none of a kind unless given). The token comes piped in with --secret-stdin (in a terminal, asked for masked), or with --secret (warned: shell history). It goes in `Authorization: Bearer <token>` unless --auth header --header <name> says otherwise. Running agents take the server at their next turn.';
  static override examples = [
    { description: 'A server with a bearer token, every tool for members:', command: '$ printf %s "$TOKEN" | <%= config.bin %> connector mcp add tracker --url https://mcp.example.com/mcp --secret-stdin --allow member' },
    { description: 'Two tools for members, all for admins, the key in a header:', command: '$ printf %s "$KEY" | <%= config.bin %> connector mcp add wiki --url https://wiki.example.com/mcp --auth header --header x-api-key --secret-stdin --allow member=search,read_page --allow admin' },
    { description: 'Members read the handbook\'s pages and use one prompt; admins everything:', command: '$ printf %s "$KEY" | <%= config.bin %> connector mcp add wiki --url https://wiki.example.com/mcp --secret-stdin --allow member=search --allow-resources "member=wiki://handbook/*" --allow-prompts member=summarise --allow admin --allow-resources admin --allow-prompts admin' },
  ];
  static override args = { name: Args.string({ description: 'Server name: lower-case letters, digits and dashes; agents see its tools as <name>_<tool>', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    url: Flags.string({ summary: "The server's Streamable HTTP endpoint (http or https).", required: true }),
    auth: Flags.string({ summary: 'How the token is sent: bearer (default with a token), header (--header), none.', options: [...MCP_AUTH_KINDS] }),
    header: Flags.string({ summary: 'The header the token goes in (--auth header), e.g. x-api-key.' }),
    allow: Flags.string({ ...ALLOW_FLAG_TEXT, multiple: true }),
    'allow-resources': Flags.string({ ...ALLOW_RESOURCES_FLAG_TEXT, multiple: true }),
    'allow-prompts': Flags.string({ ...ALLOW_PROMPTS_FLAG_TEXT, multiple: true }),
    disabled: Flags.boolean({ summary: 'Register it switched off.' }),
    ...secretFlags,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const secret = await resolveConnectorSecret({ value: f.secret, stdin: f['secret-stdin'] }, `Token for ${this.args.name}`);
    const input: McpServerInput = {
      name: this.args.name,
      url: f.url,
      ...(f.auth ? { authKind: f.auth as McpServerInput['authKind'] } : {}),
      ...(f.header ? { authHeader: f.header } : {}),
      ...(secret ? { secret } : {}),
      access: parseAllow(f.allow ?? [], f['allow-resources'] ?? [], f['allow-prompts'] ?? []),
      enabled: !f.disabled,
    };
    const server = await core.mcpServers.create(ctx, input);
    this.output({ server }, () => {
      info(`added MCP server ${server.name} at ${server.url} (credential: ${server.hasSecret ? `${server.authKind}, stored sealed` : 'none'}; ${server.enabled ? 'enabled' : 'disabled'})`);
      info(`roles: ${accessText(server.access)}`);
      if (!server.access.length) info('No role may use it yet: give access with `npx aws connector mcp update ' + server.name + ' --allow <role>`.');
    });
  }
}
