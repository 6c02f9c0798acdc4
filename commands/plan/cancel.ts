import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class PlanCancel extends BaseCommand<typeof PlanCancel> {
  static override summary = 'Cancel an orchestration plan: running subtasks are stopped, pending ones never start.';
  static override description =
    'The plan is named by its id alone, whatever its tenant, and ends `failed` ("cancelled by the operator"); the cancel is audited as the operator (system:cli). A completed plan cannot be cancelled (exit 1); a plan that already failed is left as it is. --json prints `{ plan, subtasks }` as `aws plan show --json` does.';
  static override examples = ['<%= config.bin %> plan cancel 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11', '<%= config.bin %> plan cancel 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 --json'];
  static override args = { planId: Args.string({ description: 'Plan id (from `aws plan list`)', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const detail = await core.orchestrator.cancel(this.ctx(), this.args.planId);
    const { plan } = detail;
    this.output(detail, () => info(`plan ${plan.id} is ${plan.status}${plan.error ? `: ${plan.error}` : ''}`));
  }
}
