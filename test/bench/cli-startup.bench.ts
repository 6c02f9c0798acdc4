import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { median, report } from './bench-utils.js';

/**
 * `aws --help` wall time, median of 10, against bare `node -e 0` as baseline (target: <= 150 ms, or at most
 * twice the baseline). The first, unmeasured run also fills the module compile cache (bin/run.js).
 */
export async function cliStartup(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const time = (args: string[]) => {
    const t0 = process.hrtime.bigint();
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
    if (r.status !== 0) throw new Error(`failed: ${args.join(' ')}\n${r.stderr}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  time([join(root, 'bin', 'run.js'), '--help']); // warm the file cache
  const help = Array.from({ length: 10 }, () => time([join(root, 'bin', 'run.js'), '--help']));
  const bare = Array.from({ length: 10 }, () => time(['-e', '0']));
  const m = median(help);
  const b = median(bare);
  return report(
    'CLI start-up: `aws --help`',
    {
      'aws --help median of 10 (ms)': m.toFixed(0),
      'aws --help min / max (ms)': `${Math.min(...help).toFixed(0)} / ${Math.max(...help).toFixed(0)}`,
      'baseline node -e 0 median (ms)': b.toFixed(0),
      'ratio to bare node': (m / b).toFixed(2) + 'x',
    },
    { ok: m <= 150 || m <= 2 * b, target: '<= 150 ms median, or <= 2x bare node' },
  );
}
