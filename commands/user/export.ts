import { resolve } from 'node:path';
import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class UserExport extends BaseCommand<typeof UserExport> {
  static override summary = "Write everything the appliance holds about a person into one archive (their data on request).";
  static override description =
    "The person is named by email, handle or id. The archive (a gzip'd tar, created 0600 through <file>.partial, never overwriting a file) holds their profile, roles, teams, sessions with transcripts, memories they wrote, trajectories and the skills learnt from them, git connections (never tokens), usage records and the audit entries about them; manifest.json says what each file is, with counts and checksums. Transcripts are read from the person's runtime, so export while `aws serve` runs (without it they are left out, and the manifest says so). Audited as user.export.";
  static override examples = ['<%= config.bin %> user export alice@acme.example --tenant acme --out alice.tar.gz', '<%= config.bin %> user export bob --tenant acme --out /secure/bob.tar.gz --json'];
  static override args = { user: Args.string({ description: 'Email, handle or id of the person', required: true }) };
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    out: Flags.string({ char: 'o', summary: 'The archive to write (must not exist).', required: true }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    const user = await core.users.findUser(ctx, this.args.user);
    const r = await core.privacy.exportPerson(ctx, { user: user.id, file: resolve(this.flags.out), appVersion: this.config.version });
    this.output(r, () => {
      info(`export of ${user.email} written: ${r.file} (${(r.bytes / 1024).toFixed(1)} KiB; ${r.counts['sessions.json']} sessions, ${r.counts['memories.json']} memories, ${r.counts['audit.json']} audit entries)`);
      for (const w of r.warnings) info(`warning: ${w}`);
    });
  }
}
