import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { describePeriod, parsePeriod, RETENTION_KINDS, type RetentionKind } from '../../src/core/retention/retention-fns.js';

const period = (what: string) => Flags.string({ summary: `How long ${what} are kept: 90d, 12w, 2y, or keep (forever).` });

export default class RetentionSet extends BaseCommand<typeof RetentionSet> {
  static override summary = 'Set how long a tenant keeps sessions, usage records, trajectories and the audit log.';
  static override description =
    'Flags left out keep their value. Sessions count from their last activity and go with their transcripts (the runtime\'s own store too); the others count from their time. The daily retention job removes what is older (`aws retention run` does it now). An audit period under AGENTWS_AUDIT_RETENTION_FLOOR_DAYS is refused. Audited as retention.update.';
  static override examples = [
    '<%= config.bin %> retention set --sessions 90d --usage 400d --trajectories 30d --audit 730d',
    '<%= config.bin %> retention set --audit keep --tenant acme --json',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    sessions: period('sessions (by last activity, with their transcripts)'),
    usage: period('usage records'),
    trajectories: period('trajectories (what learned skills are learnt from)'),
    audit: period('audit log entries'),
  };

  async run(): Promise<void> {
    const change: Partial<Record<RetentionKind, number | null>> = {};
    for (const k of RETENTION_KINDS) {
      const v = this.flags[k];
      if (v !== undefined) change[k] = parsePeriod(v, `--${k}`);
    }
    if (!Object.keys(change).length) throw new ValidationError('nothing to set', { hint: 'Name at least one of --sessions, --usage, --trajectories, --audit.' });
    const core = await this.core();
    const v = await core.retention.set(await this.tenantCtx(this.flags.tenant), change);
    this.output({ retention: v.periods, auditFloorDays: v.auditFloorDays }, () => {
      for (const k of RETENTION_KINDS) info(`${k}: ${describePeriod(v.periods[k])}`);
    });
  }
}
