import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { colors, info } from '../../../src/cli/output.js';

export default class RunnerTokenCreate extends BaseCommand<typeof RunnerTokenCreate> {
  static override summary = 'Create a runner token: what a runner host (`aws runner`) dials the control plane with.';
  static override description = 'Prints the token once (it is stored hashed and cannot be shown again). Put it in the runner host\'s AGENTWS_RUNNER_TOKEN_FILE. Audited as runner.token_created.';
  static override examples = ['<%= config.bin %> runner token create runner-2', '<%= config.bin %> runner token create runner-2 --json | jq -r .token > runner-token'];
  static override args = { name: Args.string({ description: 'A name for the token (lower-case letters, digits, dot, dash, underscore).', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const t = await core.runners.createToken(this.ctx(), { name: this.args.name });
    this.output(t, () => {
      process.stdout.write(`${t.token}\n`);
      info(`runner token "${t.name}" created (${t.id}). ${colors.err.bold('It is not shown again')}: store it on the runner host now (AGENTWS_RUNNER_TOKEN_FILE).`);
    });
  }
}
