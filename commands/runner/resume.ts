import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class RunnerResume extends BaseCommand<typeof RunnerResume> {
  static override summary = 'End a drain: the runner takes placements again.';
  static override description = 'Audited as runner.resume.';
  static override examples = ['<%= config.bin %> runner resume runner-2'];
  static override args = { name: Args.string({ description: 'The runner\'s name (see `aws runner list`).', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runners.resume(this.ctx(), this.args.name);
    this.output(r, () => info(`runner "${r.name}" takes placements again`));
  }
}
