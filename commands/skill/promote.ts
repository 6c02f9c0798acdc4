import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, info } from '../../src/cli/output.js';
import { canPrompt } from '../../src/cli/secret-input.js';
import { ValidationError } from '../../src/core/errors.js';

export default class SkillPromote extends BaseCommand<typeof SkillPromote> {
  static override summary = 'Promote a learned skill: every runtime of its tenant loads it from its next turn.';
  static override description =
    'With an id, that skill (whatever its tenant). Without one, in a terminal, pick among the tenant\'s proposed skills (--tenant, or the only tenant); without a terminal (or with --json) the id is required, nothing is asked. The skill is written into the tenant\'s read-only shared directory every sandbox mounts and allowed to the agent\'s skill tool; audited as the operator (system:cli). Promoting a promoted skill changes nothing; a deprecated one cannot be promoted (exit 1). --json prints `{ skill, changed }` as PATCH /v1/skills/<id>/promote answers it.';
  static override examples = ['<%= config.bin %> skill promote', '<%= config.bin %> skill promote 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f --json'];
  static override args = { id: Args.string({ description: 'Skill id (from `aws skill list --status proposed`); asked for in a terminal when left out' }) };
  static override flags = { tenant: Flags.string({ summary: 'Tenant slug or id, to pick from its proposed skills (may be left out when there is only one).' }) };

  async run(): Promise<void> {
    const core = await this.core();
    const id = this.args.id ?? (await this.pick());
    const moved = await core.skills.move(this.ctx(), id, 'promoted');
    this.output(moved, () => info(moved.changed ? `skill ${moved.skill.name} (version ${moved.skill.version}) is promoted: agents load it from their next turn` : `skill ${moved.skill.name} was promoted already`));
  }

  /** Asks which proposed skill, in a terminal only: a script without an id fails instead of hanging. */
  private async pick(): Promise<string> {
    const usage = 'name the skill: `aws skill promote <id>` (`aws skill list --status proposed` lists them)';
    if (this.jsonMode || !canPrompt()) throw new ValidationError(`no skill id given: ${usage}`);
    const core = await this.core();
    const proposed = await core.skills.list(await this.tenantCtx(this.flags.tenant), { status: 'proposed' });
    if (!proposed.length) throw new ValidationError('no skill is waiting to be promoted', { hint: 'Skills are proposed after similar successful work; `aws skill list` shows them all.' });
    const { select } = await import('@inquirer/prompts');
    try {
      return await select(
        { message: 'Promote which skill?', choices: proposed.map((s) => ({ name: `${s.name} (v${s.version})`, value: s.id, description: clip(s.description, 100) })) },
        { output: process.stderr },
      );
    } catch (err) {
      if ((err as Error).name === 'ExitPromptError') throw new ValidationError('cancelled: nothing was changed');
      throw err;
    }
  }
}
