import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { ago, gatewayFlag, resolveGateway, who } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';
import { canPrompt } from '../../src/cli/secret-input.js';
import { ValidationError } from '../../src/kernel/errors.js';

export default class PairApprove extends BaseCommand<typeof PairApprove> {
  static override summary = 'Approve a pending pairing code: its chat user is paired and can talk to the agent.';
  static override description =
    'With a code, approves it; the gateway is found from the code within the tenant (or name it with --gateway). Without a code, in a terminal, shows the pending codes (who, which gateway, how long ago) and approves the one chosen; without a terminal a code is required. The chat user is told they are paired. Unknown, expired or already used codes fail with exit 1; many failed approvals on one gateway block approvals for a few minutes.';
  static override examples = [
    { description: 'Pick from the pending codes (in a terminal):', command: '<%= config.bin %> pair approve' },
    { description: 'Approve a code someone read out (case, spaces and dashes do not matter):', command: '<%= config.bin %> pair approve K7QM-X2PA' },
    { description: 'In a script:', command: '<%= config.bin %> pair approve K7QMX2PA --gateway acme_bot --tenant acme --json' },
  ];
  static override args = { code: Args.string({ description: 'The pairing code the chat user received (default: choose one in a terminal)' }) };
  static override flags = { tenant: BaseCommand.tenantFlag, gateway: gatewayFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const gatewayId = this.flags.gateway ? (await resolveGateway(core, ctx, this.flags.gateway)).id : undefined;
    let code = this.args.code;
    if (code === undefined) {
      if (!canPrompt()) {
        throw new ValidationError('no pairing code given, and there is no terminal to choose one in', {
          hint: 'List them with `npx aws pair list`, then run `npx aws pair approve <code>`.',
        });
      }
      const pending = (await core.pairing.listAllCodes(ctx)).filter((c) => !gatewayId || c.gatewayId === gatewayId);
      if (!pending.length) {
        this.output({ ok: false, pending: 0 }, () => info('No pending pairing codes.'));
        return;
      }
      const { select } = await import('@inquirer/prompts');
      const now = Date.now();
      code = await select(
        {
          message: 'Approve which pairing code?',
          choices: pending.map((c) => ({ value: c.code, name: `${c.code}  ${who(c)} via @${c.botUsername} (${c.gatewayKind})  ${ago(c.createdAt, now)}` })),
          pageSize: 10,
        },
        { output: process.stderr },
      ).catch((err: Error) => {
        if (err.name === 'ExitPromptError') throw new ValidationError('cancelled: nothing was approved');
        throw err;
      });
    }
    const r = await core.pairing.approve(ctx, { gatewayId, code });
    this.output({ ok: r.ok, gatewayId: r.gatewayId, user: r.user }, () => info(`paired ${who(r.user)} with gateway ${r.gatewayId}; they have been told they can talk to the agent`));
  }
}
