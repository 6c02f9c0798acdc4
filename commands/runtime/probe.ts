import { BaseCommand } from '../../src/cli/base-command.js';
import { runProbesForCli } from '../../src/cli/probe-report.js';
import { CONFIG_VARS } from '../../src/config/config.schema.js';
import { readConfigFile } from '../../src/config/load-config.js';

export default class RuntimeProbe extends BaseCommand<typeof RuntimeProbe> {
  static override summary = 'Run the containment probes: what a hostile agent would try from inside a real sandbox on this host.';
  static override description =
    'Starts a sandbox per probe exactly as a runtime gets one (bubblewrap, the egress proxy), with secrets planted outside it and this installation\'s config file and data dir as extra targets, and checks that every escape attempt fails and ordinary work (files, git, python, node, ripgrep, an allowed host through the proxy) succeeds. Exits 1 on any breach, or when no sandbox can start here (with the fix). Needs no database and no running serve. On a runner host, run `aws runner probe`.';
  static override examples = ['<%= config.bin %> runtime probe', '<%= config.bin %> runtime probe --json'];
  protected static override needsCore = false;

  async run(): Promise<void> {
    const config = this.appConfig;
    // The installation's secrets, wherever they come from (file or environment): none may show inside.
    const file = config.configFile ? readConfigFile(config.configFile) : {};
    const secrets = CONFIG_VARS.filter((v) => v.kind === 'secret' || v.name === 'DATABASE_URL').map((v) => process.env[v.name] ?? file[v.name] ?? '');
    const report = await runProbesForCli({
      human: !this.jsonMode,
      options: { installed: { configPath: config.configFile ?? undefined, dataDir: config.dataDir, secrets }, apiPort: config.server.port || undefined },
    });
    this.output({ ok: report.ok, results: report.results }, report.summary);
    if (!report.ok) this.exit(1);
  }
}
