import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';

export default class TeamList extends BaseCommand<typeof TeamList> {
  static override summary = 'List the teams of a tenant with their members.';
  static override examples = ['<%= config.bin %> team list', '<%= config.bin %> team list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const teams = await core.teams.list(await this.tenantCtx(this.flags.tenant));
    this.output({ teams }, () => {
      if (!teams.length) return info('No teams yet: create one with `npx aws team create <name>`.');
      const rows = teams.map((t) => ({ name: t.name, members: t.members.map((m) => m.handle).join(',') || '-', id: t.id, created: t.createdAt }));
      process.stdout.write(table(rows, ['name', 'members', 'id', 'created']) + '\n');
    });
  }
}
