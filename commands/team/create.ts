import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TeamCreate extends BaseCommand<typeof TeamCreate> {
  static override summary = 'Create a team in a tenant (for `team` visibility of memories).';
  static override description = 'Team names are unique in the tenant, ignoring case. Add members with `aws team add`.';
  static override examples = ['<%= config.bin %> team create platform', '<%= config.bin %> team create "Data science" --tenant acme --json'];
  static override args = { name: Args.string({ description: 'Team name (at most 100 characters)', required: true }) };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const team = await core.teams.create(await this.tenantCtx(this.flags.tenant), { name: this.args.name });
    this.output({ team }, () => info(`created team "${team.name}" (${team.id}); add members with \`npx aws team add "${team.name}" <user>\``));
  }
}
