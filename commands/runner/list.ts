import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';

export default class RunnerList extends BaseCommand<typeof RunnerList> {
  static override summary = 'List the runner hosts: state, capacity, resident runtimes, runtimes with a turn, users placed, last heartbeat, version.';
  static override description = 'States: active (takes placements), draining (its users are being moved; takes none), lost (missed its heartbeats: its users are placed elsewhere at their next turn), offline (its token revoked, or a serve that stopped). A serve that hosts runtimes itself is listed as a local runner.';
  static override examples = ['<%= config.bin %> runner list', '<%= config.bin %> runner list --json'];

  async run(): Promise<void> {
    const core = await this.core();
    const runners = await core.runners.list(this.ctx());
    this.output({ runners }, () => {
      if (!runners.length) return info('No runners: `aws serve` hosts every runtime itself. Add a runner host with `aws runner` (see docs/operating/runner-hosts.md).');
      const rows = runners.map((r) => ({
        name: r.name,
        kind: r.kind,
        state: r.state,
        // What placement counts; what the runner reports, when its token's ceiling caps it.
        capacity: r.reportedCapacity !== null && r.reportedCapacity > r.capacity ? `${r.capacity} (reports ${r.reportedCapacity})` : String(r.capacity),
        resident: String(r.resident),
        busy: String(r.busy),
        users: String(r.users),
        heartbeat: r.heartbeat,
        version: r.version ?? '-',
        labels: Object.entries(r.labels).map(([k, v]) => `${k}=${v}`).join(',') || '-',
      }));
      process.stdout.write(table(rows, ['name', 'kind', 'state', 'capacity', 'resident', 'busy', 'users', 'heartbeat', 'version', 'labels']) + '\n');
    });
  }
}
