import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { ago, duration, GATEWAY_ARG_TEXT, resolveGateway, who } from '../../src/cli/gateway-input.js';
import { info, table } from '../../src/cli/output.js';

export default class PairList extends BaseCommand<typeof PairList> {
  static override summary = 'List pending pairing codes (unexpired, not yet approved or denied).';
  static override description =
    'Without a gateway, the codes of every gateway of the tenant. Columns: code, gateway bot, chat user (name and id), age, time left before it expires. Approve one with `aws pair approve <code>`, or run `aws pair approve` in a terminal to pick one.';
  static override examples = ['<%= config.bin %> pair list', '<%= config.bin %> pair list acme_bot', '<%= config.bin %> pair list --tenant acme --json'];
  static override args = { gateway: Args.string({ description: `${GATEWAY_ARG_TEXT} (default: every gateway)` }) };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    let codes;
    if (this.args.gateway) {
      const g = await resolveGateway(core, ctx, this.args.gateway);
      // The same shape as the all-gateways listing.
      codes = (await core.pairing.listCodes(ctx, g.id)).map((c) => ({ ...c, gatewayKind: g.kind, botUsername: g.botUsername }));
    } else {
      codes = await core.pairing.listAllCodes(ctx);
    }
    this.output({ codes }, () => {
      if (!codes.length) return info('No pending pairing codes.');
      const now = Date.now();
      const rows = codes.map((c) => ({
        code: c.code,
        gateway: `@${c.botUsername} (${c.gatewayKind})`,
        user: who(c),
        age: ago(c.createdAt, now),
        expires: `in ${duration(new Date(c.expiresAt).getTime() - now)}`,
      }));
      process.stdout.write(table(rows, ['code', 'gateway', 'user', 'age', 'expires']) + '\n');
    });
  }
}
