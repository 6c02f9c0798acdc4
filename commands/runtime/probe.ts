import { BaseCommand } from '../../src/cli/base-command.js';
import { colors, info } from '../../src/cli/output.js';
import { CONFIG_VARS } from '../../src/config/config.schema.js';
import { readConfigFile } from '../../src/config/load-config.js';
import { UnavailableError } from '../../src/core/errors.js';
import { runContainmentProbes } from '../../src/core/runtime/containment-probes.js';

export default class RuntimeProbe extends BaseCommand<typeof RuntimeProbe> {
  static override summary = 'Run the containment probes: what a hostile agent would try from inside a real sandbox on this host.';
  static override description =
    'Starts a sandbox per probe exactly as a runtime gets one (bubblewrap, the egress proxy), with secrets planted outside it and this installation\'s config file and data dir as extra targets, and checks that every escape attempt fails and ordinary work (files, git, python, node, ripgrep, an allowed host through the proxy) succeeds. Exits 1 on any breach, or when no sandbox can start here (with the fix). Needs no database and no running serve.';
  static override examples = ['<%= config.bin %> runtime probe', '<%= config.bin %> runtime probe --json'];
  protected static override needsCore = false;

  async run(): Promise<void> {
    const config = this.appConfig;
    // The installation's secrets, wherever they come from (file or environment): none may show inside.
    const file = config.configFile ? readConfigFile(config.configFile) : {};
    const secrets = CONFIG_VARS.filter((v) => v.kind === 'secret' || v.name === 'DATABASE_URL').map((v) => process.env[v.name] ?? file[v.name] ?? '');
    const human = !this.jsonMode;
    if (human) info('running the containment probes (a sandbox each)…');
    const report = await runContainmentProbes({
      installed: { configPath: config.configFile ?? undefined, dataDir: config.dataDir, secrets },
      apiPort: config.server.port || undefined,
      onResult: (r) => {
        if (!human) return;
        const c = colors.out;
        const mark = r.passed ? c.green(r.kind === 'legit' ? '✓ works    ' : '✓ contained') : c.red.bold(r.kind === 'legit' ? '✗ FAILS    ' : '✗ BREACH   ');
        process.stdout.write(`${mark} ${r.id.padEnd(26)} ${r.tries}${r.passed ? '' : `\n              ${r.detail}`}\n`);
      },
    });
    if (!report.sandbox.ok) throw new UnavailableError(report.sandbox.problem ?? 'no sandbox can start here', { code: 'sandbox_unavailable', hint: report.sandbox.hint });
    const failed = report.results.filter((r) => !r.passed);
    this.output({ ok: report.ok, results: report.results }, () => {
      const breaches = failed.filter((r) => r.kind === 'contain').length;
      const broken = failed.length - breaches;
      process.stdout.write(
        report.ok
          ? colors.out.green.bold(`\nall ${report.results.length} probes passed: contained, and ordinary work runs\n`)
          : colors.out.red.bold(`\n${breaches} breach(es), ${broken} legitimate task(s) failing, of ${report.results.length} probes\n`),
      );
    });
    if (!report.ok) this.exit(1);
  }
}
