import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class RoleAssign extends BaseCommand<typeof RoleAssign> {
  static override summary = 'Give a user a role (idempotent). The user sees it at their next sign-in.';
  static override description = 'Tokens carry the roles of their sign-in and refresh keeps them, so a role change takes effect at the user\'s next full sign-in.';
  static override examples = ['<%= config.bin %> role assign alice@acme.example admin', '<%= config.bin %> role assign alice auditor --tenant acme --json'];
  static override args = {
    user: Args.string({ description: 'User email, handle or id', required: true }),
    role: Args.string({ description: 'Role name', required: true }),
  };
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const r = await core.rbac.assignRole(ctx, { userId: user.id, roleName: this.args.role });
    this.output({ user: { id: user.id, email: user.email, handle: user.handle }, role: r.role, changed: r.assigned, roles: r.roles }, () =>
      info(`${r.assigned ? 'assigned' : 'already had'} role ${r.role.name} to ${user.email}; roles now: ${r.roles.join(', ')}`),
    );
  }
}
