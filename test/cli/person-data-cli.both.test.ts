import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractArchive } from '../../src/core/backup/backup-archive.js';
import { openDatabase } from '../../src/db/open-database.js';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

const lines = (s: string) => s.split('\n').filter(Boolean);

/** `aws user export` and `aws user erase` run in-process (a person's data on request). */
describe(`user export / erase commands (${DB_MODE})`, { timeout: 120_000 }, () => {
  let env: TestEnv;
  let host: Awaited<ReturnType<typeof openDatabase>> | undefined;
  const tmp = mkdtempSync(join(tmpdir(), 'agentws-person-cli-'));
  beforeAll(async () => {
    env = await createTestEnv();
    if (DB_MODE === 'embedded') host = await openDatabase(env.config());
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    for (const email of ['alice@acme.example', 'dan@acme.example']) {
      const seeded = await runCommand(['tenant', 'seed', '--name', 'acme', '--owner-email', email], { env });
      expect(seeded.code, seeded.stderr).toBe(0);
    }
  });
  afterAll(async () => {
    await host?.close();
    await env?.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('user export writes a private archive once, and never overwrites a file', async () => {
    const out = join(tmp, 'dan.tar.gz');
    const r = await runCommand(['user', 'export', 'dan@acme.example', '--tenant', 'acme', '--out', out, '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ file: out, counts: { 'profile.json': 1, 'roles.json': 1 }, warnings: [] });
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(existsSync(`${out}.partial`)).toBe(false);
    await extractArchive(out, join(tmp, 'dan'));
    expect(JSON.parse(readFileSync(join(tmp, 'dan', 'profile.json'), 'utf8'))).toMatchObject({ email: 'dan@acme.example', handle: 'dan' });
    const again = await runCommand(['user', 'export', 'dan', '--tenant', 'acme', '--out', out], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/exists/);
  });

  it('user erase erases with --yes, audited as the CLI under the pseudonym; never the last owner', async () => {
    const r = await runCommand(['user', 'erase', 'dan', '--tenant', 'acme', '--yes', '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const { erased } = JSON.parse(r.stdout);
    expect(erased.pseudonym).toMatch(/^erased:[0-9a-f]{12}$/);
    const users = JSON.parse((await runCommand(['user', 'list', '--tenant', 'acme', '--json'], { env })).stdout).users;
    expect(users.map((u: { email: string }) => u.email)).toEqual(['alice@acme.example']);
    const audit = lines((await runCommand(['audit', 'tail', '--tenant', 'acme', '--action', 'user.erase', '--json'], { env })).stdout).map((l) => JSON.parse(l));
    expect(audit).toEqual([expect.objectContaining({ actor: 'system:cli', action: 'user.erase', target: erased.pseudonym })]);
    const last = await runCommand(['user', 'erase', 'alice', '--tenant', 'acme', '--yes'], { env });
    expect(last.code).toBe(1);
    expect(last.stderr).toMatch(/last owner/);
  });
});
