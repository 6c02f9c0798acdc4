import { BaseCommand } from '../../src/cli/base-command.js';
import { table } from '../../src/cli/output.js';

export default class UserList extends BaseCommand<typeof UserList> {
  static override summary = 'List the users of a tenant with their roles.';
  static override examples = ['<%= config.bin %> user list', '<%= config.bin %> user list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const users = await core.users.listUsers(await this.tenantCtx(this.flags.tenant));
    this.output({ users }, () =>
      process.stdout.write(table(users.map((u) => ({ email: u.email, handle: u.handle, name: u.displayName, roles: u.roles.join(','), id: u.id })), ['email', 'handle', 'name', 'roles', 'id']) + '\n'),
    );
  }
}
