import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';
import { Config, Help } from '@oclif/core';
import { describe, expect, it } from 'vitest';
import { renderFastHelp } from '../../src/cli/fast-help.js';
import { BIN, cleanEnv, ROOT, runCli } from '../helpers/cli.js';

/*
 * bin/run.js prints help from oclif's manifest (src/cli/fast-help.ts) without loading @oclif/core. These
 * check that it prints what oclif's own help prints, for the root, every topic and every command, at
 * several widths; that it holds everything the manifest holds; and that whatever is not help (an unknown
 * command, --version) is still oclif's. Needs the build (dist/, oclif.manifest.json).
 */

interface ManifestCommand {
  id: string;
  flags: Record<string, { hidden?: boolean; char?: string; helpGroup?: string }>;
  args: Record<string, { hidden?: boolean }>;
}
const manifest = JSON.parse(readFileSync(join(ROOT, 'oclif.manifest.json'), 'utf8')) as { commands: Record<string, ManifestCommand> };
const pjson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { oclif: { topics: Record<string, unknown>; helpOptions?: object } };
const ids = Object.keys(manifest.commands);
/** Every topic oclif shows help for: the declared ones and each prefix of a command id that is not a command. */
const topics = [...new Set([...Object.keys(pjson.oclif.topics), ...ids.flatMap((id) => id.split(':').slice(0, -1).map((_, i, a) => a.slice(0, i + 1).join(':')))])].filter(
  (t) => !manifest.commands[t],
);

/** What oclif's Help prints for `aws <argv>` (as bin/run.js would call it), captured; a fresh Config each time (Help renames the ids it shows). */
async function oclifHelp(argv: string[], options: { columns: number; all?: boolean }): Promise<string> {
  const config = await Config.load(ROOT);
  let out = '';
  class Captured extends Help {
    protected override log(...args: string[]): void {
      out += format(...args) + '\n';
    }
  }
  const opts = options.all === undefined ? { ...pjson.oclif.helpOptions, maxWidth: options.columns } : { all: options.all, maxWidth: options.columns };
  await new Captured(config, opts).showHelp(argv);
  return out;
}

const fast = (argv: string[], columns = 80) => renderFastHelp(argv, { root: ROOT, columns, color: false });

