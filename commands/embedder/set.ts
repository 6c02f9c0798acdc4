import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class EmbedderSet extends BaseCommand<typeof EmbedderSet> {
  static override summary = 'Set the embeddings model memories are embedded with (probes it once).';
  static override description =
    'The provider must be an enabled openai or openai-compatible provider of the tenant (OpenAI, Azure OpenAI, Ollama, text-embeddings-inference, vLLM: anything serving POST <baseUrl>/embeddings). The model is asked to embed a test text once, which tells its dimensions (--dimensions checks them). Changing the model queues a backfill that re-embeds every memory; the first embedder does not: run `aws memory backfill` for memories written before it.';
  static override examples = [
    '<%= config.bin %> embedder set --provider openai --model text-embedding-3-small',
    '<%= config.bin %> embedder set --provider ollama --model nomic-embed-text --dimensions 768 --tenant acme --json',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    provider: Flags.string({ summary: 'Name of the provider serving the model.', required: true }),
    model: Flags.string({ summary: 'Embeddings model id, as the provider names it.', required: true }),
    dimensions: Flags.integer({ summary: 'Expected vector length (checked against the model\'s answer).', min: 1 }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const r = await core.embedders.set(ctx, { provider: this.flags.provider, model: this.flags.model, dimensions: this.flags.dimensions });
    this.output(r, () => {
      info(`embedder: ${r.embedder.model} on ${r.embedder.provider} (${r.embedder.dimensions} dimensions)${r.changed ? '' : ', unchanged'}`);
      if (r.backfill) info(`the model changed: job ${r.backfill.id} re-embeds ${r.pending} memories (GET /v1/jobs/${r.backfill.id})`);
      else if (r.pending) info(`${r.pending} memories lack a vector of this model: npx aws memory backfill --limit ${r.pending}`);
    });
  }
}
