import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { SIGN_IN_LINK_MINUTES_DEFAULT, SIGN_IN_LINK_MINUTES_MAX } from '../../src/core/auth/sign-in-links.js';
import { ValidationError } from '../../src/kernel/errors.js';
import { parseDuration } from '../../src/lib/duration.js';

export default class UserSignInLink extends BaseCommand<typeof UserSignInLink> {
  static override summary = 'Print a one-time link that signs an owner or admin in to the dashboard, with no identity provider (the first hour in a container).';
  static override description = [
    `The link works once, for ${SIGN_IN_LINK_MINUTES_DEFAULT} minutes unless --expires-in says otherwise (at most ${SIGN_IN_LINK_MINUTES_MAX}), and only for a user who is an owner or admin of the tenant and not deactivated, then and when it is used. It signs them in exactly as the identity provider would (same cookies, a 7-day sign-in they can sign out of).`,
    'The link is printed to this terminal only (stdout); it is not written to any log, and only a hash of its token is stored. Its token sits in the URL\'s fragment, which browsers never send to a server, and the page it opens asks the person to press Sign in: a link previewer or a mail scanner that fetches it uses nothing. Making it is audited as auth.sign_in_link.create by system:cli; using it as auth.sign_in (via sign-in-link), with the browser\'s address; a refused use as auth.sign_in_denied.',
    'Whoever can run this command can read the database and the secrets already: the link gives them nothing they did not have. Someone who sees the link later finds it used or expired.',
    'The link starts with AGENTWS_PUBLIC_URL; if you reach the service at another address (an SSH tunnel), keep the part from /#/ on and put your address before it.',
  ].join('\n\n');
  static override examples = [
    '<%= config.bin %> user sign-in-link you@example.com',
    'podman exec agentws_app_1 node /app/bin/run.js user sign-in-link you@example.com --expires-in 5m',
    '<%= config.bin %> user sign-in-link alice --tenant acme --json',
  ];
  static override args = { user: Args.string({ description: 'Email, handle or id of the owner or admin', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    'expires-in': Flags.string({ summary: `How long the link works, in minutes (e.g. 5m; at most ${SIGN_IN_LINK_MINUTES_MAX}m).`, default: `${SIGN_IN_LINK_MINUTES_DEFAULT}m` }),
  };

  async run(): Promise<void> {
    const ms = parseDuration(this.flags['expires-in']);
    if (!ms || ms % 60_000) throw new ValidationError(`--expires-in: "${this.flags['expires-in']}" is not a number of minutes`, { hint: `Use minutes: 5m, 10m, ${SIGN_IN_LINK_MINUTES_MAX}m.` });
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const { link, url } = await core.auth.createSignInLink(ctx, { userId: user.id, minutes: ms / 60_000, command: 'user sign-in-link' });
    this.output({ link: { id: link.id, userId: link.userId, expiresAt: link.expiresAt }, url }, () => {
      info(`a sign-in link for ${user.email}, for one use until ${link.expiresAt.toISOString()}; open it in your browser (it is shown only now):`);
      process.stdout.write(`${url}\n`);
    });
  }
}
