import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { GATEWAY_ARG_TEXT, resolveGateway } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class GatewayEnable extends BaseCommand<typeof GatewayEnable> {
  static override summary = 'Switch a gateway on: its chat users are answered again.';
  static override description = 'Idempotent. Takes effect within a few seconds (the webhook route caches a gateway briefly).';
  static override examples = ['<%= config.bin %> gateway enable acme_bot', '<%= config.bin %> gateway enable 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 --tenant acme --json'];
  static override args = { gateway: Args.string({ description: GATEWAY_ARG_TEXT, required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const { id } = await resolveGateway(core, ctx, this.args.gateway);
    const gateway = await core.gateways.update(ctx, id, { enabled: true });
    this.output({ gateway }, () => info(`gateway ${gateway.id} (${gateway.kind} @${gateway.botUsername}) is now enabled`));
  }
}
