import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { colors, info } from '../../../src/cli/output.js';

export default class ScimTokenCreate extends BaseCommand<typeof ScimTokenCreate> {
  static override summary = "Create or rotate a tenant's SCIM token: what its identity provider (Entra ID, Okta) provisions users and groups with.";
  static override description =
    'Prints the token once (it is stored hashed and cannot be shown again). A tenant may hold several tokens by name (one per identity provider); creating one with an existing name replaces it, and the old one stops working at once. Put it in the identity provider as the secret token, with the tenant URL <public URL>/scim/v2. Audited as scim.token_create (or scim.token_rotate).';
  static override examples = [
    '<%= config.bin %> scim token create --tenant acme',
    '<%= config.bin %> scim token create --tenant acme --name okta --json | jq -r .token',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    name: Flags.string({ summary: 'Name of the token (lower-case letters, digits, dot, dash, underscore).', default: 'default' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const t = await core.scim.createToken(ctx, { name: this.flags.name });
    this.output(t, () => {
      process.stdout.write(`${t.token}\n`);
      info(`SCIM token "${t.name}" ${t.replaced ? 'rotated (the previous one no longer works)' : 'created'}. ${colors.err.bold('It is not shown again')}: enter it in the identity provider now, with the tenant URL ${core.config.server.publicUrl}/scim/v2.`);
    });
  }
}
