import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { ValidationError } from '../../src/kernel/errors.js';

/** A limit flag: a number of USD, or `none` to lift the limit. */
function usdFlag(value: string | undefined, flag: string): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new ValidationError(`--${flag} must be a number of USD (0 or more) or "none"`, { details: { field: flag } });
  return n;
}

export default class RoleUpdate extends BaseCommand<typeof RoleUpdate> {
  static override summary = 'Change a role: its description, its permission document, or its cost limits.';
  static override description =
    'As PATCH /v1/admin/roles/:roleId: each permission group in --permissions (agents, memory, tools, admin, cost) replaces that group, groups left out keep their value. A system role keeps its document and description; only its cost limits change. --monthly-limit and --per-request-limit change one limit and keep the other; "none" lifts it. Applies to the role\'s members at once.';
  static override examples = [
    '<%= config.bin %> role update member --monthly-limit 20 --per-request-limit 1 --tenant acme',
    '<%= config.bin %> role update reviewer --permissions \'{"memory":{"read_own":true,"read_team":true}}\'',
    '<%= config.bin %> role update member --monthly-limit none',
  ];
  static override args = { role: Args.string({ description: 'Role name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    description: Flags.string({ summary: 'New description (custom roles only).' }),
    permissions: Flags.string({ summary: 'A partial permission document (JSON); the groups it has replace the role\'s.' }),
    'monthly-limit': Flags.string({ summary: 'Monthly cost limit in USD per member, or "none".' }),
    'per-request-limit': Flags.string({ summary: 'Cost limit in USD per turn or plan, or "none".' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    let permissions: Record<string, unknown> | undefined;
    if (f.permissions !== undefined) {
      try {
        permissions = JSON.parse(f.permissions) as Record<string, unknown>;
      } catch {
        throw new ValidationError('--permissions is not JSON', { hint: 'e.g. --permissions \'{"memory":{"read_own":true}}\'' });
      }
    }
    const monthly = usdFlag(f['monthly-limit'], 'monthly-limit');
    const perRequest = usdFlag(f['per-request-limit'], 'per-request-limit');
    if (monthly !== undefined || perRequest !== undefined) {
      // One limit changed keeps the other: start from the role's limits as they are.
      const current = (await core.rbac.listRoles(ctx)).find((r) => r.name === this.args.role.toLowerCase());
      const cost: Record<string, number | undefined> = { ...(current?.permissions.cost ?? {}), ...((permissions?.cost as object | undefined) ?? {}) };
      if (monthly !== undefined) cost.monthly_limit_usd = monthly ?? undefined;
      if (perRequest !== undefined) cost.per_request_limit_usd = perRequest ?? undefined;
      permissions = { ...permissions, cost: Object.fromEntries(Object.entries(cost).filter(([, v]) => v !== undefined)) };
    }
    if (permissions === undefined && f.description === undefined) throw new ValidationError('nothing to change', { hint: 'Give --description, --permissions, --monthly-limit or --per-request-limit.' });
    const role = await core.rbac.updateRole(ctx, { roleName: this.args.role.toLowerCase(), description: f.description, permissions });
    this.output({ role }, () => {
      const c = role.permissions.cost;
      const limits = [c.monthly_limit_usd !== undefined ? `$${c.monthly_limit_usd} a month` : '', c.per_request_limit_usd !== undefined ? `$${c.per_request_limit_usd} a request` : ''].filter(Boolean).join(', ');
      info(`updated role ${role.name}; cost limits: ${limits || 'none'}`);
    });
  }
}
