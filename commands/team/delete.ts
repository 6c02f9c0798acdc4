import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TeamDelete extends BaseCommand<typeof TeamDelete> {
  static override summary = 'Delete a team and its memberships.';
  static override description = 'The memories of its members stay; their `team` memories are then seen only by the members of their other teams.';
  static override examples = ['<%= config.bin %> team delete platform', '<%= config.bin %> team delete 0b6f6d1e-5c1a-4f5e-9a51-2f0b7d0c9e11 --tenant acme --json'];
  static override args = { team: Args.string({ description: 'Team name or id', required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const team = await core.teams.get(ctx, this.args.team);
    await core.teams.remove(ctx, team.id);
    this.output({ deleted: team.id }, () => info(`deleted team "${team.name}" (${team.id})`));
  }
}
