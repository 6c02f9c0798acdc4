import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { GATEWAY_ARG_TEXT, resolveBotToken, resolveGateway, tokenFlags } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class GatewayRotateToken extends BaseCommand<typeof GatewayRotateToken> {
  static override summary = 'Replace the bot token of a gateway (stored sealed).';
  static override description =
    'Same rules as `gateway create`: pipe the new token in with --bot-token-stdin, or answer the masked prompt in a terminal; --bot-token works but warns. Without a terminal and without a token it fails (exit 1). The webhook registration and its secret stay as they are.';
  static override examples = [
    { description: 'Pipe the new token in:', command: '$ printf %s "$NEW_BOT_TOKEN" | <%= config.bin %> gateway rotate-token acme_bot --bot-token-stdin' },
    { description: 'In a terminal: asks for it (masked):', command: '<%= config.bin %> gateway rotate-token acme_bot --tenant acme' },
  ];
  static override args = { gateway: Args.string({ description: GATEWAY_ARG_TEXT, required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag, ...tokenFlags };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const g = await resolveGateway(core, ctx, this.args.gateway);
    const botToken = await resolveBotToken(this.flags, `New bot token for @${g.botUsername} (${g.kind})`, `gateway rotate-token ${this.args.gateway}`);
    const gateway = await core.gateways.update(ctx, g.id, { botToken });
    this.output({ gateway, rotated: true }, () => info(`rotated the bot token of gateway ${gateway.id} (${gateway.kind} @${gateway.botUsername}); stored sealed`));
  }
}
