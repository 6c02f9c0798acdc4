import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

const STEPS: Record<string, string> = {
  verify: 'checking the archive (every entry against its checksum)…',
  'restore-database': 'loading the database…',
  migrate: 'applying this release\'s later migrations…',
  'restore-files': 'moving the files into the data dir…',
};

export default class BackupRestore extends BaseCommand<typeof BackupRestore> {
  static override summary = 'Restore a backup onto an empty database and data dir.';
  static override description =
    'Checks the whole archive first (checksums, format, migrations it knows, and that this installation has the secrets its data needs: AGENTWS_ENCRYPTION_KEY and AGENTWS_JWT_SECRET of the installation that made it), then migrates the database to the backup\'s schema, loads it, applies this release\'s later migrations (a backup of an older release comes back upgraded) and moves the files into place. Refuses a database or data dir that already holds an installation. Stop `aws serve` for this data dir first. Audited as backup.restored.';
  static override examples = ['<%= config.bin %> backup restore /var/backups/agentws/agentws-2026-11-27.tar.gz'];
  static override args = { file: Args.string({ description: 'An archive made by `aws backup create`.', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const human = !this.jsonMode;
    const r = await core.backup.restore(this.ctx(), { file: this.args.file, onProgress: (p) => human && STEPS[p.step] && info(STEPS[p.step]) });
    this.output(r, () => {
      info(`restored the backup of ${r.createdAt} (release ${r.appVersion}): ${r.tables} tables, ${r.rows} rows, ${r.files} files${r.migrated.length ? `; then migrated: ${r.migrated.join(', ')}` : ''}`);
      info('start `aws serve`: runtimes start again at each user\'s next turn, with their transcripts.');
    });
  }
}
