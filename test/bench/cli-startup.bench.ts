import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { median, report } from './bench-utils.js';

/** `aws --help` wall time, median of 10 (target < 400 ms), against bare `node -e ''` as baseline. */
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
  const bare = Array.from({ length: 10 }, () => time(['-e', '']));
  const m = median(help);
  return report(
    'CLI start-up: `aws --help`',
    {
      'aws --help median of 10 (ms)': m.toFixed(0),
      'aws --help min / max (ms)': `${Math.min(...help).toFixed(0)} / ${Math.max(...help).toFixed(0)}`,
      "baseline node -e '' median (ms)": median(bare).toFixed(0),
      'ratio to bare node': (m / median(bare)).toFixed(2) + 'x',
    },
    { ok: m < 400, target: '< 400 ms median' },
  );
}
