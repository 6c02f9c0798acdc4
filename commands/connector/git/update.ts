import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base-command.js';
import { describeAccess, gitHostFlags, parseAccess, resolveGitToken } from '../../../src/cli/git-host-input.js';
import { info } from '../../../src/cli/output.js';
import { ValidationError } from '../../../src/core/errors.js';

export default class ConnectorGitUpdate extends BaseCommand<typeof ConnectorGitUpdate> {
  static override summary = 'Change a git host: rotate its token, its base URL, who reaches which repositories, its push rules.';
  static override description = 'Only what is given changes; --access and --protect replace their whole lists. Access and push rules apply to the very next git request of any agent.';
  static override examples = [
    { description: 'Rotate the token:', command: '$ printf %s "$NEW_TOKEN" | <%= config.bin %> connector git update github --token-stdin' },
    '<%= config.bin %> connector git update github --access "role:member=acme/*" --access "team:ops=acme-infra/**"',
  ];
  static override args = { name: Args.string({ description: 'Git host name', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'base-url': Flags.string({ summary: 'New base URL (http or https).' }),
    ...gitHostFlags,
    'protect-default': Flags.boolean({ summary: 'Protect the host\'s default branch again.', exclusive: ['no-protect-default'] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const f = this.flags;
    const token = await resolveGitToken(f, `New token for ${this.args.name}`, false);
    const patch = {
      ...(f['base-url'] !== undefined ? { baseUrl: f['base-url'] } : {}),
      ...(token ? { token } : {}),
      ...(f.username !== undefined ? { username: f.username } : {}),
      ...(f.access ? { access: parseAccess(f.access) } : {}),
      ...(f.protect ? { protectedRefs: f.protect } : {}),
      ...(f['no-protect-default'] ? { protectDefault: false } : f['protect-default'] ? { protectDefault: true } : {}),
      ...(f['branch-prefix'] !== undefined ? { branchPrefix: f['branch-prefix'] } : {}),
    };
    if (!Object.keys(patch).length) throw new ValidationError('nothing to change', { hint: 'Pass --token-stdin, --base-url, --username, --access, --protect, --[no-]protect-default or --branch-prefix.' });
    const host = await core.gitHosts.update(ctx, this.args.name, patch);
    const changed = Object.keys(patch).map((k) => (k === 'token' ? 'token (rotated)' : k));
    this.output({ gitHost: host, changed }, () => {
      info(`updated git host ${host.name} (changed: ${changed.join(', ')})`);
      info(`access: ${describeAccess(host.access)}; agents push under ${host.branchPrefix}`);
    });
  }
}
