import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

/** Runs a tool of node_modules/.bin in the repository; resolves with its exit code and what it printed. */
function run(tool: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'node_modules', '.bin', tool), args, { cwd: ROOT, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

// The same checks as `npm run lint`, so the suite fails on what they find (biome.json, knip.jsonc).
describe.concurrent('lint', () => {
  it('biome finds nothing', async () => {
    const r = await run('biome', ['lint', '--error-on-warnings', '--max-diagnostics=30', '.']);
    expect(r.code, r.output).toBe(0);
  }, 60_000);

  it('knip finds no unused file, export or dependency', async () => {
    const r = await run('knip', ['--no-progress']);
    expect(r.code, r.output).toBe(0);
  }, 60_000);
});
