import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, report } from './bench-utils.js';
import { BIN, cleanEnv, spawnUntil, stopChild } from '../helpers/cli.js';
import { waitUntil } from '../helpers/poll.js';

/**
 * `aws serve` from exec to /readyz 200 on an initialised embedded data directory (target < 3 s),
 * median of 5 starts; the baseline is the same with a bare `node -e` process start.
 */
export async function serveReady(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-'));
  const env = cleanEnv({ AGENTWS_CONFIG: join(dir, 'config.env') });
  try {
    const init = spawnSync(process.execPath, [BIN, 'init', '--yes', '--json', '--port', '0'], { cwd: dir, env, encoding: 'utf8' });
    if (init.status !== 0) throw new Error(init.stderr);
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const { child, value: url } = await spawnUntil(process.execPath, [BIN, 'serve'], { cwd: dir, env }, (line) =>
        line.includes('"msg":"Server listening at') ? /at (http\S+)"/.exec(line)![1] : undefined,
      );
      await waitUntil('/readyz 200', async () => (await fetch(`${url}/readyz`).catch(() => null))?.status === 200, { intervalMs: 10 });
      times.push(performance.now() - t0);
      await stopChild(child);
    }
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', ''], { env });
    const bare = performance.now() - t0;
    const m = median(times);
    return report(
      'serve ready: exec -> /readyz 200 (embedded, initialised)',
      {
        'median of 5 (ms)': m.toFixed(0),
        'all runs (ms)': times.map((t) => t.toFixed(0)).join(', '),
        'baseline bare node start (ms)': bare.toFixed(0),
      },
      { ok: m < 3000, target: '< 3000 ms median' },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
