import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, info, table } from '../../src/cli/output.js';
import { SKILL_STATUSES } from '../../src/core/skills/skill-fns.js';

export default class SkillList extends BaseCommand<typeof SkillList> {
  static override summary = 'List a tenant\'s learned skills, newest first.';
  static override description =
    'Skills are proposed by the learning loop from similar successful work and reach agents only once promoted; a new version of a promoted skill waits for review beside the promoted one. Columns: id, name, status, version (the latest), loaded (the version agents load), waiting (the version waiting for review), created, description (shortened; `aws skill show <id>` prints the SKILL.md and its flagged lines). --json prints `{ "skills": [...] }` as GET /v1/skills answers it to a reviewer.';
  static override examples = ['<%= config.bin %> skill list', '<%= config.bin %> skill list --status proposed', '<%= config.bin %> skill list --tenant acme --json'];
  static override flags = {
    tenant: Flags.string({ summary: 'Tenant slug or id (may be left out when there is only one).' }),
    status: Flags.string({ summary: 'Only skills in this status.', options: [...SKILL_STATUSES] }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const skills = await core.skills.list(await this.tenantCtx(this.flags.tenant), { status: this.flags.status });
    this.output({ skills }, () => {
      if (!skills.length) return info(`No skills${this.flags.status ? ` ${this.flags.status}` : ''} yet.`);
      const rows = skills.map((s) => ({
        id: s.id,
        name: s.name,
        status: s.status,
        version: s.version,
        loaded: s.promotedVersion ?? '-',
        waiting: s.pendingVersion ?? '-',
        created: s.createdAt,
        description: clip(s.description, 60),
      }));
      process.stdout.write(table(rows, ['id', 'name', 'status', 'version', 'loaded', 'waiting', 'created', 'description']) + '\n');
    });
  }
}
