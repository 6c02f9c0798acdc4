import { UnavailableError } from '../kernel/errors.js';
import type { ProbeResult } from '../core/runtime/host/containment-probes.js';
import { runContainmentProbes, type ContainmentOptions } from '../core/runtime/host/containment-runner.js';
import { colors, info } from './output.js';

/**
 * The containment probes as `aws runtime probe` and `aws runner probe` run them: a line per probe as it
 * ends (humans), the report (--json), and whether every probe passed. Throws when no sandbox can start.
 */
export async function runProbesForCli(o: { human: boolean; options: Omit<ContainmentOptions, 'onResult'> }): Promise<{ ok: boolean; results: ProbeResult[]; summary: () => void }> {
  if (o.human) info('running the containment probes (a sandbox each)…');
  const report = await runContainmentProbes({
    ...o.options,
    onResult: (r) => {
      if (!o.human) return;
      const c = colors.out;
      const mark = r.passed ? c.green(r.kind === 'legit' ? '✓ works    ' : '✓ contained') : c.red.bold(r.kind === 'legit' ? '✗ FAILS    ' : '✗ BREACH   ');
      process.stdout.write(`${mark} ${r.id.padEnd(26)} ${r.tries}${r.passed ? '' : `\n              ${r.detail}`}\n`);
    },
  });
  if (!report.sandbox.ok) throw new UnavailableError(report.sandbox.problem ?? 'no sandbox can start here', { code: 'sandbox_unavailable', hint: report.sandbox.hint });
  const failed = report.results.filter((r) => !r.passed);
  return {
    ok: report.ok,
    results: report.results,
    summary: () => {
      const breaches = failed.filter((r) => r.kind === 'contain').length;
      const broken = failed.length - breaches;
      process.stdout.write(
        report.ok
          ? colors.out.green.bold(`\nall ${report.results.length} probes passed: contained, and ordinary work runs\n`)
          : colors.out.red.bold(`\n${breaches} breach(es), ${broken} legitimate task(s) failing, of ${report.results.length} probes\n`),
      );
    },
  };
}
