import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { describeAccess, gitHostFlags, parseAccess, resolveGitToken } from '../../../src/cli/git-host-input.js';
import { info } from '../../../src/cli/output.js';

export default class ConnectorGitAdd extends BaseCommand<typeof ConnectorGitAdd> {
  static override summary = 'Register a git host (any smart-HTTP git server) whose repositories agents reach through the git gateway.';
  static override description =
    'The token is sealed and never enters a sandbox: inside, `git clone <base-url>/<owner>/<repo>` goes to the gateway, which checks the user\'s access (--access), adds the token and forwards. Agents push only below --branch-prefix; protected refs (--protect, and the host\'s default branch unless --no-protect-default) are refused. Runtimes get the host in their git config at their next configuration refresh (`aws runtime apply` applies it at once).';
  static override examples = [
    { description: 'GitHub, members reach the org\'s repositories:', command: '$ printf %s "$GITHUB_TOKEN" | <%= config.bin %> connector git add github --base-url https://github.com --token-stdin --access "role:member=acme/*"' },
    { description: 'A GitLab with a team rule and a release branch protected:', command: '$ printf %s "$TOKEN" | <%= config.bin %> connector git add gitlab --base-url https://gitlab.example.com --username oauth2 --token-stdin --access "team:backend=platform/**" --protect refs/heads/main --protect "refs/heads/release/*"' },
  ];
  static override args = { name: Args.string({ description: 'Name of the host (lowercase letters, digits, -): in the gateway\'s path and these commands', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'base-url': Flags.string({ summary: 'Where the repositories are: <base-url>/<owner>/<repo> (http or https).', required: true }),
    ...gitHostFlags,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const token = (await resolveGitToken(f, `Token for ${this.args.name} (${f['base-url']})`, true))!;
    const host = await core.gitHosts.add(ctx, {
      name: this.args.name,
      baseUrl: f['base-url'],
      token,
      username: f.username,
      access: f.access ? parseAccess(f.access) : [],
      protectedRefs: f.protect,
      protectDefault: !f['no-protect-default'],
      branchPrefix: f['branch-prefix'],
    });
    this.output({ gitHost: host }, () => {
      info(`added git host ${host.name} (${host.baseUrl}); token stored sealed`);
      info(`access: ${describeAccess(host.access)}; agents push under ${host.branchPrefix}; protected: ${[...host.protectedRefs, ...(host.protectDefault ? ['(default branch)'] : [])].join(', ')}`);
      if (!host.access.length) info('Nobody reaches it yet: grant with `npx aws connector git update ' + host.name + ' --access "role:member=<owner>/*"`.');
    });
  }
}
