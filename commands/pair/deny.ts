import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { gatewayFlag, resolveGateway } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class PairDeny extends BaseCommand<typeof PairDeny> {
  static override summary = 'Deny a pending pairing code: it is dropped and nobody is paired.';
  static override description =
    'The gateway is found from the code within the tenant, or named with --gateway. The chat user cannot ask for a new code for ten minutes. Unknown or expired codes fail with exit 1.';
  static override examples = ['<%= config.bin %> pair deny K7QMX2PA', '<%= config.bin %> pair deny K7QMX2PA --gateway acme_bot --tenant acme --json'];
  static override args = { code: Args.string({ description: 'The pending pairing code', required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag, gateway: gatewayFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const gatewayId = this.flags.gateway ? (await resolveGateway(core, ctx, this.flags.gateway)).id : undefined;
    await core.pairing.deny(ctx, { gatewayId, code: this.args.code });
    this.output({ ok: true, denied: this.args.code }, () => info(`denied pairing code ${this.args.code}; nobody was paired`));
  }
}
