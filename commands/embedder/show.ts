import { BaseCommand } from '../../src/cli/base-command.js';

export default class EmbedderShow extends BaseCommand<typeof EmbedderShow> {
  static override summary = 'Show the embedder and how many memories have a vector of its model.';
  static override examples = ['<%= config.bin %> embedder show', '<%= config.bin %> embedder show --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.embedders.get(await this.tenantCtx(this.flags.tenant));
    this.output(r, () => {
      const e = r.embedder;
      if (!e) {
        process.stdout.write('no embedder: memory search runs on full text alone (set one: npx aws embedder set --provider <name> --model <model>)\n');
        return;
      }
      const rows: Array<[string, string]> = [
        ['provider', e.provider],
        ['model', e.model],
        ['dimensions', String(e.dimensions)],
        ['model key', e.modelKey],
        ['updated', `${e.updatedAt instanceof Date ? e.updatedAt.toISOString() : e.updatedAt} by ${e.updatedBy}`],
        ['memories', `${r.memories?.embedded ?? 0} embedded, ${r.memories?.pending ?? 0} pending${r.memories?.pending ? ' (npx aws memory backfill)' : ''}`],
      ];
      process.stdout.write(rows.map(([k, v]) => `${k.padEnd(11)} ${v}`).join('\n') + '\n');
    });
  }
}
