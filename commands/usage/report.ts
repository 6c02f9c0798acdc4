import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { csv, info, table } from '../../src/cli/output.js';
import type { TokenSplit } from '../../src/core/usage/usage.service.js';

/** The CSV's columns: the four it always had first (scripts reading them by position keep working), then tokens by kind. */
const COLUMNS = ['group', 'key', 'tokens', 'costUsd', 'inputTokens', 'outputTokens', 'reasoningTokens', 'cacheReadTokens', 'cacheWriteTokens'];

export default class UsageReport extends BaseCommand<typeof UsageReport> {
  static override summary = 'Tokens and cost of a tenant over a window, by model and by user, tokens split by kind (input, output, reasoning, cache reads and writes).';
  static override examples = [
    '<%= config.bin %> usage report',
    '<%= config.bin %> usage report --since 7d --tenant acme',
    '<%= config.bin %> usage report --since 30d --json',
    '<%= config.bin %> usage report --since 30d --csv > usage.csv',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    since: Flags.string({ summary: 'Window: 24h, 7d, 30d, ... (default 24h).', default: '24h' }),
    csv: Flags.boolean({ summary: 'CSV: one line per model and per user, then the total.', exclusive: ['json'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const d = await core.usage.digest(await this.tenantCtx(this.flags.tenant), { since: this.flags.since });
    const split = (v: TokenSplit) => ({ inputTokens: v.inputTokens, outputTokens: v.outputTokens, reasoningTokens: v.reasoningTokens, cacheReadTokens: v.cacheReadTokens, cacheWriteTokens: v.cacheWriteTokens });
    const rows = [
      ...Object.entries(d.byModel).map(([key, v]) => ({ group: 'model', key, tokens: v.tokens, costUsd: v.cost.toFixed(6), ...split(v) })),
      ...Object.entries(d.byUser).map(([key, v]) => ({ group: 'user', key, tokens: v.tokens, costUsd: v.cost.toFixed(6), ...split(v) })),
      { group: 'total', key: '', tokens: d.totalTokens, costUsd: d.totalCostUsd.toFixed(6), ...split(d) },
    ];
    if (this.flags.csv) return void process.stdout.write(csv(rows, COLUMNS));
    this.output(
      { totalTokens: d.totalTokens, totalCostUsd: d.totalCostUsd, ...split(d), byModel: d.byModel, byUser: d.byUser, window: { since: d.since, from: d.from, to: d.to } },
      () => {
        info(`usage from ${d.from.toISOString()} to ${d.to.toISOString()} (${d.since})`);
        const human = rows.map((r) => ({ ...r, input: r.inputTokens, cacheRead: r.cacheReadTokens, cacheWrite: r.cacheWriteTokens, output: r.outputTokens, reasoning: r.reasoningTokens }));
        process.stdout.write(table(human, ['group', 'key', 'tokens', 'input', 'cacheRead', 'cacheWrite', 'output', 'reasoning', 'costUsd']) + '\n');
      },
    );
  }
}
