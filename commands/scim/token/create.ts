import { Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { colors, info } from '../../../src/cli/output.js';
import { ValidationError } from '../../../src/kernel/errors.js';
import { parseDuration } from '../../../src/lib/duration.js';

export default class ScimTokenCreate extends BaseCommand<typeof ScimTokenCreate> {
  static override summary = "Create, rotate or renew a tenant's SCIM token: what its identity provider (Entra ID, Okta) provisions users and groups with.";
  static override description =
    "Prints the token once (it is stored hashed and cannot be shown again). A tenant may hold several tokens by name (one per identity provider); creating one with an existing name replaces it (a rotation, and the way to renew one before it expires), and the old one stops working at once. Every token expires: --expires-in (default 180d), at most the tenant's settings.tokens.scimMaxDays (default 365 days). Put it in the identity provider as the secret token, with the tenant URL <public URL>/scim/v2. Owners mint SCIM tokens (the API refuses admins and personal access tokens); the CLI acts as the operator. Audited as scim.token_create (or scim.token_rotate) with the expiry and who minted it.";
  static override examples = [
    '<%= config.bin %> scim token create --tenant acme',
    '<%= config.bin %> scim token create --tenant acme --name okta --expires-in 90d --json | jq -r .token',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    name: Flags.string({ summary: 'Name of the token (lower-case letters, digits, dot, dash, underscore).', default: 'default' }),
    'expires-in': Flags.string({ summary: "Lifetime, e.g. 90d, 26w (default 180d; at most the tenant's tokens.scimMaxDays)." }),
  };

  async run(): Promise<void> {
    const given = this.flags['expires-in'];
    const ms = given === undefined ? undefined : parseDuration(given);
    if (ms === null) throw new ValidationError(`--expires-in: "${given}" is not a duration`, { hint: 'Use a number and a unit: 90d, 26w, 12h.', details: { field: 'expires-in' } });
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const t = await core.scim.createToken(ctx, { name: this.flags.name, expiresInDays: ms === undefined ? undefined : ms / 86_400_000 });
    this.output(t, () => {
      process.stdout.write(`${t.token}\n`);
      info(
        `SCIM token "${t.name}" ${t.replaced ? 'rotated (the previous one no longer works)' : 'created'}, expires ${t.expiresAt.toISOString()}. ${colors.err.bold('It is not shown again')}: enter it in the identity provider now, with the tenant URL ${core.config.server.publicUrl}/scim/v2.`,
      );
    });
  }
}
