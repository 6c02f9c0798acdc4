import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { credentialInput, describeAccess, describeCredential, describePushOptions, gitCredentialFlags, gitHostFlags, parseAccess, resolveGitToken } from '../../../src/cli/git-host-input.js';
import { info } from '../../../src/cli/output.js';
import { ValidationError } from '../../../src/kernel/errors.js';

export default class ConnectorGitUpdate extends BaseCommand<typeof ConnectorGitUpdate> {
  static override summary = 'Change a git host: its credential, OAuth client and per-user connections, base URL, who reaches which repositories, push rules.';
  static override description = 'Only what is given changes; --access, --protect and --push-option replace their whole lists (--no-push-options empties the last). Access and push rules apply to the very next git request of any agent.';
  static override examples = [
    { description: 'Rotate the token:', command: '$ printf %s "$NEW_TOKEN" | <%= config.bin %> connector git update github --token-stdin' },
    '<%= config.bin %> connector git update github --access "role:member=acme/*" --access "team:ops=acme-infra/**"',
    { description: 'Let agents open merge requests on a GitLab with git push -o merge_request.create (and set their title):', command: '$ <%= config.bin %> connector git update gitlab --push-option merge_request.create --push-option merge_request.title' },
    { description: 'Let people connect their own accounts (prints the callback URL to register at the host):', command: '$ <%= config.bin %> connector git update github --oauth-preset github --oauth-client-id Iv1.abc --oauth-client-secret-file client-secret.txt --user-connections optional' },
    { description: 'Stop per-user connections and remove the OAuth client:', command: '$ <%= config.bin %> connector git update github --user-connections off --no-oauth' },
  ];
  static override args = { name: Args.string({ description: 'Git host name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'base-url': Flags.string({ summary: 'New base URL (http or https).' }),
    ...gitHostFlags,
    ...gitCredentialFlags,
    'no-oauth': Flags.boolean({ summary: 'Remove the host\'s OAuth client (per-user connections need --user-connections off then).', exclusive: ['oauth-preset', 'oauth-client-id', 'oauth-client-secret-file', 'oauth-authorize-url', 'oauth-token-url', 'oauth-user-url', 'oauth-scopes'] }),
    'protect-default': Flags.boolean({ summary: 'Protect the host\'s default branch again.', exclusive: ['no-protect-default'] }),
    'no-push-options': Flags.boolean({ summary: 'Agents may send no push option (the list is emptied).', exclusive: ['push-option'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const token = await resolveGitToken(f, `New token for ${this.args.name}`, false);
    // Only a change of part of the GitHub App or the OAuth client needs the rest of it as it is.
    const partial = Object.entries(f).some(([k, v]) => v !== undefined && (k.startsWith('github-') || k.startsWith('oauth-')));
    const credentials = credentialInput(f, partial ? await core.gitHosts.get(ctx, this.args.name) : undefined);
    const patch = {
      ...credentials,
      ...(f['no-oauth'] ? { oauth: null } : {}),
      ...(f['base-url'] !== undefined ? { baseUrl: f['base-url'] } : {}),
      ...(token ? { token } : {}),
      ...(f.username !== undefined ? { username: f.username } : {}),
      ...(f.access ? { access: parseAccess(f.access) } : {}),
      ...(f.protect ? { protectedRefs: f.protect } : {}),
      ...(f['no-protect-default'] ? { protectDefault: false } : f['protect-default'] ? { protectDefault: true } : {}),
      ...(f['branch-prefix'] !== undefined ? { branchPrefix: f['branch-prefix'] } : {}),
      ...(f['push-option'] ? { pushOptions: f['push-option'] } : f['no-push-options'] ? { pushOptions: [] } : {}),
    };
    if (!Object.keys(patch).length) throw new ValidationError('nothing to change', { hint: 'Pass --token-stdin, --base-url, --username, --access, --protect, --[no-]protect-default, --branch-prefix, --push-option, --no-push-options, --credential, --github-*, --oauth-*, --no-oauth or --user-connections.' });
    const host = await core.gitHosts.update(ctx, this.args.name, patch);
    const changed = Object.keys(patch).map((k) => (k === 'token' ? 'token (rotated)' : k));
    const callbackUrl = host.oauth ? core.gitConnections.redirectUri : undefined;
    this.output({ gitHost: host, changed, ...(callbackUrl ? { callbackUrl } : {}) }, () => {
      info(`updated git host ${host.name} (changed: ${changed.join(', ')})`);
      info(`access: ${describeAccess(host.access)}; agents push under ${host.branchPrefix}; push options they may send: ${describePushOptions(host.pushOptions)}`);
      info(describeCredential(host));
      if (callbackUrl) info(`Register this callback (redirect) URL with the OAuth client at the host: ${callbackUrl}`);
    });
  }
}
