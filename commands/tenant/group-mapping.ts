import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info, table } from '../../src/cli/output.js';
import { ValidationError } from '../../src/kernel/errors.js';

/** `GROUP=NAME` flags into a mapping (split at the first `=`: group ids and names hold none). */
function pairs(flag: string, list: string[] | undefined): Record<string, string> | undefined {
  if (!list) return undefined;
  const out: Record<string, string> = {};
  for (const item of list) {
    const at = item.indexOf('=');
    if (at <= 0 || at === item.length - 1) throw new ValidationError(`--${flag} "${item}": expected GROUP=NAME`, { details: { field: flag } });
    out[item.slice(0, at).trim()] = item.slice(at + 1).trim();
  }
  return out;
}

export default class TenantGroupMapping extends BaseCommand<typeof TenantGroupMapping> {
  static override summary = "Show or set how sign-in maps identity-provider groups to roles and teams.";
  static override description = [
    'Off by default (SPEC.md: sign-in does not apply groupRoleMapping). With --apply, each sign-in adds the roles and teams the',
    "person's groups (the ID token's `groups` claim) map to and removes those the mapping gave earlier that no group maps to any",
    'more; roles and teams given by hand are never removed, nor the owner role of the last owner. --role and --team replace',
    "that whole mapping; teams must exist. Without flags it shows the mapping. Takes effect at each person's next sign-in.",
  ].join(' ');
  static override examples = [
    '<%= config.bin %> tenant group-mapping --tenant acme',
    '<%= config.bin %> tenant group-mapping --tenant acme --apply --role 6f1c…=admin --role 0b2d…=viewer --team 6f1c…=Platform',
    '<%= config.bin %> tenant group-mapping --tenant acme --no-apply',
  ];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    apply: Flags.boolean({ allowNo: true, description: 'Apply the mapping at each sign-in (--no-apply: store it only, the default)' }),
    role: Flags.string({ multiple: true, description: 'GROUP=ROLE (group object id or name); replaces the role mapping' }),
    team: Flags.string({ multiple: true, description: 'GROUP=TEAM (group object id or name); replaces the team mapping' }),
    'clear-roles': Flags.boolean({ description: 'Remove every group -> role entry', exclusive: ['role'] }),
    'clear-teams': Flags.boolean({ description: 'Remove every group -> team entry', exclusive: ['team'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const roles = f['clear-roles'] ? {} : pairs('role', f.role);
    const teams = f['clear-teams'] ? {} : pairs('team', f.team);
    const changing = f.apply !== undefined || roles !== undefined || teams !== undefined;
    const tenant = changing
      ? await core.tenants.updateSettings(ctx, {
          settings: {
            ...(roles !== undefined ? { groupRoleMapping: roles } : {}),
            ...(teams !== undefined ? { groupTeamMapping: teams } : {}),
            ...(f.apply !== undefined ? { signIn: { applyGroupMapping: f.apply } } : {}),
          },
        })
      : await core.tenants.getTenant(ctx);
    const s = tenant.settings as { signIn?: { applyGroupMapping?: boolean }; groupRoleMapping?: Record<string, string>; groupTeamMapping?: Record<string, string> };
    const result = { applyGroupMapping: s.signIn?.applyGroupMapping === true, groupRoleMapping: s.groupRoleMapping ?? {}, groupTeamMapping: s.groupTeamMapping ?? {} };
    this.output({ tenant: { id: tenant.id, slug: tenant.slug }, ...result }, () => {
      info(`${tenant.slug}: group mapping at sign-in is ${result.applyGroupMapping ? 'ON' : 'off (stored, not applied)'}`);
      const rows = [
        ...Object.entries(result.groupRoleMapping).map(([group, name]) => ({ group, maps: 'role', to: name })),
        ...Object.entries(result.groupTeamMapping).map(([group, name]) => ({ group, maps: 'team', to: name })),
      ];
      if (rows.length) process.stdout.write(table(rows, ['group', 'maps', 'to']) + '\n');
    });
  }
}
