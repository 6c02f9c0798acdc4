import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info } from '../../../src/cli/output.js';

export default class RunnerTokenUpdate extends BaseCommand<typeof RunnerTokenUpdate> {
  static override summary = 'Change a runner token\'s ceiling: the most runtimes each of its runners is counted to hold.';
  static override description = 'Its runners are counted under the new ceiling at once (placements already made stay). Audited as runner.token_updated.';
  static override examples = ['<%= config.bin %> runner token update runner-2 --max-capacity 120'];
  static override args = { token: Args.string({ description: 'The token\'s id or name.', required: true }) };
  static override flags = {
    'max-capacity': Flags.integer({ summary: 'The most runtimes each runner of this token is counted to hold, whatever it reports.', min: 0, max: 100_000, required: true }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runners.setTokenCapacity(this.ctx(), this.args.token, this.flags['max-capacity']);
    this.output(r, () => info(`runner token "${r.name}": each of its runners is counted up to ${r.maxCapacity} runtimes (was ${r.previous})${r.runners.length ? `; runners: ${r.runners.join(', ')}` : ''}`));
  }
}
