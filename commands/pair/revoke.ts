import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { GATEWAY_ARG_TEXT, resolveGateway } from '../../src/cli/gateway-input.js';
import { info } from '../../src/cli/output.js';

export default class PairRevoke extends BaseCommand<typeof PairRevoke> {
  static override summary = 'Unpair a chat user from a gateway: their next message starts pairing again.';
  static override description = 'The user is named by their id on the chat platform (the ID column of `aws pair list`, or the audit log of the approval). Their agent session stays. Not paired: exit 1.';
  static override examples = ['<%= config.bin %> pair revoke acme_bot 42', '<%= config.bin %> pair revoke 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 29:1a2b3c --tenant acme --json'];
  static override args = {
    gateway: Args.string({ description: GATEWAY_ARG_TEXT, required: true }),
    externalUserId: Args.string({ description: 'The chat user\'s id on the platform', required: true }),
  };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const g = await resolveGateway(core, ctx, this.args.gateway);
    await core.pairing.revoke(ctx, { gatewayId: g.id, externalUserId: this.args.externalUserId });
    this.output({ ok: true, revoked: { gatewayId: g.id, externalUserId: this.args.externalUserId } }, () =>
      info(`unpaired ${this.args.externalUserId} from gateway ${g.id} (@${g.botUsername}); their next message starts pairing again`),
    );
  }
}
