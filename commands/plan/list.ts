import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, info, table } from '../../src/cli/output.js';
import { PLAN_STATUSES } from '../../src/core/orchestrator/plan-fns.js';

export default class PlanList extends BaseCommand<typeof PlanList> {
  static override summary = 'List orchestration plans, newest first, with their subtasks counted.';
  static override description =
    'Without --tenant, the plans of every tenant. Columns: id, status, subtasks completed of all, subtasks failed, created, the task (shortened; `aws plan show <id>` prints it whole). --json prints `{ "plans": [...] }` as GET /v1/orchestrate/plans answers it (every plan with its tenantId and its subtasks counted by status).';
  static override examples = [
    '<%= config.bin %> plan list',
    '<%= config.bin %> plan list --status executing',
    '<%= config.bin %> plan list --tenant acme --limit 100 --json',
  ];
  static override flags = {
    tenant: Flags.string({ summary: 'Tenant slug or id (default: every tenant).' }),
    status: Flags.string({ summary: 'Only plans in this status.', options: [...PLAN_STATUSES] }),
    limit: Flags.integer({ char: 'n', summary: 'How many of the newest plans (1-100).', default: 20, min: 1, max: 100 }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = this.flags.tenant ? await this.tenantCtx(this.flags.tenant) : this.ctx();
    const { plans } = await core.orchestrator.list(ctx, { status: this.flags.status, limit: this.flags.limit });
    this.output({ plans }, () => {
      if (!plans.length) return info(`No plans${this.flags.status ? ` in status ${this.flags.status}` : ''}.`);
      const rows = plans.map((p) => ({
        id: p.id,
        status: p.status,
        subtasks: `${p.subtasks.completed}/${p.subtasks.total}`,
        failed: p.subtasks.failed,
        created: p.createdAt,
        task: clip(p.taskDescription, 60),
      }));
      process.stdout.write(table(rows, ['id', 'status', 'subtasks', 'failed', 'created', 'task']) + '\n');
    });
  }
}
