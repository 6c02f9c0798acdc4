import { BaseCommand } from '../../../src/cli/base-command.js';
import { info, table } from '../../../src/cli/output.js';

export default class RunnerTokenList extends BaseCommand<typeof RunnerTokenList> {
  static override summary = 'List runner tokens (never the tokens themselves): name, the ceiling on each runner\'s capacity, created, last used, revoked, the runners using each.';
  static override examples = ['<%= config.bin %> runner token list', '<%= config.bin %> runner token list --json'];

  async run(): Promise<void> {
    const core = await this.core();
    const tokens = await core.runners.listTokens(this.ctx());
    this.output({ tokens }, () => {
      if (!tokens.length) return info('No runner tokens yet: create one with `npx aws runner token create <name>`.');
      const rows = tokens.map((t) => ({
        id: t.id,
        name: t.name,
        'max capacity': String(t.maxCapacity),
        created: t.createdAt.toISOString(),
        'last used': t.lastUsedAt?.toISOString() ?? 'never',
        revoked: t.revokedAt?.toISOString() ?? '-',
        runners: t.runners.join(',') || '-',
      }));
      process.stdout.write(table(rows, ['id', 'name', 'max capacity', 'created', 'last used', 'revoked', 'runners']) + '\n');
    });
  }
}
