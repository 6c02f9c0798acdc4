import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class RunnerTokenRevoke extends BaseCommand<typeof RunnerTokenRevoke> {
  static override summary = 'Revoke a runner token: its runners are cut off now and refused when they dial again.';
  static override description = 'Audited as runner.token_revoked. The runners that used it go offline; their users are placed on other runners at their next turn.';
  static override examples = ['<%= config.bin %> runner token revoke runner-2'];
  static override args = { token: Args.string({ description: 'The token\'s id or name.', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runners.revokeToken(this.ctx(), this.args.token);
    this.output(r, () =>
      info(
        r.already
          ? `runner token "${r.name}" was already revoked`
          : `revoked runner token "${r.name}" (${r.id})${r.runners.length ? `; offline now: ${r.runners.join(', ')}` : ''}`,
      ),
    );
  }
}
