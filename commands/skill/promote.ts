import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, info } from '../../src/cli/output.js';
import { canPrompt } from '../../src/cli/secret-input.js';
import { ValidationError } from '../../src/kernel/errors.js';

export default class SkillPromote extends BaseCommand<typeof SkillPromote> {
  static override summary = 'Promote the version of a learned skill that waits for review: every runtime of its tenant loads it from its next turn.';
  static override description =
    'With an id, that skill (whatever its tenant); --version names the version (default: the one waiting for review). Without an id, in a terminal, pick among the tenant\'s skills with a version waiting (--tenant, or the only tenant); without a terminal (or with --json) the id is required, nothing is asked. A version with flagged lines (hosts not on the allow-list, installs, remote execution, high-entropy strings: `aws skill show <id>` lists them) is promoted only with --accept-flags. The version replaces the promoted one in the tenant\'s read-only shared directory every sandbox mounts; audited as the operator (system:cli). Promoting what is promoted changes nothing; a deprecated skill, or a rejected or retired version, cannot be promoted (exit 1). --json prints `{ skill, changed, version }` as PATCH /v1/skills/<id>/promote answers it.';
  static override examples = [
    '<%= config.bin %> skill promote',
    '<%= config.bin %> skill promote 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f --json',
    '<%= config.bin %> skill promote 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f --version 3 --accept-flags',
  ];
  static override args = { id: Args.string({ description: 'Skill id (from `aws skill list`); asked for in a terminal when left out' }) };
  static override flags = {
    tenant: Flags.string({ summary: 'Tenant slug or id, to pick from its skills waiting for review (may be left out when there is only one).' }),
    version: Flags.integer({ summary: 'The version to promote (default: the one waiting for review).', min: 1 }),
    'accept-flags': Flags.boolean({ summary: 'I have read the version\'s flagged lines (`aws skill show <id>`) and promote it all the same.', default: false }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const id = this.args.id ?? (await this.pick());
    const acknowledgeFlags = this.flags['accept-flags'];
    const moved = this.flags.version
      ? await core.skills.reviewVersion(this.ctx(), id, this.flags.version, 'promote', { acknowledgeFlags })
      : await core.skills.move(this.ctx(), id, 'promoted', { acknowledgeFlags });
    const name = moved.skill.name;
    this.output(moved, () => info(moved.changed ? `skill ${name} (version ${moved.version}) is promoted: agents load it from their next turn` : `skill ${name} was promoted already`));
  }

  /** Asks which skill, in a terminal only: a script without an id fails instead of hanging. */
  private async pick(): Promise<string> {
    const usage = 'name the skill: `aws skill promote <id>` (`aws skill list` lists them)';
    if (this.jsonMode || !canPrompt()) throw new ValidationError(`no skill id given: ${usage}`);
    const core = await this.core();
    const waiting = (await core.skills.list(await this.tenantCtx(this.flags.tenant), {})).filter((s) => s.pendingVersion !== null);
    if (!waiting.length) throw new ValidationError('no skill is waiting to be promoted', { hint: 'Skills are proposed after similar successful work; `aws skill list` shows them all.' });
    const { select } = await import('@inquirer/prompts');
    try {
      return await select(
        {
          message: 'Promote which skill?',
          choices: waiting.map((s) => ({ name: `${s.name} (v${s.pendingVersion}${s.promotedVersion ? `, agents load v${s.promotedVersion}` : ''})`, value: s.id, description: clip(s.description, 100) })),
        },
        { output: process.stderr },
      );
    } catch (err) {
      if ((err as Error).name === 'ExitPromptError') throw new ValidationError('cancelled: nothing was changed');
      throw err;
    }
  }
}
