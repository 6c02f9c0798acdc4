import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class BackupCreate extends BaseCommand<typeof BackupCreate> {
  static override summary = 'Back up the database and the data dir (workspaces, transcripts, shared files) into one archive.';
  static override description =
    'Writes a gzip\'d tar with a manifest and a sha256 per entry: the database (PostgreSQL or the embedded one) read in one snapshot, then the workspaces, the runtimes\' homes (transcripts copied through SQLite\'s own backup) and the tenants\' shared files. Safe while `aws serve` runs. Secrets are not in it: provider keys stay sealed with AGENTWS_ENCRYPTION_KEY, which a restore needs. The file is created 0600 and never overwritten. Audited as backup.created.';
  static override examples = [
    '<%= config.bin %> backup create /var/backups/agentws/before-upgrade.tar.gz',
    '<%= config.bin %> backup create --dir /var/backups/agentws --keep 14   # what the systemd timer runs daily',
    '<%= config.bin %> backup create backup.tar.gz --json',
  ];
  static override args = { file: Args.string({ description: 'The archive to write (must not exist); or give --dir.', required: false }) };
  static override flags = {
    dir: Flags.string({ summary: 'Write the archive into this directory, named by the time (agentws-<UTC time>.tar.gz).', exclusive: ['file'] }),
    keep: Flags.integer({ summary: 'With --dir: keep only this many of the newest timed backups there (older ones are deleted once this one is written).', dependsOn: ['dir'], min: 1 }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const human = !this.jsonMode;
    const r = await core.backup.create(this.ctx(), {
      file: this.args.file,
      dir: this.flags.dir,
      keep: this.flags.keep,
      appVersion: this.config.version,
      onProgress: (p) => human && info(p.step === 'database' ? 'reading the database (one snapshot)…' : 'reading the data dir…'),
    });
    this.output(r, () => {
      info(`backup written: ${r.file} (${(r.bytes / 2 ** 20).toFixed(1)} MiB; ${r.tables} tables, ${r.rows} rows, ${r.files} files, ${(r.ms / 1000).toFixed(1)} s)`);
      if (r.pruned.length) info(`removed ${r.pruned.length} older backup(s) (--keep ${this.flags.keep})`);
      if (r.changed.length) info(`${r.changed.length} file(s) changed while read (taken as they were then), e.g. ${r.changed[0]}`);
    });
  }
}
