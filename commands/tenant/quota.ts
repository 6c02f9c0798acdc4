import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { effectiveQuotaBytes } from '../../src/core/runtime/host/runtime-limits-fns.js';
import { formatSize, parseSize } from '../../src/lib/size.js';

export default class TenantQuota extends BaseCommand<typeof TenantQuota> {
  static override summary = "Show or set the disk each of a tenant's people may take, and who is near it.";
  static override description = [
    "A person's quota covers their workspace and their runtime's home and run directory (the sandbox's /tmp is in its memory).",
    'Without --set the tenant has the operator\'s default (AGENTWS_WORKSPACE_QUOTA); a tenant may have at most AGENTWS_WORKSPACE_QUOTA_MAX.',
    "It is measured by the host running the person's agent: past it their agent is stopped and new turns are refused until they are",
    'under it again (docs/admin/limits.md, "Workspace quota"). Lists the people nearest to it (as their hosts last measured them).',
  ].join(' ');
  static override examples = ['<%= config.bin %> tenant quota --tenant acme', '<%= config.bin %> tenant quota --tenant acme --set 25GiB', '<%= config.bin %> tenant quota --tenant acme --default'];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    set: Flags.string({ description: 'The quota of each of the tenant\'s people (e.g. 25GiB, 500MiB; at least 100MiB)', exclusive: ['default'] }),
    default: Flags.boolean({ description: 'Back to the operator\'s default (AGENTWS_WORKSPACE_QUOTA)', exclusive: ['set'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    let quotaMb: number | null | undefined;
    if (f.set !== undefined) {
      const bytes = parseSize(f.set);
      if (bytes === null) throw new ValidationError(`--set "${f.set}": not a size (e.g. 25GiB, 500MiB)`, { details: { field: 'set' } });
      quotaMb = Math.round(bytes / 1024 ** 2);
    } else if (f.default) quotaMb = null;
    const tenant = quotaMb !== undefined ? await core.tenants.updateSettings(ctx, { settings: { workspace: { quotaMb } } }) : await core.tenants.getTenant(ctx);
    const setting = (tenant.settings as { workspace?: { quotaMb?: number | null } }).workspace?.quotaMb ?? null;
    const r = this.appConfig.runtime;
    const quotaBytes = effectiveQuotaBytes(setting, r.workspaceQuotaBytes);
    const status = await core.runtime.status(ctx);
    const people = status.runtime.people.map((p) => ({ handle: p.handle, diskBytes: p.diskBytes, diskQuotaBytes: p.diskQuotaBytes, overQuota: p.overQuota, measuredAt: p.diskMeasuredAt, host: p.host }));
    this.output({ tenant: { id: tenant.id, slug: tenant.slug }, quotaMb: setting, quotaBytes, defaultBytes: r.workspaceQuotaBytes, maxBytes: r.workspaceQuotaMaxBytes, people }, () => {
      const from = setting !== null ? 'the tenant\'s setting' : 'the operator\'s default, AGENTWS_WORKSPACE_QUOTA';
      info(`${tenant.slug}: each person may take ${quotaBytes === null ? 'any amount of disk (no quota)' : formatSize(quotaBytes)} (${from}; at most ${formatSize(r.workspaceQuotaMaxBytes)} may be set)`);
      if (!people.length) return info('no one measured yet (a person is measured while their agent runs)');
      const rows = people.map((p) => ({
        person: p.handle,
        uses: p.diskBytes === null ? '?' : formatSize(p.diskBytes),
        of: p.diskQuotaBytes === null ? '-' : formatSize(p.diskQuotaBytes),
        state: p.overQuota ? 'PAST THE QUOTA: turns refused' : '',
        measured: p.measuredAt ? new Date(p.measuredAt).toISOString() : '',
      }));
      process.stdout.write(table(rows, ['person', 'uses', 'of', 'state', 'measured']) + '\n');
    });
  }
}
