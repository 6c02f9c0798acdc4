import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { colors, info } from '../../../src/cli/output.js';
import { DEFAULT_MAX_CAPACITY } from '../../../src/core/runners/runner-fns.js';

export default class RunnerTokenCreate extends BaseCommand<typeof RunnerTokenCreate> {
  static override summary = 'Create a runner token: what a runner host (`aws runner`) dials the control plane with.';
  static override description = `Prints the token once (it is stored hashed and cannot be shown again). Put it in the runner host's AGENTWS_RUNNER_TOKEN_FILE. Each runner registered with the token is counted to hold at most --max-capacity runtimes (default ${DEFAULT_MAX_CAPACITY}), whatever it reports: a compromised runner cannot attract more placements than that. Audited as runner.token_created.`;
  static override examples = [
    '<%= config.bin %> runner token create runner-2',
    '<%= config.bin %> runner token create runner-2 --max-capacity 60',
    '<%= config.bin %> runner token create runner-2 --json | jq -r .token > runner-token',
  ];
  static override args = { name: Args.string({ description: 'A name for the token (lower-case letters, digits, dot, dash, underscore).', required: true }) };
  static override flags = {
    'max-capacity': Flags.integer({ summary: `The most runtimes each runner of this token is counted to hold, whatever it reports (default ${DEFAULT_MAX_CAPACITY}).`, min: 0, max: 100_000 }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const t = await core.runners.createToken(this.ctx(), { name: this.args.name, maxCapacity: this.flags['max-capacity'] });
    this.output(t, () => {
      process.stdout.write(`${t.token}\n`);
      info(`runner token "${t.name}" created (${t.id}; each of its runners counted up to ${t.maxCapacity} runtimes). ${colors.err.bold('It is not shown again')}: store it on the runner host now (AGENTWS_RUNNER_TOKEN_FILE).`);
    });
  }
}
