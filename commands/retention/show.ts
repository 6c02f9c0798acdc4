import { BaseCommand } from '../../src/cli/base-command.js';
import { table } from '../../src/cli/output.js';
import { describePeriod, RETENTION_KINDS } from '../../src/core/retention/retention-fns.js';

export default class RetentionShow extends BaseCommand<typeof RetentionShow> {
  static override summary = 'Show how long a tenant keeps sessions, usage records, trajectories and the audit log.';
  static override description =
    'Periods are in days, measured from a session\'s last activity and from the record\'s time for the others; "kept forever" is the default. The audit log\'s period cannot be set under the appliance\'s floor (AGENTWS_AUDIT_RETENTION_FLOOR_DAYS). --json prints `{ "retention": {...}, "auditFloorDays": n }` as GET /v1/admin/retention answers.';
  static override examples = ['<%= config.bin %> retention show', '<%= config.bin %> retention show --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const v = await core.retention.show(await this.tenantCtx(this.flags.tenant));
    this.output({ retention: v.periods, auditFloorDays: v.auditFloorDays }, () => {
      const rows = RETENTION_KINDS.map((k) => ({ kind: k, kept: describePeriod(v.periods[k]) + (k === 'audit' ? ` (floor ${v.auditFloorDays} days)` : '') }));
      process.stdout.write(table(rows, ['kind', 'kept']) + '\n');
    });
  }
}
