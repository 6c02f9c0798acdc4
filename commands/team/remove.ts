import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TeamRemove extends BaseCommand<typeof TeamRemove> {
  static override summary = 'Remove a user from a team.';
  static override description = 'Fails (exit 1) when the user is not in the team. Their memories stay; teammates stop seeing their `team` memories unless they share another team.';
  static override examples = ['<%= config.bin %> team remove platform alice@acme.example', '<%= config.bin %> team remove platform alice --tenant acme --json'];
  static override args = {
    team: Args.string({ description: 'Team name or id', required: true }),
    user: Args.string({ description: 'User email, handle or id', required: true }),
  };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const team = await core.teams.removeMember(ctx, this.args.team, { userId: user.id });
    this.output({ team, removed: user.id }, () => info(`removed ${user.email} from "${team.name}"`));
  }
}
