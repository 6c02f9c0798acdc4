import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, report, scratchDatabase } from './bench-utils.js';

const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 11);

/**
 * The CLI's start-up, each command's wall time from exec to exit, against bare `node -e 0` measured in
 * the same run (the runs interleaved, so a busy moment weighs on all of them alike):
 * - `aws --help` and `aws user --help`: help comes from oclif's manifest without loading oclif
 *   (src/cli/fast-help.ts); target <= 2x bare node (median of RUNS);
 * - `aws audit tail --json -n 1`: a command that opens the database (PostgreSQL when the tests' server is
 *   reachable, else the embedded one), reads one entry and closes; for information, with its ratio.
 * A first, unmeasured run of each fills the module compile cache (bin/run.js) and the file cache.
 */
export async function cliStartup(): Promise<boolean> {
  const root = new URL('../..', import.meta.url).pathname;
  const bin = join(root, 'bin', 'run.js');
  const dir = mkdtempSync(join(tmpdir(), 'aws-bench-cli-'));
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', AGENTWS_CONFIG: join(dir, 'config.env') };
  const db = await scratchDatabase('agentws_bench_cli').catch(() => null);
  const time = (args: string[]) => {
    const t0 = process.hrtime.bigint();
    const r = spawnSync(process.execPath, args, { cwd: dir, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`failed: ${args.join(' ')}\n${r.stderr}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  try {
    // A database with a tenant and its first audit entries, as `aws init` leaves it.
    time([bin, 'init', '--yes', '--json', '--no-demo', '--port', '0', ...(db ? ['--database-url', db.url] : [])]);
    const commands = {
      bare: ['-e', '0'],
      help: [bin, '--help'],
      topic: [bin, 'user', '--help'],
      audit: [bin, 'audit', 'tail', '--json', '-n', '1'],
    };
    const times: Record<keyof typeof commands, number[]> = { bare: [], help: [], topic: [], audit: [] };
    for (const args of Object.values(commands)) time(args);
    for (let i = 0; i < RUNS; i++) for (const [name, args] of Object.entries(commands)) times[name as keyof typeof commands].push(time(args));

    const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])) as Record<keyof typeof commands, number>;
    const ratio = (x: number) => (x / m.bare).toFixed(2) + 'x';
    const spread = (xs: number[]) => `${Math.min(...xs).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;
    return report(
      `CLI start-up (median of ${RUNS}, against node -e 0 in the same run)`,
      {
        'baseline node -e 0 (ms)': m.bare.toFixed(0),
        'aws --help (ms)': m.help.toFixed(0),
        'aws --help ratio': ratio(m.help),
        'aws user --help (ms)': m.topic.toFixed(0),
        'aws user --help ratio': ratio(m.topic),
        'audit tail: its database': db ? 'PostgreSQL' : 'embedded',
        'aws audit tail --json -n 1 (ms)': m.audit.toFixed(0),
        'aws audit tail ratio (info)': ratio(m.audit),
        'min / max: node, --help, user --help, audit': [times.bare, times.help, times.topic, times.audit].map(spread).join(', '),
      },
      { ok: m.help <= 2 * m.bare && m.topic <= 2 * m.bare, target: '`aws --help` and `aws user --help` <= 2x node -e 0' },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  }
}
