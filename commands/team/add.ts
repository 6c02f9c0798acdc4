import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TeamAdd extends BaseCommand<typeof TeamAdd> {
  static override summary = 'Add a user to a team (idempotent).';
  static override description = "The user then sees the `team` memories of the team's other members (with memory.read_team), and they see theirs.";
  static override examples = ['<%= config.bin %> team add platform alice@acme.example', '<%= config.bin %> team add platform alice --tenant acme --json'];
  static override args = {
    team: Args.string({ description: 'Team name or id', required: true }),
    user: Args.string({ description: 'User email, handle or id', required: true }),
  };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const { team, added } = await core.teams.addMember(ctx, this.args.team, { userId: user.id });
    const members = team.members.map((m) => m.handle).join(', ');
    this.output({ team, added }, () => info(added ? `added ${user.email} to "${team.name}"; members: ${members}` : `${user.email} is already in "${team.name}"; nothing changed`));
  }
}
