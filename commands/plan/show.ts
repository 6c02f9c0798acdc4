import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, table } from '../../src/cli/output.js';

const usd = (n: number | null | undefined) => (n === null || n === undefined ? '-' : `$${n.toFixed(6)}`);
const iso = (d: Date | string | undefined) => (d === undefined ? '-' : new Date(d).toISOString());

export default class PlanShow extends BaseCommand<typeof PlanShow> {
  static override summary = 'Show an orchestration plan and its subtasks.';
  static override description =
    'The plan is named by its id alone, whatever its tenant. Prints the plan (status, task, owner, parent session, cost, budget, why it failed or stopped), then a table of its subtasks (index, status, dependencies, attempts, cost, the result or the error, shortened). --json prints `{ plan, subtasks }` as GET /v1/orchestrate/<planId> answers it (whole results, every attempt with its child session). An unknown id fails with exit 1.';
  static override examples = ['<%= config.bin %> plan show 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11', '<%= config.bin %> plan show 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 --json'];
  static override args = { planId: Args.string({ description: 'Plan id (from `aws plan list`)', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const detail = await core.orchestrator.get(this.ctx(), this.args.planId);
    this.output(detail, () => {
      const { plan, subtasks } = detail;
      const rows: Array<[string, string]> = [
        ['id', plan.id],
        ['tenant', plan.tenantId],
        ['status', plan.status],
        ['task', plan.taskDescription],
        ['owner', plan.userId],
        ['parent session', plan.parentSessionId],
        ['created', iso(plan.createdAt)],
        ['finished', iso(plan.finishedAt)],
        ['cost', usd(plan.costUsd)],
        ['budget', plan.budgetUsd === null ? 'no limit' : usd(plan.budgetUsd)],
        ...(plan.error ? [['error', plan.error] as [string, string]] : []),
        ...(plan.stopReason ? [['stopped', plan.stopReason] as [string, string]] : []),
      ];
      const out = rows.map(([k, v]) => `${k.padEnd(15)} ${v}`);
      if (!subtasks.length) out.push('', plan.status === 'planning' ? 'No subtasks yet: the plan is being made.' : 'No subtasks.');
      else {
        const cells = subtasks.map((s) => ({
          index: s.index,
          status: s.status,
          deps: s.dependencies?.join(',') || '-',
          attempts: s.attempt,
          cost: usd(s.costUsd),
          subtask: clip(s.description, 40),
          outcome: clip(s.result ?? (s.error ? `error: ${s.error}` : ''), 60) || '-',
        }));
        out.push('', table(cells, ['index', 'status', 'deps', 'attempts', 'cost', 'subtask', 'outcome']));
      }
      process.stdout.write(out.join('\n') + '\n');
    });
  }
}
