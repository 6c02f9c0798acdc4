import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class UserErase extends BaseCommand<typeof UserErase> {
  static override summary = "Erase a person: their runtime, workspace, sessions, transcripts, memories, trajectories, connections and sign-ins; audit and usage kept under a pseudonym.";
  static override description =
    "The person is named by email, handle or id. Their runtime is stopped, their workspace and runtime home removed; their team and org memories are removed or kept under a pseudonymous placeholder by the tenant's settings.privacy.sharedMemoriesOnErase. Audit entries and usage records stay, naming them only as erased:<hash>. It cannot be undone: `aws user export` first if their data is wanted. In a terminal it asks for confirmation (--yes skips it); without one, or with --json, it never asks. The operator user, a gateway's service user and the tenant's last owner cannot be erased. Audited as user.erase.";
  static override examples = ['<%= config.bin %> user erase alice@acme.example --tenant acme', '<%= config.bin %> user erase bob --tenant acme --yes --json'];
  static override args = { user: Args.string({ description: 'Email, handle or id of the person', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    yes: BaseCommand.yesFlag,
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    await this.confirmOrExit(`Erase ${user.email} (${user.handle}) and everything of theirs? This cannot be undone.`, { yes: this.flags.yes });
    const erased = await core.privacy.erasePerson(ctx, { userId: user.id });
    this.output({ erased }, () =>
      info(
        `erased ${user.email}, now ${erased.pseudonym}: ${erased.sessions} sessions, ${erased.privateMemories + erased.sharedMemoriesRemoved} memories removed` +
          `${erased.sharedMemoriesKept ? ` (${erased.sharedMemoriesKept} shared kept anonymously)` : ''}, ${erased.auditEntriesPseudonymised} audit entries pseudonymised`,
      ),
    );
  }
}
