import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class EmbedderClear extends BaseCommand<typeof EmbedderClear> {
  static override summary = 'Clear the embedder: stored vectors stay, search answers on full text alone.';
  static override examples = ['<%= config.bin %> embedder clear', '<%= config.bin %> embedder clear --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.embedders.clear(await this.tenantCtx(this.flags.tenant));
    this.output(r, () => info(r.cleared ? 'embedder cleared; memory search runs on full text alone' : 'there was no embedder'));
  }
}
