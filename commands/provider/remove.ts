import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class ProviderRemove extends BaseCommand<typeof ProviderRemove> {
  static override summary = 'Remove a model provider and its stored API key.';
  static override description =
    'In a terminal it asks for confirmation first (--yes skips the question); without a terminal, or with --json, it never asks, like every other command. If the provider served the default model, prompts fail closed (runtime not ready) until a new default is applied; the runtime drops the provider at the next `aws runtime apply`.';
  static override examples = ['<%= config.bin %> provider remove local', '<%= config.bin %> provider remove openai --tenant acme --yes --json'];
  static override args = { name: Args.string({ description: 'Provider name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const name = this.args.name;
    await this.confirmOrExit(`Remove provider ${name} and its API key?`, { yes: this.flags.yes });
    await core.providers.remove(ctx, name);
    this.output({ removed: name }, () => info(`removed provider ${name}; the runtime drops it at the next \`npx aws runtime apply\``));
  }
}
