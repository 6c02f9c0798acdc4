import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class RunnerRemove extends BaseCommand<typeof RunnerRemove> {
  static override summary = 'Forget a lost or offline runner and its placements (its users are placed elsewhere at their next turn).';
  static override description = 'Refused for a connected runner: drain it and stop it first. Audited as runner.removed.';
  static override examples = ['<%= config.bin %> runner remove runner-2'];
  static override args = { name: Args.string({ description: 'The runner\'s name (see `aws runner list`).', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runners.remove(this.ctx(), this.args.name);
    this.output(r, () => info(`forgot runner "${r.name}" (${r.users} user${r.users === 1 ? "" : "s"} will be placed elsewhere)`));
  }
}
