import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';
import { RETENTION_KINDS } from '../../src/core/retention/retention-fns.js';

export default class RetentionRun extends BaseCommand<typeof RetentionRun> {
  static override summary = 'Enforce a tenant\'s retention periods now and print what was removed.';
  static override description =
    'What the daily retention job does for every tenant, for one: sessions inactive for longer than their period are removed (rows, transcripts and the runtime\'s own session store; one with a turn running is kept), then usage records, trajectories and audit entries older than theirs, in bounded batches, each batch audited as retention.run with its counts. Removing a session from its runtime starts the runtime: run it where `aws serve` runs. --dry-run only counts what would go. --json prints the counts per kind.';
  static override examples = ['<%= config.bin %> retention run --tenant acme --dry-run', '<%= config.bin %> retention run --tenant acme --json'];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'dry-run': Flags.boolean({ summary: 'Count what would be removed; remove nothing.', default: false }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.retention.run(await this.tenantCtx(this.flags.tenant), { dryRun: this.flags['dry-run'] });
    this.output(r, () => {
      const rows = RETENTION_KINDS.map((k) => ({ kind: k, [r.dryRun ? 'would remove' : 'removed']: r.removed[k], before: r.cutoffs[k]?.toISOString() ?? 'kept forever' }));
      process.stdout.write(table(rows, ['kind', r.dryRun ? 'would remove' : 'removed', 'before']) + '\n');
      if (r.sessionsLeft) info(`${r.sessionsLeft} old session(s) left for the next run (a turn running, or their runtime could not be reached)`);
    });
  }
}
