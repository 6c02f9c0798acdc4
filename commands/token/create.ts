import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { TOKEN_SCOPES } from '../../src/core/tokens/token-fns.js';
import { parseDuration } from '../../src/lib/duration.js';

export default class TokenCreate extends BaseCommand<typeof TokenCreate> {
  static override summary = "Create a personal access token for a user (printed once: it is stored only as a hash).";
  static override description =
    "The token acts as the user with their roles at each call, narrowed to its scopes (read: GET/HEAD only; sessions; memories; admin). The user must hold each scope now, and the lifetime may not exceed the tenant's maximum (settings.tokens.maxDays, default 90 days). Audited as token.create by system:cli.";
  static override examples = [
    '<%= config.bin %> token create --user alice@acme.example --name nightly-report --scopes read --expires-in 30d',
    '<%= config.bin %> token create --tenant acme --user bob --name ci --scopes read,sessions --expires-in 90d --json',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    user: Flags.string({ summary: 'Email, handle or id of the user the token acts as.', required: true }),
    name: Flags.string({ summary: 'A name to recognise the token by.', required: true }),
    scopes: Flags.string({ summary: `Comma-separated scopes: ${TOKEN_SCOPES.join(', ')}.`, required: true }),
    'expires-in': Flags.string({ summary: 'Lifetime, e.g. 12h, 30d, 4w (at most the tenant maximum).', default: '30d' }),
  };

  async run(): Promise<void> {
    const ms = parseDuration(this.flags['expires-in']);
    if (!ms) throw new ValidationError(`--expires-in: "${this.flags['expires-in']}" is not a duration`, { hint: 'Use a number and a unit: 12h, 30d, 4w.' });
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.flags.user);
    const scopes = this.flags.scopes.split(',').map((s) => s.trim()).filter(Boolean);
    const made = await core.personalTokens.create(ctx, { userId: user.id, name: this.flags.name, scopes, expiresInDays: ms / 86_400_000 });
    this.output({ token: made.token, value: made.value }, () => {
      info(`created token ${made.token.id} (${made.token.scopes.join(',')}) for ${user.email}, expires ${made.token.expiresAt.toISOString()}; it is shown only now:`);
      process.stdout.write(`${made.value}\n`);
    });
  }
}
