import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';

export default class TokenList extends BaseCommand<typeof TokenList> {
  static override summary = "List a tenant's personal access tokens (never their values), or one user's.";
  static override examples = ['<%= config.bin %> token list', '<%= config.bin %> token list --tenant acme --user alice@acme.example --json'];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    user: Flags.string({ summary: 'Only the tokens of this user (email, handle or id).' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const userId = this.flags.user ? (await core.users.findUser(ctx, this.flags.user)).id : undefined;
    const tokens = await core.personalTokens.list(ctx, { userId });
    const now = core.clock.now();
    this.output({ tokens }, () => {
      if (!tokens.length) return info('No personal access tokens.');
      const rows = tokens.map((t) => ({
        id: t.id,
        user: t.userHandle,
        name: t.name,
        prefix: t.prefix,
        scopes: t.scopes.join(','),
        status: t.revokedAt ? 'revoked' : t.expiresAt <= now ? 'expired' : 'active',
        expires: t.expiresAt.toISOString(),
        'last used': t.lastUsedAt?.toISOString() ?? '-',
      }));
      process.stdout.write(table(rows, ['id', 'user', 'name', 'prefix', 'scopes', 'status', 'expires', 'last used']) + '\n');
    });
  }
}
