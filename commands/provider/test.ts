import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class ProviderTest extends BaseCommand<typeof ProviderTest> {
  static override summary = 'Test a model provider with one tiny call (its stored key), and say what the provider answered.';
  static override description =
    'The same call as POST /v1/admin/providers/:name/test and the dashboard\'s Test button: a one-word question to the model (--model, else the provider\'s first), at most 16 tokens back, at most 15 s, whether the provider is enabled or applied or not. Prints the latency, or the provider\'s own status and message; exits 1 when the provider refused or could not be reached. The key is never printed. Audited as provider.test.';
  static override examples = ['<%= config.bin %> provider test openai', '<%= config.bin %> provider test local --model llama3.1:8b --tenant acme --json'];
  static override args = { name: Args.string({ description: 'Provider name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    model: Flags.string({ summary: 'One of the provider\'s model ids (default: its first).' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const r = await core.providers.test(ctx, this.args.name, { model: this.flags.model });
    this.output(r, () =>
      info(
        r.ok
          ? `ok: ${r.provider}/${r.model} answered in ${r.latencyMs} ms${r.reply ? ` ("${r.reply}")` : ''}`
          : `failed: ${r.provider}/${r.model} ${r.status === null ? 'could not be reached' : `answered ${r.status}`} after ${r.latencyMs} ms: ${r.message}`,
      ),
    );
    if (!r.ok) this.exit(1);
  }
}
