import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { colors, info, table } from '../src/cli/output.js';
import { runTasks } from '../src/cli/progress.js';

export default class Migrate extends BaseCommand<typeof Migrate> {
  static override summary = 'Apply database migrations (or show their status, or revert the last one).';
  static override description =
    'Applies pending migrations from the migrations/ folder in order. Safe to run again and from two processes at once: runs are serialised and each migration is applied exactly once. Works while `aws serve` runs, on both database modes.';
  static override examples = [
    '<%= config.bin %> migrate',
    '<%= config.bin %> migrate --status',
    '<%= config.bin %> migrate --status --json',
    '<%= config.bin %> migrate --down   # development only: revert the most recent migration',
  ];
  static override flags = {
    status: Flags.boolean({ summary: 'Only list migrations and whether each is applied.', exclusive: ['down'] }),
    down: Flags.boolean({ summary: 'Revert the most recent migration (development only).', exclusive: ['status'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const { migrator } = core;

    if (this.flags.status) {
      const status = await migrator.status();
      const pending = status.filter((m) => !m.appliedAt).length;
      this.output({ migrations: status.map((m) => ({ name: m.name, appliedAt: m.appliedAt?.toISOString() ?? null })), pending }, () => {
        process.stdout.write(table(status.map((m) => ({ migration: m.name, applied: m.appliedAt ? m.appliedAt.toISOString() : 'pending' })), ['migration', 'applied']) + '\n');
        info(pending ? colors.err.yellow(`${pending} pending: run \`npx aws migrate\``) : colors.err.green('database schema is current'));
      });
      return;
    }

    if (this.flags.down) {
      const reverted = await migrator.down();
      this.output({ reverted }, () => info(reverted ? `reverted ${reverted}` : 'nothing to revert'));
      return;
    }

    await migrator.checkPrerequisites();
    const pending = await migrator.pending();
    const applied: string[] = [];
    await migrator.withLock(() =>
      runTasks(
        pending.length
          ? pending.map((name) => ({
              title: `apply ${name}`,
              task: async () => {
                await migrator.applyOne(name);
                applied.push(name);
              },
            }))
          : [{ title: 'database schema is current', task: async () => {} }],
        { quiet: this.jsonMode },
      ),
    );
    this.output({ applied, pending: await migrator.pending() }, () =>
      info(applied.length ? `applied ${applied.length} migration${applied.length === 1 ? '' : 's'}` : 'nothing to apply'),
    );
  }
}
