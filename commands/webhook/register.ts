import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { GATEWAY_ARG_TEXT, resolveGateway } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class WebhookRegister extends BaseCommand<typeof WebhookRegister> {
  static override summary = 'Register a gateway\'s webhook URL with its chat platform (with a fresh secret).';
  static override description =
    'The URL must be https and every address its host resolves to must be public (no loopback or private ranges). The platform is called to set the webhook with a new random secret, which is stored sealed and never printed; registering again replaces it. When the platform cannot be reached nothing changes and the command fails (exit 1). The URL is normally <AGENTWS_PUBLIC_URL>/v1/gateways/<id>/webhook.';
  static override examples = [
    '<%= config.bin %> webhook register acme_bot https://agents.acme.example/v1/gateways/0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11/webhook',
    '<%= config.bin %> webhook register 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 https://agents.acme.example/v1/gateways/0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11/webhook --tenant acme --json',
  ];
  static override args = {
    gateway: Args.string({ description: GATEWAY_ARG_TEXT, required: true }),
    url: Args.string({ description: 'The public https URL the platform should deliver updates to', required: true }),
  };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const { id } = await resolveGateway(core, ctx, this.args.gateway);
    const gateway = await core.gateways.registerWebhook(ctx, id, { webhookUrl: this.args.url });
    this.output({ gateway }, () => {
      info(`registered the webhook of gateway ${gateway.id} (${gateway.kind} @${gateway.botUsername}) with the platform:`);
      process.stdout.write(`${gateway.webhookUrl}\n`);
    });
  }
}
