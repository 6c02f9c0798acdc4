import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class ScimTokenRevoke extends BaseCommand<typeof ScimTokenRevoke> {
  static override summary = "Revoke a tenant's SCIM token (by name, or all of them): its identity provider is refused at once.";
  static override description = 'Users and teams the identity provider made stay as they are. Audited as scim.token_revoke.';
  static override examples = ['<%= config.bin %> scim token revoke --tenant acme', '<%= config.bin %> scim token revoke --tenant acme --name okta'];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    name: Flags.string({ summary: 'Name of the token to revoke.', exclusive: ['all'] }),
    all: Flags.boolean({ summary: "Revoke all of the tenant's SCIM tokens (the default without --name)." }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const r = await core.scim.revokeToken(ctx, { name: this.flags.name ?? null });
    this.output(r, () => info(`revoked SCIM token${r.revoked.length > 1 ? 's' : ''} ${r.revoked.map((n) => `"${n}"`).join(', ')}`));
  }
}
