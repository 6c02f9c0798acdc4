import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { ALLOW_FLAG_TEXT, ALLOW_PROMPTS_FLAG_TEXT, ALLOW_RESOURCES_FLAG_TEXT, accessText, parseAllow, resolveConnectorSecret, secretFlags } from '../../../src/cli/mcp-input.js';
import { info } from '../../../src/cli/output.js';
import { MCP_AUTH_KINDS } from '../../../src/core/connectors/mcp-fns.js';
import type { McpServerPatch } from '../../../src/core/connectors/mcp-servers.schemas.js';
import { ValidationError } from '../../../src/kernel/errors.js';

export default class ConnectorMcpUpdate extends BaseCommand<typeof ConnectorMcpUpdate> {
  static override summary = 'Change an MCP server: its URL, token, who may use which tools, resources and prompts, enabled.';
  static override description =
    'Only what is given changes. --allow, --allow-resources and --allow-prompts together replace the whole access list (a role left out of one gets none of that kind; --no-access empties the list). A new token comes piped in with --secret-stdin (in a terminal, asked for masked) or with --secret; --no-secret drops it. A --url on another origin while a token is stored needs one of them: the stored token is never sent to a new host on its own.';
  static override examples = [
    { description: 'Rotate the token:', command: '$ printf %s "$NEW_TOKEN" | <%= config.bin %> connector mcp update tracker --secret-stdin' },
    '<%= config.bin %> connector mcp update tracker --allow member=search --allow admin',
    { description: 'Members keep their tool and may read one project\'s resources (the whole list is written again):', command: '$ <%= config.bin %> connector mcp update tracker --allow member=search --allow-resources "member=tracker://projects/acme/*"' },
    '<%= config.bin %> connector mcp update tracker --disable --json',
  ];
  static override args = { name: Args.string({ description: 'Server name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    url: Flags.string({ summary: 'New Streamable HTTP endpoint.' }),
    auth: Flags.string({ summary: 'How the token is sent: bearer, header (--header), none.', options: [...MCP_AUTH_KINDS] }),
    header: Flags.string({ summary: 'The header the token goes in (--auth header).' }),
    allow: Flags.string({ ...ALLOW_FLAG_TEXT, summary: `${ALLOW_FLAG_TEXT.summary} With the two below, replaces the access list.`, multiple: true, exclusive: ['no-access'] }),
    'allow-resources': Flags.string({ ...ALLOW_RESOURCES_FLAG_TEXT, multiple: true, exclusive: ['no-access'] }),
    'allow-prompts': Flags.string({ ...ALLOW_PROMPTS_FLAG_TEXT, multiple: true, exclusive: ['no-access'] }),
    'no-access': Flags.boolean({ summary: 'No role may use the server (the access list is emptied).', exclusive: ['allow', 'allow-resources', 'allow-prompts'] }),
    enable: Flags.boolean({ summary: 'Switch the server on.', exclusive: ['disable'] }),
    disable: Flags.boolean({ summary: 'Switch the server off (agents lose it at their next turn, the gateway at once).', exclusive: ['enable'] }),
    ...secretFlags,
    'no-secret': Flags.boolean({ summary: 'Drop the stored token.', exclusive: ['secret', 'secret-stdin'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const patch: McpServerPatch = {
      ...(f.url !== undefined ? { url: f.url } : {}),
      ...(f.auth ? { authKind: f.auth as McpServerPatch['authKind'] } : {}),
      ...(f.header ? { authHeader: f.header } : {}),
      ...(f.allow || f['allow-resources'] || f['allow-prompts'] ? { access: parseAllow(f.allow ?? [], f['allow-resources'] ?? [], f['allow-prompts'] ?? []) } : f['no-access'] ? { access: [] } : {}),
      ...(f.enable ? { enabled: true } : f.disable ? { enabled: false } : {}),
    };
    const secret = await resolveConnectorSecret({ value: f.secret, stdin: f['secret-stdin'] }, `New token for ${this.args.name}`);
    if (secret) patch.secret = secret;
    if (f['no-secret']) patch.secret = null;
    if (!Object.keys(patch).length) throw new ValidationError('nothing to change', { hint: 'Pass --url, --secret-stdin, --no-secret, --auth, --header, --allow, --allow-resources, --allow-prompts, --no-access, --enable or --disable.' });
    const server = await core.mcpServers.update(ctx, this.args.name, patch);
    const changed = Object.keys(patch).map((k) => (k === 'secret' ? (patch.secret === null ? 'secret (removed)' : 'secret (replaced)') : k));
    this.output({ server, changed }, () => {
      info(`updated MCP server ${server.name} (changed: ${changed.join(', ')})`);
      info(`url: ${server.url}; credential: ${server.hasSecret ? server.authKind : 'none'}; roles: ${accessText(server.access)}; ${server.enabled ? 'enabled' : 'disabled'}`);
    });
  }
}
