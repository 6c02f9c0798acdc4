import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { resolveBotToken, tokenFlags } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';
import { GATEWAY_KINDS } from '../../src/core/gateways/platforms.js';

export default class GatewayCreate extends BaseCommand<typeof GatewayCreate> {
  static override summary = 'Create a chat gateway (bot_chat or team_chat); its bot token is stored sealed.';
  static override description =
    'The token never has to appear on the command line: pipe it in with --bot-token-stdin, or run in a terminal and answer the masked prompt. --bot-token also works but warns that the token may be recorded in shell history. Without a terminal and without a token it fails (exit 1). The gateway is enabled at once; chat users can reach it after `aws webhook register`.';
  static override examples = [
    { description: 'Pipe the token in (it never lands in shell history):', command: '$ printf %s "$BOT_TOKEN" | <%= config.bin %> gateway create --kind bot_chat --bot-username acme_bot --bot-id 123456 --bot-token-stdin' },
    { description: 'In a terminal: asks for the token (masked):', command: '<%= config.bin %> gateway create --kind team_chat --bot-username "Acme Agent" --bot-id 28:acme-bot --tenant acme' },
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    kind: Flags.string({ summary: 'The chat platform.', options: [...GATEWAY_KINDS], required: true }),
    'bot-username': Flags.string({ summary: 'The bot\'s user name on the platform (without @).', required: true }),
    'bot-id': Flags.string({ summary: 'The bot\'s id on the platform.', required: true }),
    ...tokenFlags,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const botUsername = f['bot-username'].replace(/^@/, '');
    const botToken = await resolveBotToken(f, `Bot token for @${botUsername} (${f.kind})`, `gateway create --kind ${f.kind} --bot-username ${botUsername} --bot-id ${f['bot-id']}`);
    const gateway = await core.gateways.create(ctx, { kind: f.kind, botToken, botUsername, botId: f['bot-id'] });
    this.output({ gateway }, () => {
      info(`created gateway ${gateway.id} (${gateway.kind} @${gateway.botUsername}); bot token stored sealed`);
      const base = this.appConfig.server.publicUrl.startsWith('https://') ? this.appConfig.server.publicUrl.replace(/\/+$/, '') : 'https://<public host>';
      info(`Next: npx aws webhook register ${gateway.id} ${base}/v1/gateways/${gateway.id}/webhook`);
    });
  }
}
