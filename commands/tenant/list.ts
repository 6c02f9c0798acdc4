import { BaseCommand } from '../../src/cli/base-command.js';
import { table } from '../../src/cli/output.js';

export default class TenantList extends BaseCommand<typeof TenantList> {
  static override summary = 'List tenants with their user counts.';
  static override examples = ['<%= config.bin %> tenant list', '<%= config.bin %> tenant list --json'];

  async run(): Promise<void> {
    const core = await this.core();
    const tenants = await core.tenants.listTenants(this.ctx());
    const rows = tenants.map((t) => ({ id: t.id, slug: t.slug, name: t.name, users: t.userCount, createdAt: t.createdAt.toISOString() }));
    this.output({ tenants: rows }, () => process.stdout.write(table(rows, ['slug', 'name', 'users', 'id', 'createdAt']) + '\n'));
  }
}
