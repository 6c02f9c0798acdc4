import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { GATEWAY_ARG_TEXT, resolveGateway } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class GatewayDelete extends BaseCommand<typeof GatewayDelete> {
  static override summary = 'Delete a gateway with all its paired users and pending pairing codes.';
  static override description =
    'In a terminal it asks for confirmation first (--yes skips the question); without a terminal, or with --json, it never asks, like every other command. Chat users of the gateway lose access at once; their agent sessions stay.';
  static override examples = ['<%= config.bin %> gateway delete acme_bot', '<%= config.bin %> gateway delete 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 --tenant acme --yes --json'];
  static override args = { gateway: Args.string({ description: GATEWAY_ARG_TEXT, required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const g = await resolveGateway(core, ctx, this.args.gateway);
    await this.confirmOrExit(`Delete gateway @${g.botUsername} (${g.kind}, ${g.id})? Its paired users and pending pairing codes are removed too.`, { yes: this.flags.yes, declined: 'Nothing was deleted.' });
    await core.gateways.remove(ctx, g.id);
    this.output({ deleted: g.id }, () => info(`deleted gateway ${g.id} (${g.kind} @${g.botUsername}) with its paired users and pairing codes`));
  }
}
