import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { colors, info } from '../../src/cli/output.js';

export default class RuntimeApply extends BaseCommand<typeof RuntimeApply> {
  static override summary = 'Apply the tenant\'s providers and default model to the agent runtime.';
  static override description =
    'Checks the default model against the tenant\'s providers, records every enabled provider and the default model as applied (from then on prompts can start), then writes them (with the keys) to the runtime configuration. When the runtime cannot take them now (no `aws serve` running the managed runtime, or an external runtime unreachable), the configuration stays recorded but is not pushed ("pushed": false, exit 0): `aws serve` writes it when it starts the runtime or reconnects to it. Without --default-model the one chosen before is kept.';
  static override examples = [
    '<%= config.bin %> runtime apply --default-model openai/gpt-4.1-mini',
    '<%= config.bin %> runtime apply',
    '<%= config.bin %> runtime apply --default-model local/llama3.1:8b --tenant acme --json',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'default-model': Flags.string({ summary: 'The model prompts run on unless a template overrides it: <provider>/<model id>.' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.runtime.apply(await this.tenantCtx(this.flags.tenant), { defaultModel: this.flags['default-model'] });
    this.output(r, () => {
      info(`applied default model ${r.applied.defaultModel}; providers: ${r.applied.providers.join(', ')}`);
      if (r.pushed) info(colors.err.green('pushed to the runtime: prompts can start.'));
      else {
        info(colors.err.yellow(`not pushed: the runtime is not running or not reachable (${r.runtimeError ?? 'unreachable'}).`));
        info('It is recorded: `npx aws serve` writes this configuration when it starts the runtime or reconnects to it.');
      }
    });
  }
}
