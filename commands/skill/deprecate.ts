import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class SkillDeprecate extends BaseCommand<typeof SkillDeprecate> {
  static override summary = 'Deprecate a learned skill: agents no longer receive it.';
  static override description =
    'The skill is named by its id alone, whatever its tenant. It is removed from the directory every runtime of the tenant loads skills from and its name is denied to the agent\'s skill tool from the next turn on; audited as the operator (system:cli). Deprecating a deprecated skill changes nothing. --json prints `{ skill, changed }` as PATCH /v1/skills/<id>/deprecate answers it.';
  static override examples = ['<%= config.bin %> skill deprecate 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f'];
  static override args = { id: Args.string({ description: 'Skill id (from `aws skill list`)', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const moved = await core.skills.move(this.ctx(), this.args.id, 'deprecated');
    this.output(moved, () => info(moved.changed ? `skill ${moved.skill.name} is deprecated: agents no longer receive it` : `skill ${moved.skill.name} was deprecated already`));
  }
}