describe('fast help (from the manifest, without oclif)', () => {
  it.each([80, 120, 45])("prints exactly oclif's help for the root, every topic and every command, %i columns wide", async (columns) => {
    const cases: Array<{ argv: string[]; oclif: () => Promise<string> }> = [
      { argv: ['--help'], oclif: () => oclifHelp(['--help'], { columns }) },
      { argv: [], oclif: () => oclifHelp([], { columns }) },
      // The help plugin's command: top-level topics and commands only.
      { argv: ['help'], oclif: () => oclifHelp([], { columns, all: false }) },
      { argv: ['help', 'user', 'sign-in-link'], oclif: () => oclifHelp(['user', 'sign-in-link'], { columns, all: false }) },
      ...topics.flatMap((t) => [
        { argv: [...t.split(':'), '--help'], oclif: () => oclifHelp([...t.split(':'), '--help'], { columns }) },
        // A topic named alone shows its help too (oclif's main passes it the topic's id).
        { argv: t.split(':'), oclif: () => oclifHelp([t], { columns }) },
      ]),
      ...ids.map((id) => ({ argv: [...id.split(':'), '--help'], oclif: () => oclifHelp([...id.split(':'), '--help'], { columns }) })),
    ];
    expect(cases.length).toBeGreaterThan(ids.length + topics.length);
    for (const c of cases) {
      const expected = await c.oclif();
      expect({ argv: c.argv.join(' '), help: fast(c.argv, columns) }).toEqual({ argv: c.argv.join(' '), help: expected });
    }
  });

  it('lists what the manifest holds: every topic and command at the root, every command of a topic, every flag and argument of a command', () => {
    const root = fast(['--help'])!;
    for (const t of topics) expect(root).toMatch(new RegExp(`^  ${t.replaceAll(':', ' ')}  `, 'm'));
    for (const id of ids) expect(root).toMatch(new RegExp(`^  ${id.replaceAll(':', ' ')}  `, 'm'));

    for (const topic of ['user', 'connector:git', 'runner:token']) {
      const help = fast([...topic.split(':'), '--help'])!;
      const own = ids.filter((id) => id.startsWith(`${topic}:`) && id.split(':').length === topic.split(':').length + 1);
      expect(own.length).toBeGreaterThan(2);
      for (const id of own) expect(help).toMatch(new RegExp(`^  ${id.replaceAll(':', ' ')}  `, 'm'));
    }

    for (const id of ['user:sign-in-link', 'serve', 'connector:git:update', 'audit:tail']) {
      const command = manifest.commands[id];
      const help = fast([...id.split(':'), '--help'])!;
      expect(help).toContain(`$ aws ${id.replaceAll(':', ' ')}`);
      for (const [name, flag] of Object.entries(command.flags)) {
        if (flag.hidden) continue;
        expect(help).toMatch(new RegExp(`^ +${flag.char ? `-${flag.char}, ` : ''}--(\\[no-\\])?${name}\\b`, 'm'));
      }
      for (const name of Object.keys(command.args)) expect(help).toContain(name.toUpperCase());
      expect(help).toContain('EXAMPLES');
    }
    // The default of a flag, and the global flags in their own section.
    expect(fast(['user', 'sign-in-link', '--help'])).toMatch(/--expires-in=<value>\s+\[default: 10m\]/);
    expect(fast(['serve', '--help'])).toMatch(/^GLOBAL FLAGS\n {2}--config=<value>/m);
  });

  it('declines what is not help, or not help it knows, so that oclif answers', () => {
    for (const argv of [['--version'], ['nosuch', '--help'], ['user', 'nosuch', '--help'], ['tenant', 'list'], ['serve'], ['runner'], ['help', 'nosuch'], ['help', '-n'], ['user:list', 'x']]) {
      expect({ argv, help: fast(argv) }).toEqual({ argv, help: undefined });
    }
  });

  it('bin/run.js prints it without loading oclif; an unknown command and --version still go through oclif', async () => {
    // Lists every module the CLI loads after Node's own start-up, on stderr when it exits.
    const trace = `data:text/javascript,${encodeURIComponent(
      "import module from 'node:module'; const seen = []; module.registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } }); process.on('exit', () => process.getBuiltinModule('node:fs').writeSync(2, '\\nMODULES ' + JSON.stringify(seen) + '\\n'));",
    )}`;
    const run = (args: string[]) => {
      const r = spawnSync(process.execPath, ['--import', trace, BIN, ...args], { cwd: ROOT, encoding: 'utf8', env: cleanEnv() });
      const modules = JSON.parse(/^MODULES (.*)$/m.exec(r.stderr)![1]) as string[];
      return { code: r.status, stdout: r.stdout, stderr: r.stderr.replace(/\nMODULES .*\n$/, ''), modules };
    };
    for (const argv of [['--help'], ['user'], ['user', '--help'], ['user', 'sign-in-link', '--help'], ['help', 'serve']]) {
      const r = run(argv);
      expect({ argv, code: r.code, stderr: r.stderr }).toEqual({ argv, code: 0, stderr: '' });
      expect(r.stdout).toBe(fast(argv));
      expect(r.modules.filter((m) => m.includes('node_modules'))).toEqual([]);
    }
    const version = run(['--version']);
    expect(version.stdout).toMatch(/^agent-workspace-service\/\d+\.\d+\.\d+ \S+ node-v\d+/);
    expect(version.modules.some((m) => m.includes('@oclif/core'))).toBe(true);

    const unknown = await runCli(['nosuch', '--help']);
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toContain('Command nosuch not found.');
    const unknownInTopic = await runCli(['user', 'nosuch', '--help']);
    expect(unknownInTopic).toMatchObject({ code: 2, stdout: '' });
    expect(unknownInTopic.stderr).toContain('Command user:nosuch not found.');
    const notACommand = await runCli(['nosuch']);
    expect(notACommand.code).toBe(2);
    expect(notACommand.stderr).toContain('command nosuch not found');
  });
});
