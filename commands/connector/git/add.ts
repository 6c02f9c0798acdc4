import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { credentialInput, describeAccess, describeCredential, describePushOptions, gitCredentialFlags, gitHostFlags, parseAccess, resolveGitToken } from '../../../src/cli/git-host-input.js';
import { info } from '../../../src/cli/output.js';
import { ValidationError } from '../../../src/kernel/errors.js';

export default class ConnectorGitAdd extends BaseCommand<typeof ConnectorGitAdd> {
  static override summary = 'Register a git host (any smart-HTTP git server) whose repositories agents reach through the git gateway.';
  static override description =
    'The token is sealed and never enters a sandbox: inside, `git clone <base-url>/<owner>/<repo>` goes to the gateway, which checks the user\'s access (--access), adds the token and forwards. Agents push only below --branch-prefix; protected refs (--protect, and the host\'s default branch unless --no-protect-default) are refused, and so is a push carrying a push option (git push -o) not listed with --push-option. Runtimes get the host in their git config at their next configuration refresh (`aws runtime apply` applies it at once).';
  static override examples = [
    { description: 'GitHub, members reach the org\'s repositories:', command: '$ printf %s "$GITHUB_TOKEN" | <%= config.bin %> connector git add github --base-url https://github.com --token-stdin --access "role:member=acme/*"' },
    {
      description: 'A GitHub App as the service credential, and people may connect their own GitHub accounts:',
      command: '$ <%= config.bin %> connector git add github --base-url https://github.com --credential github-app --github-app-id 123456 --github-installation-id 7890123 --github-private-key-file app.pem --oauth-preset github --oauth-client-id Iv1.abc --oauth-client-secret-file client-secret.txt --user-connections optional --access "role:member=acme/*"',
    },
    { description: 'A GitLab with a team rule and a release branch protected:', command: '$ printf %s "$TOKEN" | <%= config.bin %> connector git add gitlab --base-url https://gitlab.example.com --username oauth2 --token-stdin --access "team:backend=platform/**" --protect refs/heads/main --protect "refs/heads/release/*"' },
    { description: 'A GitLab whose agents may open merge requests with git push -o (nothing else: no ci.skip, no ci.variable):', command: '$ printf %s "$TOKEN" | <%= config.bin %> connector git add gitlab --base-url https://gitlab.example.com --username oauth2 --token-stdin --access "role:member=acme/*" --push-option merge_request.create --push-option merge_request.title --push-option merge_request.description' },
  ];
  static override args = { name: Args.string({ description: 'Name of the host (lowercase letters, digits, -): in the gateway\'s path and these commands', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'base-url': Flags.string({ summary: 'Where the repositories are: <base-url>/<owner>/<repo> (http or https).', required: true }),
    ...gitHostFlags,
    ...gitCredentialFlags,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const credentials = credentialInput(f);
    const kind = credentials.credentialKind ?? (credentials.githubApp ? 'github_app' : 'token');
    if (kind !== 'token' && (f.token || f['token-stdin'])) throw new ValidationError('a token is the credential of --credential token', { hint: 'Leave out --token / --token-stdin, or pass --credential token.' });
    const token = await resolveGitToken(f, `Token for ${this.args.name} (${f['base-url']})`, kind === 'token');
    const host = await core.gitHosts.add(ctx, {
      name: this.args.name,
      baseUrl: f['base-url'],
      ...credentials,
      ...(token ? { token } : {}),
      username: f.username,
      access: f.access ? parseAccess(f.access) : [],
      protectedRefs: f.protect,
      protectDefault: !f['no-protect-default'],
      branchPrefix: f['branch-prefix'],
      pushOptions: f['push-option'],
    });
    const callbackUrl = host.oauth ? core.gitConnections.redirectUri : undefined;
    this.output({ gitHost: host, ...(callbackUrl ? { callbackUrl } : {}) }, () => {
      info(`added git host ${host.name} (${host.baseUrl}); ${host.credential ? `its ${host.credentialKind === 'github_app' ? 'private key' : 'token'} stored sealed` : 'no service credential'}`);
      info(describeCredential(host));
      if (callbackUrl) info(`Register this callback (redirect) URL with the OAuth client at the host: ${callbackUrl}`);
      info(`access: ${describeAccess(host.access)}; agents push under ${host.branchPrefix}; protected: ${[...host.protectedRefs, ...(host.protectDefault ? ['(default branch)'] : [])].join(', ')}`);
      info(`push options agents may send: ${describePushOptions(host.pushOptions)}`);
      if (!host.access.length) info('Nobody reaches it yet: grant with `npx aws connector git update ' + host.name + ' --access "role:member=<owner>/*"`.');
    });
  }
}
