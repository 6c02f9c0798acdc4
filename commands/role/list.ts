import { BaseCommand } from '../../src/cli/base-command.js';
import { table } from '../../src/cli/output.js';

export default class RoleList extends BaseCommand<typeof RoleList> {
  static override summary = 'List the roles of a tenant with their members and permission documents.';
  static override examples = ['<%= config.bin %> role list', '<%= config.bin %> role list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const roles = await core.rbac.listRoles(await this.tenantCtx(this.flags.tenant));
    this.output({ roles }, () =>
      process.stdout.write(table(roles.map((r) => ({ name: r.name, system: r.isSystem ? 'yes' : 'no', members: r.members, description: r.description, id: r.id })), ['name', 'system', 'members', 'description', 'id']) + '\n'),
    );
  }
}
