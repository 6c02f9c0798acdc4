import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import RoleAssign from './assign.js';

export default class RoleRevoke extends BaseCommand<typeof RoleRevoke> {
  static override summary = 'Take a role from a user (the tenant\'s last owner keeps the owner role).';
  static override examples = ['<%= config.bin %> role revoke alice@acme.example admin', '<%= config.bin %> role revoke alice admin --tenant acme --json'];
  static override args = RoleAssign.args;
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const r = await core.rbac.revokeRole(ctx, { userId: user.id, roleName: this.args.role });
    this.output({ user: { id: user.id, email: user.email, handle: user.handle }, role: r.role, changed: true, roles: r.roles }, () =>
      info(`revoked role ${r.role.name} from ${user.email}; roles now: ${r.roles.join(', ') || '(none)'}`),
    );
  }
}
