import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { colors, csv } from '../../src/cli/output.js';
import { untilSignal } from '../../src/cli/signals.js';
import type { AuditEntry } from '../../src/core/audit/audit.repo.js';
import { AUDIT_CHANNEL, AUDIT_LIMIT_MAX } from '../../src/core/audit/audit.service.js';
import type { Ctx } from '../../src/kernel/context.js';

const COLUMNS = ['id', 'ts', 'tenantId', 'userId', 'actor', 'action', 'target', 'sessionId', 'channel', 'durationMs'];
// Safety net while following: events can be missed across a reconnect, and the embedded database
// cannot deliver them to another process at all.
const FOLLOW_POLL_MS = { postgres: 5000, embedded: 1000 };

export default class AuditTail extends BaseCommand<typeof AuditTail> {
  static override summary = 'Print the latest audit entries, oldest first; --follow streams new ones.';
  static override description =
    'Made for cron exports: output is deterministic (oldest first, fixed columns), --json prints one JSON object per line and --csv a header then one line per entry; exit 0 on success, 1 with a message on failure. Without --tenant it reads every tenant. With --follow it keeps printing entries as they are written (PostgreSQL: pushed by LISTEN/NOTIFY; embedded: checked every second) until interrupted.';
  static override examples = [
    '<%= config.bin %> audit tail',
    '<%= config.bin %> audit tail --limit 500 --since 2026-01-01 --csv > audit.csv',
    '<%= config.bin %> audit tail --tenant acme --action role.assign --json',
    '<%= config.bin %> audit tail --follow',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    limit: Flags.integer({ char: 'n', summary: `How many of the latest entries (1-${AUDIT_LIMIT_MAX}).`, default: 20, min: 1, max: AUDIT_LIMIT_MAX }),
    action: Flags.string({ summary: 'Only this action (exact), e.g. role.assign.' }),
    user: Flags.string({ summary: 'Only entries of this user (email, handle or id; needs --tenant unless there is one tenant).' }),
    since: Flags.string({ summary: 'Only entries at or after this ISO 8601 time.' }),
    until: Flags.string({ summary: 'Only entries at or before this ISO 8601 time.' }),
    follow: Flags.boolean({ char: 'f', summary: 'Keep printing new entries until interrupted.' }),
    csv: Flags.boolean({ summary: 'CSV with a header line.', exclusive: ['json'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    // Without --tenant the operator reads all tenants, unless a user filter needs one.
    const ctx: Ctx = this.flags.tenant || this.flags.user ? await this.tenantCtx(this.flags.tenant) : this.ctx();
    const userId = this.flags.user ? (await core.users.findUser(ctx, this.flags.user)).id : undefined;
    const filter = { action: this.flags.action, userId, since: this.flags.since, until: this.flags.until };

    const { entries } = await core.audit.query(ctx, { ...filter, limit: this.flags.limit });
    entries.reverse();
    if (this.flags.csv) process.stdout.write(csv([], COLUMNS));
    this.print(entries);
    if (!this.flags.follow) return;

    let last: AuditEntry | undefined = entries.at(-1) ?? (await core.audit.query(ctx, { ...filter, limit: 1 })).entries[0];
    let busy = Promise.resolve();
    const pull = () =>
      (busy = busy.then(async () => {
        for (;;) {
          const batch = last
            ? (await core.audit.query(ctx, { ...filter, limit: AUDIT_LIMIT_MAX, afterId: last.id })).entries
            : (await core.audit.query(ctx, { ...filter, limit: AUDIT_LIMIT_MAX })).entries.reverse();
          this.print(batch);
          if (batch.length) last = batch.at(-1);
          if (batch.length < AUDIT_LIMIT_MAX) return;
        }
      }));
    const off = await core.bus.subscribe(AUDIT_CHANNEL, () => void pull());
    const timer = setInterval(() => void pull(), FOLLOW_POLL_MS[core.db.mode]);
    await pull();
    await untilSignal(() => process.exit(0));
    clearInterval(timer);
    await off();
    await busy;
  }

  private print(entries: AuditEntry[]): void {
    if (!entries.length) return;
    if (this.flags.csv) {
      process.stdout.write(csv(entries as unknown as Array<Record<string, unknown>>, COLUMNS).split('\n').slice(1).join('\n'));
    } else if (this.flags.json) {
      process.stdout.write(entries.map((e) => JSON.stringify(e)).join('\n') + '\n');
    } else {
      const c = colors.out;
      for (const e of entries) {
        process.stdout.write(
          `${c.dim(e.ts.toISOString())}  ${c.bold(e.action.padEnd(22))} ${e.actor.padEnd(42)} ${e.target}${e.channel ? c.dim(`  [${e.channel}]`) : ''}${e.durationMs !== null ? c.dim(` ${e.durationMs}ms`) : ''}\n`,
        );
      }
    }
  }
}
