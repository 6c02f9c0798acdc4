import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { CACHE_PRICE_FLAG_TEXT, checkAgainst, keyFlags, MODEL_FLAG_TEXT, parseModelSpec, resolveApiKey, withCachePrices } from '../../src/cli/provider-input.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { PROVIDER_KINDS } from '../../src/core/providers/provider-names.js';
import { ProviderInput } from '../../src/core/providers/providers.schemas.js';

export default class ProviderAdd extends BaseCommand<typeof ProviderAdd> {
  static override summary = 'Register a model provider with its models; its API key is stored sealed.';
  static override description =
    'The key never has to appear on the command line: pipe it in with --api-key-stdin, or run in a terminal and answer the masked prompt (openai and anthropic need a key; an openai-compatible server may do without). --api-key also works but warns that the key may be recorded in shell history. Without a terminal nothing is asked: a kind that needs a key and gets none fails. The provider takes effect at the next `aws runtime apply`.';
  static override examples = [
    { description: 'Pipe the key in (it never lands in shell history):', command: '$ printf %s "$OPENAI_API_KEY" | <%= config.bin %> provider add openai --kind openai --model gpt-4.1-mini --model gpt-4.1 --api-key-stdin' },
    { description: 'In a terminal: asks for the key (masked); limits and costs given for the model (its cache prices follow Anthropic\'s rule):', command: '<%= config.bin %> provider add claude --kind anthropic --model claude-sonnet-4-5:200000:64000:3:15' },
    { description: 'OpenAI\'s cached input at its own price (USD per million tokens):', command: '$ printf %s "$OPENAI_API_KEY" | <%= config.bin %> provider add openai --kind openai --model gpt-4.1:1047576:32768:2:8 --cache-price gpt-4.1=0.5 --api-key-stdin' },
    { description: 'A local OpenAI-compatible server that needs no key:', command: '<%= config.bin %> provider add local --kind openai-compatible --base-url http://127.0.0.1:11434/v1 --model llama3.1:8b --tenant acme --json' },
  ];
  static override args = {
    name: Args.string({ description: 'Provider name: lower-case letters, digits and dashes (models are referred to as <name>/<model id>)', required: true }),
  };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    kind: Flags.string({ summary: 'The provider\'s API.', options: [...PROVIDER_KINDS], required: true }),
    'base-url': Flags.string({ summary: 'http(s) URL of the API (required for openai-compatible).' }),
    model: Flags.string({ ...MODEL_FLAG_TEXT, multiple: true, required: true }),
    'cache-price': Flags.string({ ...CACHE_PRICE_FLAG_TEXT, multiple: true }),
    disabled: Flags.boolean({ summary: 'Register it switched off (not applied to the runtime until enabled).' }),
    ...keyFlags,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const kind = this.flags.kind as ProviderInput['kind'];
    const input: ProviderInput = {
      name: this.args.name,
      kind,
      ...(this.flags['base-url'] !== undefined ? { baseUrl: this.flags['base-url'] } : {}),
      models: withCachePrices(this.flags.model.map(parseModelSpec), this.flags['cache-price'] ?? []),
      enabled: !this.flags.disabled,
    };
    // Checked before asking for the key, so nobody types a key only to be told the name is wrong.
    checkAgainst(ProviderInput, input);
    // The core enforces which kinds need a key; the CLI needs to know it too, to decide whether to ask.
    const needsKey = kind !== 'openai-compatible';
    const apiKey = await resolveApiKey(
      { apiKey: this.flags['api-key'], apiKeyStdin: this.flags['api-key-stdin'] },
      { ask: needsKey, prompt: `API key for ${input.name} (${kind})` },
    );
    if (needsKey && !apiKey) {
      throw new ValidationError(`an ${kind} provider needs an API key, and there is no terminal to ask for it`, {
        hint: `Pipe it in: printf %s "$KEY" | npx aws provider add ${input.name} --kind ${kind} --model <id> --api-key-stdin`,
      });
    }
    if (apiKey) input.apiKey = apiKey;
    checkAgainst(ProviderInput, input);

    const provider = await core.providers.add(ctx, input);
    this.output({ provider }, () => {
      info(`added provider ${provider.name} (${provider.kind}${provider.baseUrl ? ` at ${provider.baseUrl}` : ''}), models: ${provider.models.map((m) => m.id).join(', ')}`);
      info(`API key: ${provider.hasApiKey ? 'stored sealed' : 'none'}; ${provider.enabled ? 'enabled' : 'disabled'}`);
      info(`Takes effect at the next apply: npx aws runtime apply (add --default-model ${provider.name}/${provider.models[0].id} to make it the default)`);
    });
  }
}
