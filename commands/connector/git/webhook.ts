import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { info, table } from '../../../src/cli/output.js';
import { setupHint } from '../../../src/core/codehost/codehost-admin-fns.js';
import { CODE_HOST_KINDS, type CodeHostKind } from '../../../src/core/codehost/codehost-contract.js';

export default class ConnectorGitWebhook extends BaseCommand<typeof ConnectorGitWebhook> {
  static override summary = "Show or change a git host's webhook: issues and review comments there become agents' pull requests.";
  static override description =
    'Without flags: the webhook URL and settings (never the secret). --enable the first time (with --kind) generates the URL and the secret and prints the secret once; --rotate prints a new one (the URL stays, the old secret stops working at once). --mention, --label and --repo set what triggers a run; --test sends a signed test delivery through the intake; --deliveries lists the latest deliveries with their outcome. Audited as codehost.webhook_secret, codehost.webhook_update, codehost.webhook_test.';
  static override examples = [
    '<%= config.bin %> connector git webhook github --enable --kind github --repo "acme/*"',
    '<%= config.bin %> connector git webhook gitlab --mention @bot --label ai-fix --repo "acme/**"',
    '<%= config.bin %> connector git webhook github --rotate --json',
    '<%= config.bin %> connector git webhook github --test --deliveries',
  ];
  static override args = { host: Args.string({ description: 'Git host name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    kind: Flags.string({ summary: 'Which host sends the deliveries (how they are signed and read).', options: [...CODE_HOST_KINDS] }),
    enable: Flags.boolean({ summary: 'Turn the webhook on (the first time: generates its URL and secret, printed once).', exclusive: ['disable'] }),
    disable: Flags.boolean({ summary: 'Turn the webhook off: deliveries are answered 404, nothing runs.' }),
    rotate: Flags.boolean({ summary: 'A new secret, printed once (the URL stays; the old secret stops working at once).' }),
    mention: Flags.string({ summary: 'A comment starting with this asks for a run (default @agent).' }),
    label: Flags.string({ summary: 'Adding this label asks for a run (default agent).' }),
    repo: Flags.string({ summary: 'A repository pattern that may trigger runs (repeatable; replaces the list): org/*, org/**, org/repo.', multiple: true, exclusive: ['no-repos'] }),
    'no-repos': Flags.boolean({ summary: 'No repository triggers a run (the list is emptied).' }),
    test: Flags.boolean({ summary: 'Send a test delivery signed with the secret through the intake (nothing runs).' }),
    deliveries: Flags.boolean({ summary: 'List the latest deliveries with their outcome.' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const name = this.args.host;
    const admin = core.codeHostAdmin;
    const kind = f.kind as CodeHostKind | undefined;
    const changed: string[] = [];

    let secret: string | undefined;
    const before = await admin.get(ctx, name);
    if (f.rotate || (f.enable && !before.secretSet)) {
      secret = (await admin.rotateSecret(ctx, name, kind ? { kind } : {})).secret;
      changed.push(before.secretSet ? 'secret (rotated)' : 'secret (generated, on)');
    }
    const patch = {
      ...(kind && !secret ? { kind } : {}),
      ...(f.mention !== undefined ? { mention: f.mention } : {}),
      ...(f.label !== undefined ? { label: f.label } : {}),
      ...(f.repo ? { repos: f.repo } : f['no-repos'] ? { repos: [] } : {}),
      ...(f.disable ? { enabled: false } : f.enable && before.secretSet ? { enabled: true } : {}),
    };
    if (Object.keys(patch).length) {
      await admin.update(ctx, name, patch);
      changed.push(...Object.keys(patch));
    }
    const test = f.test ? await admin.test(ctx, name) : undefined;
    const webhook = await admin.get(ctx, name);
    const deliveries = f.deliveries ? await admin.deliveries(ctx, name, 50) : undefined;

    this.output({ webhook, ...(secret ? { secret } : {}), changed, ...(test ? { test } : {}), ...(deliveries ? { deliveries } : {}) }, () => {
      if (changed.length) info(`updated the webhook of ${name} (changed: ${changed.join(', ')})`);
      if (!webhook.webhookUrl) {
        info(`${name} takes no webhook yet: \`connector git webhook ${name} --enable --kind github|gitlab|gitea\` generates its URL and secret.`);
      } else {
        info(`webhook ${webhook.enabled ? 'on' : 'off'} (${webhook.kind}): ${webhook.webhookUrl}`);
        info(`mention ${webhook.mention}, label ${webhook.label}, repositories ${webhook.repos.length ? webhook.repos.join(' ') : 'none (no repository triggers a run)'}`);
      }
      if (secret) {
        const hint = setupHint(webhook.kind!);
        info(`At the host, add a webhook with the URL above${hint.contentType ? ` (content type ${hint.contentType})` : ''}, events ${hint.events.join(', ')}, and this as its ${hint.secretField}; it is shown only now:`);
        process.stdout.write(`${secret}\n`);
      }
      if (test) info(`test delivery ${test.deliveryId}: ${test.outcome}`);
      if (deliveries) {
        if (!deliveries.length) info('No deliveries yet.');
        else {
          const rows = deliveries.map((d) => ({ received: d.receivedAt.toISOString(), event: d.event, target: d.repo ? `${d.repo}${d.targetNumber !== null ? `#${d.targetNumber}` : ''}` : '', by: d.actorLogin ?? '', outcome: d.reason ? `${d.outcome} · ${d.reason}` : d.outcome }));
          process.stdout.write(table(rows, ['received', 'event', 'target', 'by', 'outcome']) + '\n');
        }
      }
    });
  }
}
