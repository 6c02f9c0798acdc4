import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { BaseCommand } from '../../src/cli/base-command.js';
import { runProbesForCli } from '../../src/cli/probe-report.js';
import { ConfigError } from '../../src/kernel/errors.js';
import { readRunnerSettings } from '../../src/runner/runner-settings.js';

export default class RunnerProbe extends BaseCommand<typeof RunnerProbe> {
  static override summary = 'Run the containment probes on a runner host, as its runtimes are contained.';
  static override description =
    'The probes of `aws runtime probe`, with this runner\'s settings (the same environment as `aws runner`): its runner token and token file, its data dir and the control plane it dials are targets no sandbox may reach. The control plane is tried directly and through the egress proxy with its address allowed as an operator\'s private allow list may allow it: the runner\'s own rule must still refuse it. Exits 1 on any breach. Needs no connection to the control plane.';
  static override examples = ['sudo -u agentws env $(cat /etc/agentws/runner.env) <%= config.bin %> runner probe', '<%= config.bin %> runner probe --json'];
  protected static override needsConfig = false;
  protected static override needsCore = false;

  async run(): Promise<void> {
    const settings = readRunnerSettings(process.env, {}, { hostname: hostname(), readFile: (p) => readFileSync(p, 'utf8'), resolvePath: (p) => resolve(p) });
    if (!settings.ok) throw new ConfigError(settings.problems, { hint: 'The probes use the runner\'s own settings: see `aws runner --help`.' });
    const s = settings.value;
    const report = await runProbesForCli({
      human: !this.jsonMode,
      options: {
        installed: { configPath: process.env.AGENTWS_RUNNER_TOKEN_FILE?.trim() || undefined, dataDir: s.dataDir, secrets: [s.token] },
        controlUrl: s.controlUrl,
      },
    });
    this.output({ ok: report.ok, results: report.results }, report.summary);
    if (!report.ok) this.exit(1);
  }
}
