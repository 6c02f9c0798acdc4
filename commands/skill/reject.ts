import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';
import { ConflictError } from '../../src/kernel/errors.js';

export default class SkillReject extends BaseCommand<typeof SkillReject> {
  static override summary = 'Reject the version of a learned skill that waits for review: the promoted version stays.';
  static override description =
    'The skill is named by its id alone, whatever its tenant; --version names the version (default: the one waiting for review). Agents keep loading the promoted version; a skill never promoted is deprecated with its last proposal. Audited as the operator (system:cli). Rejecting a rejected version changes nothing; a promoted or retired version cannot be rejected (exit 1: deprecate the skill instead). --json prints `{ skill, changed, version }` as PATCH /v1/skills/<id>/versions/<version>/reject answers it.';
  static override examples = ['<%= config.bin %> skill reject 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f', '<%= config.bin %> skill reject 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f --version 3 --json'];
  static override args = { id: Args.string({ description: 'Skill id (from `aws skill list`)', required: true }) };
  static override flags = { version: Flags.integer({ summary: 'The version to reject (default: the one waiting for review).', min: 1 }) };

  async run(): Promise<void> {
    const core = await this.core();
    const version = this.flags.version ?? (await core.skills.get(this.ctx(), this.args.id)).skill.pendingVersion;
    if (version === null) throw new ConflictError('no version of this skill waits for review', { hint: '`aws skill show <id>` lists its versions.' });
    const r = await core.skills.reviewVersion(this.ctx(), this.args.id, version, 'reject');
    this.output(r, () =>
      info(
        !r.changed
          ? `version ${version} of skill ${r.skill.name} was rejected already`
          : r.skill.status === 'deprecated'
            ? `version ${version} of skill ${r.skill.name} is rejected; nothing of it was promoted, so the skill is deprecated`
            : `version ${version} of skill ${r.skill.name} is rejected${r.skill.promotedVersion ? `: agents keep loading version ${r.skill.promotedVersion}` : ''}`,
      ),
    );
  }
}
