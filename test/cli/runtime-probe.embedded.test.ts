import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

// `aws runtime probe` needs no database: once is enough (the embedded run).
describe.runIf(DB_MODE === 'embedded')('aws runtime probe', { timeout: 240_000 }, () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv();
  });
  afterAll(async () => {
    await env?.cleanup();
  });

  it('runs every probe in a real sandbox on this host: all contained, legitimate work passes, exit 0', async () => {
    const r = await runCommand(['runtime', 'probe', '--json'], { env, timeoutMs: 220_000 });
    const doc = JSON.parse(r.stdout);
    const failed = (doc.results ?? []).filter((x: { passed: boolean }) => !x.passed);
    expect(failed, r.stderr).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(doc.ok).toBe(true);
    // The installation's own config file and data dir were probed too.
    expect(doc.results.map((x: { id: string }) => x.id)).toEqual(expect.arrayContaining(['installed-config', 'installed-data-dir', 'config-cat', 'legit-git']));
    // Its secrets never appear in what the command prints.
    for (const k of ['AGENTWS_JWT_SECRET', 'AGENTWS_API_KEY', 'AGENTWS_ENCRYPTION_KEY']) expect(r.stdout + r.stderr).not.toContain(env.vars[k]);

    const human = await runCommand(['runtime', 'probe'], { env, timeoutMs: 220_000 });
    expect(human.stdout).toMatch(/✓ contained config-cat/);
    expect(human.stdout).toMatch(/all \d+ probes passed/);
  });
});
