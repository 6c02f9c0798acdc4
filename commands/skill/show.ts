import { Args } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { clip, table } from '../../src/cli/output.js';

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : '-');

export default class SkillShow extends BaseCommand<typeof SkillShow> {
  static override summary = 'Show a learned skill: the SKILL.md waiting for review, its flagged lines, versions and the work it was learnt from.';
  static override description =
    'The skill is named by its id alone, whatever its tenant. Prints its status, the version agents load and the one waiting for review, how often agents loaded it since it was promoted, the SKILL.md of the version waiting for review (else the promoted one), the lines of it a reviewer must read before promoting it (hosts not on the allow-list, installs, remote execution, high-entropy strings: promote them with --accept-flags), every version with its status, and the source trajectories (request, tools, outcome). --json prints `{ skill }` as GET /v1/skills/<id> answers it to a reviewer. An unknown id fails with exit 1.';
  static override examples = ['<%= config.bin %> skill show 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f', '<%= config.bin %> skill show 5d0c2a9e-3b1f-4c6e-8f70-1a2b3c4d5e6f --json'];
  static override args = { id: Args.string({ description: 'Skill id (from `aws skill list`)', required: true }) };

  async run(): Promise<void> {
    const core = await this.core();
    const detail = await core.skills.get(this.ctx(), this.args.id);
    this.output(detail, () => {
      const s = detail.skill;
      const head: Array<[string, string]> = [
        ['id', s.id],
        ['name', s.name],
        ['status', s.status],
        ['version', `${s.version}`],
        ['loaded', s.promotedVersion ? `version ${s.promotedVersion}` : '-'],
        ['waiting', s.pendingVersion ? `version ${s.pendingVersion}: \`aws skill promote ${s.id}\` or \`aws skill reject ${s.id}\`` : '-'],
        ['promoted', iso(s.promotedAt)],
        ['deprecated', iso(s.deprecatedAt)],
        ['loads', `${s.loads}${s.promotedAt ? ' since promotion' : ''}`],
      ];
      const out = [...head.map(([k, v]) => `${k.padEnd(11)} ${v}`), '', `SKILL.md of version ${s.contentVersion}:`, '', s.content.trimEnd(), ''];
      out.push(
        s.flags.length
          ? `${s.flags.length} flagged line(s) of version ${s.contentVersion} (read them; promote with --accept-flags):\n${table(
              s.flags.map((f) => ({ line: f.line, reason: clip(f.reason, 60), text: clip(f.text, 70) })),
              ['line', 'reason', 'text'],
            )}`
          : `No flagged lines in version ${s.contentVersion}.`,
        '',
      );
      out.push(table(s.versions.map((v) => ({ version: v.version, status: v.status, created: v.createdAt, sources: v.sourceTrajectories.length, description: clip(v.description, 60) })), ['version', 'status', 'created', 'sources', 'description']), '');
      const sources = (s.sourceTrajectories as Array<{ id: string; outcome?: string; tools?: string[]; request?: string }>).map((t) => ({
        id: t.id,
        outcome: t.outcome ?? '-',
        tools: clip((t.tools ?? []).join(' > '), 50),
        request: clip(t.request ?? '', 50),
      }));
      out.push(sources.length ? table(sources, ['id', 'outcome', 'tools', 'request']) : 'No source trajectories.');
      process.stdout.write(out.join('\n') + '\n');
    });
  }
}
