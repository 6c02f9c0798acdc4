import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { CACHE_PRICE_FLAG_TEXT, checkAgainst, keyFlags, MODEL_FLAG_TEXT, parseModelSpec, resolveApiKey, withCachePrices } from '../../src/cli/provider-input.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { ProviderPatch } from '../../src/core/providers/providers.schemas.js';

export default class ProviderUpdate extends BaseCommand<typeof ProviderUpdate> {
  static override summary = 'Change a provider: rotate its API key, replace its models, change its base URL, enable or disable it.';
  static override description =
    'Only what is given changes. A new key comes the same ways as for `provider add`: piped in with --api-key-stdin (in a terminal, asked for masked), or --api-key with a warning about shell history; --no-api-key removes the stored key. A --base-url on another origin (scheme, host or port) while a key is stored needs one of them: the stored key is never sent to a new host on its own. --model replaces the whole model list; --cache-price alone changes only those prices of the current models. Changes take effect at the next `aws runtime apply`.';
  static override examples = [
    { description: 'Rotate the key, piped in:', command: '$ printf %s "$NEW_KEY" | <%= config.bin %> provider update openai --api-key-stdin' },
    { description: 'Rotate the key in a terminal (asks for it, masked):', command: '<%= config.bin %> provider update openai --api-key-stdin' },
    '<%= config.bin %> provider update local --model llama3.1:8b --model qwen2.5-coder:7b',
    { description: 'Set a model\'s prompt-cache prices, keeping everything else:', command: '<%= config.bin %> provider update openai --cache-price gpt-4.1=0.5 --cache-price gpt-4.1-mini=0.1' },
    { description: 'Move to another host, with the key for it:', command: '$ printf %s "$KEY" | <%= config.bin %> provider update gateway --base-url https://llm.example.com/v1 --api-key-stdin' },
    { description: 'Move to a host that needs no key, dropping the stored one:', command: '<%= config.bin %> provider update local --base-url http://127.0.0.1:11434/v1 --no-api-key' },
    '<%= config.bin %> provider update local --disable --tenant acme --json',
  ];
  static override args = { name: Args.string({ description: 'Provider name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'base-url': Flags.string({ summary: 'New http(s) URL of the API.' }),
    model: Flags.string({ ...MODEL_FLAG_TEXT, summary: 'Replaces the model list: <id> or <id>:<context>:<output>:<USD/M input>:<USD/M output> (repeatable).', multiple: true }),
    'cache-price': Flags.string({ ...CACHE_PRICE_FLAG_TEXT, multiple: true }),
    enable: Flags.boolean({ summary: 'Switch the provider on.', exclusive: ['disable'] }),
    disable: Flags.boolean({ summary: 'Switch the provider off (the runtime drops it at the next apply).', exclusive: ['enable'] }),
    ...keyFlags,
    'no-api-key': Flags.boolean({ summary: 'Remove the stored API key.', exclusive: ['api-key', 'api-key-stdin'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const cachePrices = f['cache-price'] ?? [];
    // Cache prices alone change only those prices: of the models as they are now (a missing provider is the update's 404).
    const current = !f.model && cachePrices.length ? (await core.providers.list(ctx)).find((p) => p.name === this.args.name) : undefined;
    const models = f.model ? f.model.map(parseModelSpec) : current?.models;
    const patch: ProviderPatch = {
      ...(f['base-url'] !== undefined ? { baseUrl: f['base-url'] } : {}),
      ...(models ? { models: withCachePrices(models, cachePrices) } : {}),
      ...(f.enable ? { enabled: true } : f.disable ? { enabled: false } : {}),
    };
    const rotating = f['api-key'] !== undefined || f['api-key-stdin'];
    if (!Object.keys(patch).length && !rotating && !f['no-api-key'] && !cachePrices.length) {
      throw new ValidationError('nothing to change', { hint: 'Pass --api-key-stdin (new key), --no-api-key, --model, --cache-price, --base-url, --enable or --disable.' });
    }
    checkAgainst(ProviderPatch, patch);
    const apiKey = await resolveApiKey({ apiKey: f['api-key'], apiKeyStdin: f['api-key-stdin'] }, { ask: false, prompt: `New API key for ${this.args.name}` });
    if (apiKey) patch.apiKey = apiKey;
    if (f['no-api-key']) patch.apiKey = null;
    checkAgainst(ProviderPatch, patch);

    const provider = await core.providers.update(ctx, this.args.name, patch);
    const changed = [...Object.keys(patch).filter((k) => k !== 'apiKey'), ...(apiKey ? ['apiKey (rotated)'] : f['no-api-key'] ? ['apiKey (removed)'] : [])];
    this.output({ provider, changed }, () => {
      info(`updated provider ${provider.name} (changed: ${changed.join(', ')})`);
      info(`models: ${provider.models.map((m) => m.id).join(', ')}; API key: ${provider.hasApiKey ? 'set' : 'none'}; ${provider.enabled ? 'enabled' : 'disabled'}`);
      info('Takes effect at the next apply: npx aws runtime apply');
    });
  }
}
