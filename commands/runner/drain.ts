import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class RunnerDrain extends BaseCommand<typeof RunnerDrain> {
  static override summary = 'Drain a runner: no new placements; its idle users move to other runners (with local storage their workspace and runtime home are copied); running turns finish first.';
  static override description = 'Audited as runner.drain. Watch `aws runner list` until it shows 0 resident, then stop the host. `aws runner resume` ends a drain.';
  static override examples = ['<%= config.bin %> runner drain runner-2'];
  static override args = { name: Args.string({ description: 'The runner\'s name (see `aws runner list`).', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runners.drain(this.ctx(), this.args.name);
    this.output(r, () => info(`runner "${r.name}" is draining: ${r.users} user${r.users === 1 ? "" : "s"} to move; watch \`npx aws runner list\``));
  }
}
