import { BaseCommand } from '../../../src/cli/base-command.js';
import { describeAccess, describePushOptions } from '../../../src/cli/git-host-input.js';
import { info, table } from '../../../src/cli/output.js';

export default class ConnectorGitList extends BaseCommand<typeof ConnectorGitList> {
  static override summary = 'List the git hosts of a tenant (never their tokens).';
  static override description =
    'Columns: name, base URL, service credential (token, github_app, none), per-user connections (off, optional, required) and how many people have connected, access (who=patterns), branch prefix, protected refs, the push options agents may send.';
  static override examples = ['<%= config.bin %> connector git list', '<%= config.bin %> connector git list --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const hosts = await core.gitHosts.list(await this.tenantCtx(this.flags.tenant));
    this.output({ gitHosts: hosts }, () => {
      if (!hosts.length) return info('No git hosts yet: add one with `npx aws connector git add`.');
      const rows = hosts.map((h) => ({
        name: h.name,
        'base url': h.baseUrl,
        credential: h.credentialKind,
        'user connections': h.userConnections === 'off' && !h.connections ? 'off' : `${h.userConnections} (${h.connections} connected)`,
        access: describeAccess(h.access),
        prefix: h.branchPrefix,
        protected: [...h.protectedRefs, ...(h.protectDefault ? ['HEAD'] : [])].join(','),
        'push options': describePushOptions(h.pushOptions),
      }));
      process.stdout.write(table(rows, ['name', 'base url', 'credential', 'user connections', 'access', 'prefix', 'protected', 'push options']) + '\n');
    });
  }
}
